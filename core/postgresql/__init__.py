"""Django's PostgreSQL backend with a health check that costs no round trip and a bound on how
long a web request waits for the server (see base.py)."""
