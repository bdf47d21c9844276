"""Test-only models: a reservation with an owner and a terminal state, and a counter."""

from django.db import models

from core.models import Company


class Reservation(models.Model):
    """Owned by the conversation that made it; cancelling it twice is refused."""

    class State(models.TextChoices):
        SCHEDULED = "scheduled"
        CANCELLED = "cancelled"

    company = models.ForeignKey(Company, on_delete=models.CASCADE, related_name="+")
    reference = models.CharField(max_length=16, unique=True)
    owner = models.CharField(max_length=255)
    state = models.CharField(max_length=16, choices=State.choices, default=State.SCHEDULED)
    cancellations = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return self.reference


class Counter(models.Model):
    """Counts the effects a write tool really had: one increment per execution."""

    company = models.ForeignKey(Company, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=64)
    value = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["company", "name"], name="testapp_unique_counter"),
        ]

    def __str__(self) -> str:
        return f"{self.name}={self.value}"
