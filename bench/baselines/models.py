"""The rows the baselines read and write: plain models, no migrations (`migrate --run-syncdb`)."""

from django.db import models


class Item(models.Model):
    """Read by its unique key: the plain read (bench/load.py fills 100,000 rows)."""

    key = models.CharField(max_length=40, unique=True)
    name = models.CharField(max_length=100)
    price_cents = models.IntegerField()
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.key


class Note(models.Model):
    """Inserted with a fresh unique key on every call: the plain write."""

    key = models.CharField(max_length=80, unique=True)
    subject = models.CharField(max_length=200)
    description = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.key
