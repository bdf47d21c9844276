"""Support models (cases and comments) live here."""
