"""Plain Django baselines for bench/load.py: what a minimal django-ninja view with the ORM serves
on the same server shape and database as Garante, the yardstick its scenarios are measured by."""
