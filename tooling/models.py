"""Records the tool API keeps: per conversation, what it showed, and every tool call."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from core.models import Company, Conversation


class ExposedReference(models.Model):
    """A public reference one conversation has been shown (or has created): the exposure ledger.

    Mutations resolve the references they are given only among these (tooling.ledger), so an
    id the customer never saw in this conversation cannot be acted on. `label` is a loose
    human key (a date and time) and `label_key` its normalised form for matching.
    """

    class Kind(models.TextChoices):
        """What a reference designates: the ledger's closed set, so the staff's filter of
        kinds offers these instead of reading the distinct kinds of every row."""

        APPOINTMENT = "appointment", _("appointment")
        SLOT = "slot", _("slot")
        QUOTE = "quote", _("quote")
        OPPORTUNITY = "opportunity", _("opportunity")
        CASE = "case", _("case")

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="+", verbose_name=_("company")
    )
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.CASCADE,
        related_name="exposed_references",
        verbose_name=_("conversation"),
    )
    kind = models.CharField(_("kind"), max_length=32, choices=Kind.choices)
    reference = models.CharField(_("reference"), max_length=64)
    label = models.CharField(_("label"), max_length=200, blank=True)
    label_key = models.CharField(
        max_length=200, blank=True, editable=False, verbose_name=_("label key")
    )
    data = models.JSONField(_("data"), default=dict, blank=True)
    created_at = models.DateTimeField(_("first shown"), auto_now_add=True)
    last_seen_at = models.DateTimeField(_("last shown"), auto_now=True)

    class Meta:
        verbose_name = _("exposed reference")
        verbose_name_plural = _("exposed references")
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "kind", "reference"], name="unique_exposed_reference"
            ),
        ]
        indexes = [
            models.Index(fields=["conversation", "kind", "label_key"], name="exposed_label"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.reference}"


class ToolCall(models.Model):
    """One tool call as the conversation trace keeps it (tooling.trace): who, what, how it
    ended and how long it took. Arguments are stored redacted; the answer is never stored."""

    class Outcome(models.TextChoices):
        OK = "ok", _("ok")
        ERROR = "error", _("error")

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="+", verbose_name=_("company")
    )
    # The conversation by its external id, as the Gateway sent it (core.Conversation.external_id
    # within the company): no foreign key, so writing the trace is one INSERT, also for a call
    # whose conversation was never stored (a missing id, a write that rolled back).
    conversation_key = models.CharField(_("conversation id"), max_length=255, blank=True)
    tool = models.CharField(_("tool"), max_length=128)
    surface = models.CharField(_("surface"), max_length=16)
    outcome = models.CharField(_("outcome"), max_length=8, choices=Outcome.choices)
    error_type = models.CharField(_("error type"), max_length=16, blank=True)
    code = models.CharField(_("code"), max_length=64, blank=True)
    replayed = models.BooleanField(_("replayed"), default=False)
    latency_ms = models.FloatField(_("latency (ms)"))
    result_count = models.PositiveIntegerField(_("items returned"), null=True, blank=True)
    arguments = models.JSONField(_("arguments (redacted)"), default=dict, blank=True)
    idempotency_key = models.CharField(_("idempotency key"), max_length=255, blank=True)
    created_at = models.DateTimeField(_("called at"))

    class Meta:
        verbose_name = _("tool call")
        verbose_name_plural = _("tool calls")
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(
                fields=["company", "conversation_key", "created_at"], name="tool_call_conversation"
            ),
            models.Index(fields=["company", "created_at"], name="tool_call_company"),
            models.Index(fields=["created_at"], name="tool_call_created"),
        ]

    def __str__(self) -> str:
        return f"{self.tool} · {self.get_outcome_display()}"
