"""Django's SQLite backend, able to keep the evidence of a failed call (see base.py)."""
