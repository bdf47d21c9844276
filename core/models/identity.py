"""Who is talking in a conversation: step-up policies, security events and the one-time
codes that verify a customer (core.identity, core.verification)."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.models.contacts import Contact, Conversation
from core.models.credentials import GatewayCredential
from core.models.tenancy import Company


def default_step_up_actions() -> list[str]:
    return list(settings.GARANTE_STEP_UP_DEFAULT_ACTIONS)


def default_confirm_actions() -> list[str]:
    return list(settings.GARANTE_CONFIRM_DEFAULT_ACTIONS)


class StepUpPolicy(models.Model):
    """Which tools need a fresh one-time code before they act, per company: a verified
    conversation (`actions`), or the customer's own confirmation of that very action
    (`confirm_actions`, core.verification.confirmation).

    A company without a policy row gets settings.GARANTE_STEP_UP_DEFAULT_ACTIONS and
    settings.GARANTE_CONFIRM_DEFAULT_ACTIONS.
    """

    company = models.OneToOneField(
        Company, on_delete=models.CASCADE, related_name="step_up_policy", verbose_name=_("company")
    )
    actions = models.JSONField(
        _("actions that need a verification code"),
        default=default_step_up_actions,
        blank=True,
        help_text=_("Tool names, e.g. accept_quote, update_contact_details."),
    )
    confirm_actions = models.JSONField(
        _("actions the customer confirms with a code"),
        default=default_confirm_actions,
        blank=True,
        help_text=_(
            "Tool names, e.g. cancel_appointment: each call needs a code sent to the "
            "customer's own phone or email for that very action."
        ),
    )
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("step-up policy")
        verbose_name_plural = _("step-up policies")

    def __str__(self) -> str:
        return f"{self.company}: {', '.join(self.actions) or '-'}"


class SecurityEvent(models.Model):
    """Something staff should know about who is talking in a conversation.

    Written on its own connection (core.durable) so that the rollback of the failed call that
    caused it cannot erase it; hence the foreign keys carry no database constraint (the row
    may be committed before the caller's own rows) and the conversation is kept by its
    external id. Never holds a code or a raw identifier.
    """

    class Kind(models.TextChoices):
        IDENTIFICATION_FAILED = "identification_failed", _("Identification failed")
        IDENTITY_SWITCH = "identity_switch", _("Identifier of another contact")
        IDENTIFIER_MISMATCH = "identifier_mismatch", _("Identifier of nobody known")
        VERIFICATION_FAILED = "verification_failed", _("Wrong verification code")
        VERIFICATION_LOCKED = "verification_locked", _("Verification locked")
        IDENTIFICATION_BURST = (
            "identification_burst",
            _("Burst of failed identifications on a gateway credential"),
        )
        VERIFICATION_VOIDED = (
            "verification_voided",
            _("Verification voided: another identifier at the attempts limit"),
        )
        CONTACT_CHANGE_TAKEN = (
            "contact_change_taken",
            _("New phone or email proven, but another contact's"),
        )
        WRONG_CODES_BUDGET_SPENT = (
            "wrong_codes_budget_spent",
            _("Daily budget of wrong verification codes spent"),
        )
        SMS_BUDGET_REACHED = "sms_budget_reached", _("Hourly SMS budget reached")

    company = models.ForeignKey(
        Company,
        on_delete=models.CASCADE,
        db_constraint=False,
        related_name="security_events",
        verbose_name=_("company"),
    )
    conversation_key = models.CharField(_("conversation id"), max_length=255)
    kind = models.CharField(_("kind"), max_length=32, choices=Kind.choices)
    contact = models.ForeignKey(
        Contact,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_constraint=False,
        related_name="+",
        verbose_name=_("identified contact"),
    )
    claimed_contact = models.ForeignKey(
        Contact,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_constraint=False,
        related_name="+",
        verbose_name=_("claimed contact"),
    )
    credential = models.ForeignKey(
        GatewayCredential,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_constraint=False,
        related_name="+",
        verbose_name=_("gateway credential"),
    )
    # An HMAC of the identifier tried (core.identity.limits.identifier_digest), to count failures
    # per identifier value without storing it.
    identifier_digest = models.CharField(
        max_length=64, blank=True, editable=False, verbose_name=_("identifier digest")
    )
    detail = models.JSONField(_("detail"), default=dict, blank=True)
    created_at = models.DateTimeField(_("when"), default=timezone.now)
    # Only for the events staff are emailed about (a burst of failed identifications).
    staff_notified_at = models.DateTimeField(_("staff notified"), null=True, blank=True)

    # The kinds that count as failed identifications (core.identity's limits).
    IDENTIFICATION_FAILURES = (
        Kind.IDENTIFICATION_FAILED,
        Kind.IDENTITY_SWITCH,
        Kind.IDENTIFIER_MISMATCH,
    )
    # The identity alarms: after one, a conversation's earlier verification and the codes it
    # was sent before it no longer count (core.identity.step_up, core.verification.check).
    VERIFICATION_DROPPING = (
        Kind.IDENTITY_SWITCH,
        Kind.IDENTIFIER_MISMATCH,
        Kind.VERIFICATION_VOIDED,
    )

    class Meta:
        verbose_name = _("security event")
        verbose_name_plural = _("security events")
        ordering = ["-created_at"]
        indexes = [
            models.Index(
                fields=["company", "conversation_key", "kind", "created_at"],
                name="security_event_lookup",
            ),
            # The failures of one credential, and of one identifier value, in a window.
            models.Index(
                fields=["credential", "created_at"],
                name="security_event_credential",
                condition=Q(
                    kind__in=["identification_failed", "identity_switch", "identifier_mismatch"]
                ),
            ),
            models.Index(
                fields=["company", "identifier_digest", "created_at"],
                name="security_event_identifier",
                condition=Q(
                    kind__in=["identification_failed", "identity_switch", "identifier_mismatch"]
                ),
            ),
            # The bursts of a credential (one per window), and those whose email never left.
            models.Index(
                fields=["credential", "created_at"],
                name="security_event_burst",
                condition=Q(kind="identification_burst"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} · {self.conversation_key}"


class VerificationChallenge(models.Model):
    """One one-time code sent to a contact's own registered phone or email (`step_up`), or to
    the new phone or email a contact asked to change to (`contact_change`: the change is
    applied only once that code comes back, core.services.contact_change_confirm).

    Only an HMAC of the code is stored (core.verification). `status` is the code's life;
    `delivery_status` is the message's: queued -> sending -> sent, or retrying in between,
    or failed / not_sent. A worker claims `queued`/`retrying` with a conditional UPDATE, so a
    message is never handed to the provider by two workers. A delivery no worker will finish
    (its task lost, or its worker stopped while sending) is settled after the code expired:
    not_sent, or unknown when it was being sent (core.verification.challenge_deliveries_settle).
    """

    class Channel(models.TextChoices):
        SMS = "sms", _("SMS")
        EMAIL = "email", _("Email")

    class Status(models.TextChoices):
        ACTIVE = "active", _("Active")
        VERIFIED = "verified", _("Verified")
        LOCKED = "locked", _("Locked (too many attempts)")
        REVOKED = "revoked", _("Revoked")
        SUPERSEDED = "superseded", _("Superseded by a newer code")

    class Purpose(models.TextChoices):
        STEP_UP = "step_up", _("Verify the customer")
        CONTACT_CHANGE = "contact_change", _("Confirm a new phone or email")
        IDENTIFICATION = "identification", _("Identification in verified mode")
        CONFIRMATION = "confirmation", _("Confirm an action")

    class Delivery(models.TextChoices):
        QUEUED = "queued", _("Queued")
        SENDING = "sending", _("Sending")
        RETRYING = "retrying", _("Retrying")
        SENT = "sent", _("Sent")
        FAILED = "failed", _("Failed")
        NOT_SENT = "not_sent", _("Not sent")
        UNKNOWN = "unknown", _("Unknown (stopped while sending)")

    company = models.ForeignKey(
        Company,
        on_delete=models.CASCADE,
        related_name="verification_challenges",
        verbose_name=_("company"),
    )
    # None only for an identification in verified mode whose identifier is nobody's: a code
    # that goes nowhere and that no guess matches, so that it answers as a customer's does.
    contact = models.ForeignKey(
        Contact,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="verification_challenges",
        verbose_name=_("contact"),
    )
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="verification_challenges",
        verbose_name=_("conversation"),
    )
    purpose = models.CharField(
        _("purpose"),
        max_length=16,
        choices=Purpose.choices,
        default=Purpose.STEP_UP,
        editable=False,
    )
    # Identification in verified mode: the gateway credential of the call (its hourly budget
    # of codes), and the kind and HMAC (core.identity.limits.identifier_digest) of the
    # identifier typed, which verify_code must repeat. Empty for a step-up code.
    credential = models.ForeignKey(
        GatewayCredential,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("gateway credential"),
    )
    identifier_kind = models.CharField(_("identified via"), max_length=16, blank=True)
    identifier_digest = models.CharField(
        max_length=64, blank=True, editable=False, verbose_name=_("identifier digest")
    )
    channel = models.CharField(_("channel"), max_length=8, choices=Channel.choices)
    destination = models.CharField(_("destination"), max_length=254, editable=False)
    masked_destination = models.CharField(_("sent to"), max_length=254, editable=False)
    nonce = models.CharField(max_length=32, editable=False, verbose_name=_("nonce"))
    code_hmac = models.CharField(max_length=64, editable=False, verbose_name=_("code hmac"))
    # What the message carried: the code, a one-tap link (core.verification.links), or both.
    # With a link, `link_digest` names it: a SHA-256 of the link's key, which is derived from
    # the nonce with SECRET_KEY, so that neither a row nor a backup holds a working link.
    sent_as = models.CharField(
        _("sent as"),
        max_length=8,
        choices=Company.VerificationForm.choices,
        default=Company.VerificationForm.CODE,
        editable=False,
    )
    link_digest = models.CharField(_("link digest"), max_length=64, blank=True, editable=False)
    status = models.CharField(
        _("status"), max_length=16, choices=Status.choices, default=Status.ACTIVE
    )
    attempts = models.PositiveSmallIntegerField(_("failed attempts"), default=0)
    expires_at = models.DateTimeField(_("expires"))
    verified_at = models.DateTimeField(_("verified"), null=True, blank=True)
    delivery_status = models.CharField(
        _("delivery"), max_length=16, choices=Delivery.choices, default=Delivery.QUEUED
    )
    delivery_attempts = models.PositiveSmallIntegerField(_("delivery attempts"), default=0)
    delivery_error = models.CharField(_("delivery error"), max_length=300, blank=True)
    provider_message_id = models.CharField(_("provider message id"), max_length=100, blank=True)
    provider_status = models.CharField(_("provider status"), max_length=40, blank=True)
    sent_at = models.DateTimeField(_("sent"), null=True, blank=True)
    issued_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("issued by staff"),
    )
    # A confirmation (purpose `confirmation`): the action (a tool name) and the digest of its
    # exact target (core.verification.confirmation.ConfirmedAction), which the code is good
    # for and nothing else; what the customer is told it confirms; when the action used it.
    # Answered (verified) by the code or a tap, it is used once, by the action's own call.
    action = models.CharField(_("action"), max_length=64, blank=True, editable=False)
    action_digest = models.CharField(_("action digest"), max_length=64, blank=True, editable=False)
    action_summary = models.CharField(_("confirms"), max_length=200, blank=True, editable=False)
    consumed_at = models.DateTimeField(_("used by the action"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)

    class Meta:
        verbose_name = _("verification code")
        verbose_name_plural = _("verification codes")
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["conversation", "status"], name="challenge_conversation"),
            models.Index(fields=["contact", "created_at"], name="challenge_contact_sends"),
            # A credential's codes in verified mode in the last hour (its budget).
            models.Index(
                fields=["credential", "created_at"],
                name="challenge_credential_sends",
                condition=Q(purpose="identification"),
            ),
            # A tapped link finds its challenge (only challenges sent with a link have one).
            models.Index(
                fields=["link_digest"], name="challenge_link", condition=~Q(link_digest="")
            ),
            # The deliveries still under way: few, whatever the table's size (the sweep's).
            models.Index(
                fields=["expires_at"],
                name="challenge_delivery_open",
                condition=Q(delivery_status__in=["queued", "retrying", "sending"]),
            ),
        ]

    def __str__(self) -> str:
        status = self.get_status_display()
        return f"{self.get_channel_display()} → {self.masked_destination} · {status}"
