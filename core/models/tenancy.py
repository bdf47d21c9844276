"""Tenancy: the company every record belongs to, and its staff's roles in it."""

import re
import zoneinfo

import phonenumbers
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
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

    class VerificationForm(models.TextChoices):
        """What a step-up verification sends to the customer's channel: the six-digit code
        they read back into the chat, a one-tap link that verifies the conversation without
        the code passing through the agent (core.verification.links), or both."""

        CODE = "code", _("A code to type in the chat")
        LINK = "link", _("A link to tap")
        BOTH = "both", _("A code and a link")

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
    # The code by default: the agent platform's checks (certification) and every customer
    # used to typing a code keep working; a company turns the link on per channel
    # (docs/identity-limits.md, "Verification by link").
    verification_form_sms = models.CharField(
        _("verification by SMS"),
        max_length=8,
        choices=VerificationForm.choices,
        default=VerificationForm.CODE,
        help_text=_(
            "A link lets the customer verify with one tap, so that no code passes through the chat."
        ),
    )
    verification_form_email = models.CharField(
        _("verification by email"),
        max_length=8,
        choices=VerificationForm.choices,
        default=VerificationForm.CODE,
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
    # Above the key (core.idempotency.intent, docs/tools.md): how long a quote, a sales
    # request or a case stands for a customer's same request, so that a re-planned call with a
    # new key answers it instead of making another. 0 turns the window off.
    quote_intent_window_minutes = models.PositiveIntegerField(
        _("same quote window (minutes)"),
        default=60,
        help_text=_(
            "A quote with the same products and quantities asked again by the same customer "
            "within this time is answered with the one already sent. 0: never."
        ),
    )
    sales_contact_intent_window_minutes = models.PositiveIntegerField(
        _("same sales request window (minutes)"),
        default=1440,
        help_text=_(
            "A request for the sales team on the same topic by the same customer within this "
            "time is answered with the one already open. 0: never."
        ),
    )
    case_intent_window_minutes = models.PositiveIntegerField(
        _("possible duplicate case window (minutes)"),
        default=30,
        help_text=_(
            "A second case opened for the same customer within this time, while the first is "
            "still open, is answered as a possible duplicate unless the agent says it is a new "
            "one. 0: never."
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

    def verification_form(self, channel: str) -> str:
        """What a step-up verification, or a confirmation of an action, sends by `channel`
        ("sms" or "email")."""
        return self.verification_form_sms if channel == "sms" else self.verification_form_email

    @property
    def sms_regions(self) -> frozenset[str]:
        """The countries (ISO codes) whose mobile numbers the company may text."""
        return frozenset(sms_country_codes(self.sms_countries) or [self.country.upper()])


class StaffMembership(models.Model):
    """A staff user's role in one company; the admin shows them only their companies."""

    class Role(models.TextChoices):
        AGENT = "agent", _("Agent")
        SALES = "sales", _("Salesperson")
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
        return f"{self.user} @ {self.company} ({self.get_role_display()})"
