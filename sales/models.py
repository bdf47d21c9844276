"""Sales models (catalog, price lists, quotes, opportunities) live here."""
