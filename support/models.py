"""Support models: cases customers open, their comments, and each company's support settings."""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django_fsm import FSMField, FSMModelMixin, transition
from django_fsm_log.decorators import fsm_log_by, fsm_log_description

from core.models import Company, Contact, Conversation
from core.models.messages import CustomerMessage


class Case(FSMModelMixin, models.Model):
    """A customer's request for help, worked by staff until the customer has it solved.

    `state` is protected: only the transition methods below change it, and only services call
    them (under a row lock). `closed` is terminal; a customer who still has the problem opens
    a new case linked through `related_case`.
    """

    class State(models.TextChoices):
        OPEN = "open", _("Open")
        IN_PROGRESS = "in_progress", _("In progress")
        WAITING_CUSTOMER = "waiting_customer", _("Waiting on the customer")
        RESOLVED = "resolved", _("Resolved")
        CLOSED = "closed", _("Closed")

    class Channel(models.TextChoices):
        AGENT = "agent", _("Conversational agent")
        EMAIL = "email", _("Email")
        PHONE = "phone", _("Phone")
        IN_PERSON = "in_person", _("In person")
        OTHER = "other", _("Other")

    class Priority(models.TextChoices):
        LOW = "low", _("Low")
        NORMAL = "normal", _("Normal")
        HIGH = "high", _("High")
        URGENT = "urgent", _("Urgent")

    REFERENCE_PREFIX = "CS"

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="cases", verbose_name=_("company")
    )
    reference = models.CharField(_("reference"), max_length=16, editable=False)
    contact = models.ForeignKey(
        Contact, on_delete=models.PROTECT, related_name="cases", verbose_name=_("contact")
    )
    subject = models.CharField(_("subject"), max_length=200)
    description = models.TextField(_("description"), max_length=4000)
    channel = models.CharField(
        _("channel"), max_length=16, choices=Channel.choices, default=Channel.AGENT
    )
    priority = models.CharField(
        _("priority"), max_length=8, choices=Priority.choices, default=Priority.NORMAL
    )
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="assigned_cases",
        verbose_name=_("assigned to"),
    )
    related_case = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="follow_ups",
        verbose_name=_("related case"),
        help_text=_("The earlier case this one follows up."),
    )
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="cases",
        verbose_name=_("conversation"),
    )
    internal_notes = models.TextField(
        _("internal notes"), blank=True, help_text=_("Staff only; never shown to the customer.")
    )
    state = FSMField(
        _("state"), default=State.OPEN, choices=State.choices, protected=True, db_index=True
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)
    resolved_at = models.DateTimeField(_("resolved"), null=True, blank=True, editable=False)
    closed_at = models.DateTimeField(_("closed"), null=True, blank=True, editable=False)
    # When the staff email about this new case went out; None until then (the broker was down
    # at commit, the mail server refused it): the beat sweep enqueues it again.
    staff_notified_at = models.DateTimeField(
        _("staff notified"), null=True, blank=True, editable=False
    )
    # Set when the mail server refused the staff email for good (it is then settled unsent).
    staff_notice_error = models.CharField(
        _("staff notice error"), max_length=200, blank=True, editable=False
    )

    class Meta:
        verbose_name = _("case")
        verbose_name_plural = _("cases")
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["company", "reference"], name="unique_case_reference_per_company"
            ),
        ]
        indexes = [
            models.Index(fields=["company", "state"], name="case_company_state"),
            models.Index(fields=["contact", "-created_at"], name="case_contact_recent"),
            # The sweep's question, "which new cases has staff not heard about", reads only
            # the few rows that are still waiting.
            models.Index(
                fields=["created_at"],
                condition=Q(staff_notified_at__isnull=True),
                name="case_staff_notice_pending",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.reference} · {self.subject}"

    # Transitions. `by` (the staff user, if any) and `description` go to django-fsm-log.

    @fsm_log_by
    @fsm_log_description
    @transition(
        field=state, source=State.OPEN, target=State.IN_PROGRESS, custom={"label": _("Start")}
    )
    def start(self, by=None, description=None) -> None:
        """Staff pick the case up."""

    @fsm_log_by
    @fsm_log_description
    @transition(
        field=state,
        source=State.IN_PROGRESS,
        target=State.WAITING_CUSTOMER,
        custom={"label": _("Wait for the customer")},
    )
    def wait_for_customer(self, by=None, description=None) -> None:
        """Staff asked the customer something and wait for the answer."""

    @fsm_log_by
    @fsm_log_description
    @transition(
        field=state,
        source=State.WAITING_CUSTOMER,
        target=State.IN_PROGRESS,
        custom={"label": _("Resume")},
    )
    def resume(self, by=None, description=None) -> None:
        """The customer answered (or staff stop waiting)."""

    @fsm_log_by
    @fsm_log_description
    @transition(
        field=state,
        source=[State.IN_PROGRESS, State.WAITING_CUSTOMER],
        target=State.RESOLVED,
        custom={"label": _("Resolve")},
    )
    def resolve(self, by=None, description=None) -> None:
        """Staff consider the problem solved; the customer may confirm or say it is not."""

    @fsm_log_by
    @fsm_log_description
    @transition(
        field=state,
        source=State.RESOLVED,
        target=State.IN_PROGRESS,
        custom={"label": _("Reopen")},
    )
    def reopen(self, by=None, description=None) -> None:
        """The customer says the problem is not fixed."""

    @fsm_log_by
    @fsm_log_description
    @transition(
        field=state, source=State.RESOLVED, target=State.CLOSED, custom={"label": _("Close")}
    )
    def close(self, by=None, description=None) -> None:
        """The customer confirmed the fix, or did not answer in time. Terminal."""


# What customers read: the admin labels above are staff vocabulary ("waiting on the customer").
CUSTOMER_STATE_LABELS = {
    Case.State.OPEN: _("abierto"),
    Case.State.IN_PROGRESS: _("en curso"),
    Case.State.WAITING_CUSTOMER: _("pendiente de su respuesta"),
    Case.State.RESOLVED: _("resuelto"),
    Case.State.CLOSED: _("cerrado"),
}


class CaseComment(models.Model):
    """A message on a case, from the customer or from staff; staff may keep it internal."""

    case = models.ForeignKey(
        Case, on_delete=models.CASCADE, related_name="comments", verbose_name=_("case")
    )
    author_contact = models.ForeignKey(
        Contact,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="case_comments",
        verbose_name=_("customer author"),
    )
    author_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="case_comments",
        verbose_name=_("staff author"),
    )
    body = models.TextField(_("message"), max_length=4000)
    # Choices rather than a bare flag, so the thread reads "public" or "internal note" on each
    # message (the admin shows a choice's label where it would show a tick).
    public = models.BooleanField(
        _("visibility"),
        default=True,
        choices=[
            (True, _("Public: the customer reads it")),
            (False, _("Internal note: staff only")),
        ],
        help_text=_("Internal comments are seen only by staff."),
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True, db_index=True)
    # For a customer's comment: when the staff email about it went out (as on the case).
    staff_notified_at = models.DateTimeField(
        _("staff notified"), null=True, blank=True, editable=False
    )
    # Set when the mail server refused the staff email for good (it is then settled unsent).
    staff_notice_error = models.CharField(
        _("staff notice error"), max_length=200, blank=True, editable=False
    )

    class Meta:
        verbose_name = _("comment")
        verbose_name_plural = _("comments")
        ordering = ["created_at", "pk"]
        constraints = [
            # A customer can only write what the customer can read back.
            models.CheckConstraint(
                condition=Q(author_contact__isnull=True) | Q(public=True),
                name="case_comment_customer_is_public",
            ),
            models.CheckConstraint(
                condition=~(Q(author_contact__isnull=False) & Q(author_user__isnull=False)),
                name="case_comment_single_author",
            ),
        ]
        indexes = [
            models.Index(
                fields=["created_at"],
                condition=Q(author_contact__isnull=False, staff_notified_at__isnull=True),
                name="case_comment_notice_pending",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.case.reference} · {self.body[:40]}"

    @property
    def by_customer(self) -> bool:
        return self.author_contact_id is not None


class CaseMessage(CustomerMessage):
    """One message to the customer about their case: a staff member's public reply, the
    notice that the case is resolved, or that staff closed it (support.case_messages).

    Written by support.services in the transaction of the reply or the resolution, and sent by
    a Celery task after that commit, as the appointment messages are: `queued` -> `sending`
    -> `sent`, or `retrying` in between, or `failed`; `not_sent` (with the reason) when the
    customer has no channel left for it; `unknown` when its worker stopped while sending. A
    worker claims `queued`/`retrying` with a conditional UPDATE, so none is handed to the
    provider twice.
    """

    class Kind(models.TextChoices):
        REPLY = "reply", _("Public reply")
        RESOLVED = "resolved", _("Case resolved")
        CLOSED = "closed", _("Case closed")

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="case_messages", verbose_name=_("company")
    )
    case = models.ForeignKey(
        Case, on_delete=models.CASCADE, related_name="messages", verbose_name=_("case")
    )
    # The reply it carries (none for a resolution notice).
    comment = models.OneToOneField(
        CaseComment,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="customer_message",
        verbose_name=_("reply"),
    )
    kind = models.CharField(_("message"), max_length=16, choices=Kind.choices)

    class Meta:
        verbose_name = _("message to the customer")
        verbose_name_plural = _("messages to the customer")
        ordering = ["created_at", "pk"]
        indexes = [
            # The sweep's: the messages still open, few whatever the table's size.
            models.Index(
                fields=["queued_at"],
                name="case_message_open",
                condition=Q(status__in=["queued", "retrying", "sending"]),
            ),
        ]


class SupportSettings(models.Model):
    """Per-company support policy; created with defaults the first time it is needed."""

    DEFAULT_AUTO_CLOSE_DAYS = 7

    company = models.OneToOneField(
        Company,
        on_delete=models.CASCADE,
        related_name="support_settings",
        verbose_name=_("company"),
    )
    auto_close_after_days = models.PositiveSmallIntegerField(
        _("close resolved cases after (days)"),
        default=DEFAULT_AUTO_CLOSE_DAYS,
        validators=[MinValueValidator(1), MaxValueValidator(365)],
        help_text=_("A resolved case the customer does not answer is closed after this many days."),
    )

    class Meta:
        verbose_name = _("support settings")
        verbose_name_plural = _("support settings")

    def __str__(self) -> str:
        return str(self.company)
