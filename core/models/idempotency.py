"""The idempotency records every API writes through core.idempotency."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from core.models.tenancy import Company


class IdempotencyRecord(models.Model):
    """One logical write operation, keyed by (company, key), stored with its successful answer
    (core.idempotency: every write of the tool API and of the integration API).

    Inserted in the same transaction as the write's effect: both commit or neither does. Past
    `replay_until` the response is dropped and the row stays as a tombstone until `expires_at`,
    so a late retry is told the key expired instead of executing again.
    """

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="+", verbose_name=_("company")
    )
    key = models.CharField(_("key"), max_length=255)
    operation = models.CharField(_("operation"), max_length=200)
    fingerprint = models.CharField(_("fingerprint"), max_length=64)
    # The exact JSON text of the answer, not a JSONField: PostgreSQL's jsonb reorders keys, and
    # a replay must be the same text as the original (seed 2: "mismo estado, mismo texto").
    response = models.TextField(_("response"), null=True, blank=True)
    status_code = models.PositiveSmallIntegerField(_("status code"), default=200)
    created_at = models.DateTimeField(_("created"))
    replay_until = models.DateTimeField(_("replayable until"))
    expires_at = models.DateTimeField(_("forgotten at"), db_index=True)
    replay_count = models.PositiveIntegerField(_("replays"), default=0)
    last_replayed_at = models.DateTimeField(_("last replayed"), null=True, blank=True)

    class Meta:
        verbose_name = _("idempotency record")
        verbose_name_plural = _("idempotency records")
        constraints = [
            models.UniqueConstraint(fields=["company", "key"], name="unique_idempotency_key"),
        ]

    def __str__(self) -> str:
        return f"{self.operation} [{self.key[:24]}]"
