"""Tenancy and the people Garante serves: companies, their staff, contacts and gateway tokens;
and the idempotency records every API writes through core.idempotency."""

import hashlib
import re
import secrets
import zoneinfo

import phonenumbers
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


def validate_timezone(value: str) -> None:
    if value not in zoneinfo.available_timezones():
        raise ValidationError(_("Unknown time zone: %(tz)s"), params={"tz": value})


def sms_country_codes(value: str) -> list[str]:
    """The ISO 3166-1 alpha-2 codes of a list written as "ES, PT" (commas or spaces), upper
    case, each once, in the order given."""
    return list(dict.fromkeys(code.upper() for code in re.split(r"[\s,;]+", value) if code))


def validate_sms_countries(value: str) -> None:
    unknown = [
        code for code in sms_country_codes(value) if code not in phonenumbers.SUPPORTED_REGIONS
    ]
    if unknown:
        raise ValidationError(
            _("Not a country code: %(codes)s"), params={"codes": ", ".join(unknown)}
        )


class Company(models.Model):
    """The tenant. Every other record belongs to exactly one company."""

    class Environment(models.TextChoices):
        PRODUCTION = "production", _("Production")
        SANDBOX = "sandbox", _("Sandbox")

    name = models.CharField(_("name"), max_length=200)
    slug = models.SlugField(_("slug"), unique=True)
    timezone = models.CharField(
        _("time zone"), max_length=64, default="Europe/Madrid", validators=[validate_timezone]
    )
    language = models.CharField(
        _("language"), max_length=8, choices=settings.LANGUAGES, default="es"
    )
    currency = models.CharField(_("currency"), max_length=3, default="EUR")
    country = models.CharField(
        _("country"), max_length=2, default="ES", help_text=_("ISO 3166-1 alpha-2")
    )
    environment = models.CharField(
        _("environment"), max_length=16, choices=Environment.choices, default=Environment.PRODUCTION
    )
    # Failed identifications allowed in a sliding window, per conversation, per gateway
    # credential (all its conversations) and per identifier value tried (all conversations
    # and credentials of the company): core.identity, and docs/identity-limits.md for how
    # the defaults were sized and what they cost an attacker.
    identify_failures_per_conversation = models.PositiveSmallIntegerField(
        _("failed identifications per conversation"),
        default=5,
        validators=[MinValueValidator(1)],
    )
    identify_conversation_window_minutes = models.PositiveIntegerField(
        _("conversation window (minutes)"), default=15, validators=[MinValueValidator(1)]
    )
    identify_failures_per_credential = models.PositiveIntegerField(
        _("failed identifications per gateway credential"),
        default=50,
        validators=[MinValueValidator(1)],
        help_text=_(
            "All conversations of one gateway token together. Reaching it raises a security "
            "event and emails staff; conversations already identified keep working."
        ),
    )
    identify_credential_window_minutes = models.PositiveIntegerField(
        _("credential window (minutes)"), default=60, validators=[MinValueValidator(1)]
    )
    identify_failures_per_identifier = models.PositiveSmallIntegerField(
        _("failed identifications per identifier"),
        default=10,
        validators=[MinValueValidator(1)],
        help_text=_("The same document, phone or email, across every conversation."),
    )
    identify_identifier_window_minutes = models.PositiveIntegerField(
        _("identifier window (minutes)"), default=60, validators=[MinValueValidator(1)]
    )
    # What codes may cost: past the credential's or the identifier's limit, identification
    # goes on in verified mode, a code to the customer's registered channel binding the
    # conversation (docs/identity-limits.md). Past a budget the same answer is given and
    # nothing is sent.
    verified_mode_codes_per_credential_per_hour = models.PositiveIntegerField(
        _("codes per gateway credential per hour in verified mode"),
        default=200,
        help_text=_(
            "Codes that verified-mode identifications of one gateway token may send in an "
            "hour, to all customers together."
        ),
    )
    verification_codes_per_contact_per_hour = models.PositiveSmallIntegerField(
        _("codes per customer per hour"),
        default=5,
        validators=[MinValueValidator(1)],
        help_text=_("Every code sent to one customer in an hour, whatever asked for it."),
    )
    # Whom the company texts, and how many texts an hour (core.sms_policy): every SMS a
    # stranger can make it send costs it money, and premium-rate or far-away numbers the most
    # (docs/threats/sms.md for the defaults).
    sms_countries = models.CharField(
        _("countries served by SMS"),
        max_length=200,
        blank=True,
        validators=[validate_sms_countries],
        help_text=_(
            "ISO 3166-1 alpha-2 codes separated by commas, e.g. ES, PT. Empty: the company's "
            "own country only. Only mobile numbers of these countries can be registered or "
            "get SMS."
        ),
    )
    sms_hourly_budget = models.PositiveIntegerField(
        _("SMS per hour"),
        default=100,
        help_text=_(
            "At most this many SMS in any 60 minutes; past it SMS are not sent, and the "
            "company's administrators are emailed once. 0 sends none."
        ),
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    # Not a column: the gateway credential that authenticated the request this instance
    # serves. core.selectors.gateway_company_authenticate hands each request a fresh instance
    # and sets it there, so the identification limits per credential reach core.identity
    # through the company every tool call already carries.
    gateway_credential_id: int | None = None

    class Meta:
        verbose_name = _("company")
        verbose_name_plural = _("companies")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def tz(self) -> zoneinfo.ZoneInfo:
        return zoneinfo.ZoneInfo(self.timezone)

    @property
    def is_sandbox(self) -> bool:
        return self.environment == self.Environment.SANDBOX

    @property
    def sms_regions(self) -> frozenset[str]:
        """The countries (ISO codes) whose mobile numbers the company may text."""
        return frozenset(sms_country_codes(self.sms_countries) or [self.country.upper()])


class StaffMembership(models.Model):
    """A staff user's role in one company; the admin shows them only their companies."""

    class Role(models.TextChoices):
        AGENT = "agent", _("Agent")
        SUPERVISOR = "supervisor", _("Supervisor")
        ADMIN = "admin", _("Administrator")

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="memberships",
        verbose_name=_("user"),
    )
    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="memberships", verbose_name=_("company")
    )
    role = models.CharField(_("role"), max_length=16, choices=Role.choices, default=Role.AGENT)

    class Meta:
        verbose_name = _("staff membership")
        verbose_name_plural = _("staff memberships")
        constraints = [
            models.UniqueConstraint(fields=["user", "company"], name="unique_membership"),
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.company} ({self.role})"


class Contact(models.Model):
    """A customer of a company. Identifiers are stored normalised (see core.normalize)."""

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="contacts", verbose_name=_("company")
    )
    first_name = models.CharField(_("first name"), max_length=100)
    last_name = models.CharField(_("last name"), max_length=150, blank=True)
    document_number = models.CharField(_("document number"), max_length=32, blank=True)
    phone = models.CharField(_("phone (E.164)"), max_length=20, blank=True)
    email = models.EmailField(_("email"), blank=True)
    # Appointment confirmations and reminders only: verification codes and notices about the
    # contact's own details still go to the channel they were asked for.
    sms_opt_out = models.BooleanField(
        _("no appointment messages by SMS"),
        default=False,
        help_text=_("The customer asked not to get appointment confirmations or reminders by SMS."),
    )
    email_opt_out = models.BooleanField(
        _("no appointment messages by email"),
        default=False,
        help_text=_(
            "The customer asked not to get appointment confirmations or reminders by email."
        ),
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        verbose_name = _("contact")
        verbose_name_plural = _("contacts")
        ordering = ["first_name", "last_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["company", "document_number"],
                condition=~Q(document_number=""),
                name="unique_contact_document",
            ),
            models.UniqueConstraint(
                fields=["company", "phone"], condition=~Q(phone=""), name="unique_contact_phone"
            ),
            models.UniqueConstraint(
                fields=["company", "email"], condition=~Q(email=""), name="unique_contact_email"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.first_name} {self.last_name}".strip()


class GatewayCredential(models.Model):
    """A bearer token the agent platform's Gateway uses for one company.

    The token is shown once at creation; only its SHA-256 is stored (tokens are 256-bit random,
    so a fast hash is enough and lets the lookup be an index probe).
    """

    company = models.ForeignKey(
        Company,
        on_delete=models.CASCADE,
        related_name="gateway_credentials",
        verbose_name=_("company"),
    )
    name = models.CharField(_("name"), max_length=100)
    token_prefix = models.CharField(_("token prefix"), max_length=12, editable=False)
    token_hash = models.CharField(
        max_length=64, unique=True, editable=False, verbose_name=_("token hash")
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)

    TOKEN_PREFIX = "gt_"

    class Meta:
        verbose_name = _("gateway credential")
        verbose_name_plural = _("gateway credentials")

    def __str__(self) -> str:
        return f"{self.name} ({self.token_prefix}…)"

    @staticmethod
    def hash_token(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    @classmethod
    def new_token(cls) -> str:
        return cls.TOKEN_PREFIX + secrets.token_urlsafe(32)

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class Conversation(models.Model):
    """One conversation of the agent platform (com.asixto/conversationId), per company.

    It remembers whom the customer identified as, and until when a step-up verification holds.
    """

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="conversations", verbose_name=_("company")
    )
    external_id = models.CharField(_("conversation id"), max_length=255)
    contact = models.ForeignKey(
        Contact,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="conversations",
        verbose_name=_("identified contact"),
    )
    identified_via = models.CharField(_("identified via"), max_length=16, blank=True)
    identified_at = models.DateTimeField(_("identified at"), null=True, blank=True)
    verified_until = models.DateTimeField(_("verified until"), null=True, blank=True)
    verified_at = models.DateTimeField(_("verified at"), null=True, blank=True)
    created_at = models.DateTimeField(_("started"), auto_now_add=True)
    last_seen_at = models.DateTimeField(_("last seen"), auto_now=True)

    class Meta:
        verbose_name = _("conversation")
        verbose_name_plural = _("conversations")
        ordering = ["-last_seen_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["company", "external_id"], name="unique_conversation_per_company"
            ),
        ]

    def __str__(self) -> str:
        return self.external_id


def default_step_up_actions() -> list[str]:
    return list(settings.GARANTE_STEP_UP_DEFAULT_ACTIONS)


class StepUpPolicy(models.Model):
    """Which tools need a fresh one-time code before they act, per company.

    A company without a policy row gets settings.GARANTE_STEP_UP_DEFAULT_ACTIONS.
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
            # The deliveries still under way: few, whatever the table's size (the sweep's).
            models.Index(
                fields=["expires_at"],
                name="challenge_delivery_open",
                condition=Q(delivery_status__in=["queued", "retrying", "sending"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_channel_display()} → {self.masked_destination} ({self.status})"


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


class SmsSend(models.Model):
    """One SMS handed to its channel (the provider, or a sandbox's outbox): what the hourly
    budget counts (core.sms_policy). Rows older than the window are deleted as new ones come."""

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="+", verbose_name=_("company")
    )
    created_at = models.DateTimeField(_("sent"))

    class Meta:
        verbose_name = _("SMS sent")
        verbose_name_plural = _("SMS sent")
        indexes = [models.Index(fields=["company", "created_at"], name="sms_send_window")]

    def __str__(self) -> str:
        return f"{self.company_id} @ {self.created_at:%Y-%m-%d %H:%M:%S}"


class OutboxMessage(models.Model):
    """A message to a customer of a sandbox company, kept here instead of being sent: a
    sandbox never reaches a real phone or mailbox, whatever backends are configured
    (core.outbound). Staff read it in the admin; nothing edits it."""

    class Channel(models.TextChoices):
        SMS = "sms", _("SMS")
        EMAIL = "email", _("Email")

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="outbox", verbose_name=_("company")
    )
    channel = models.CharField(_("channel"), max_length=8, choices=Channel.choices)
    destination = models.CharField(_("to"), max_length=254)
    subject = models.CharField(_("subject"), max_length=300, blank=True)
    body = models.TextField(_("text"))
    created_at = models.DateTimeField(_("created"), default=timezone.now)

    class Meta:
        verbose_name = _("sandbox outbox message")
        verbose_name_plural = _("sandbox outbox")
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["company", "-created_at"], name="outbox_company_recent")]

    def __str__(self) -> str:
        return f"{self.get_channel_display()} → {self.destination}"
