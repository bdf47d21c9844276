"""Sales: catalog, price lists, stock, quotes and opportunities."""
