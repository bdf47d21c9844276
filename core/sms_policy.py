"""Whom a company may text: mobile numbers of the countries it serves, within an hourly budget.

`sms_refusal` is the one rule. core.outbound applies it to every SMS before it leaves (codes,
appointment messages, change notices), so nothing bypasses it; `sms_phone_normalize` applies
it where a phone is entered (a contact created or changed), as a typed error with nothing
saved. `sms_budget_take` counts each SMS in the database, per company and rolling hour, so
every node and worker sees one count; the SMS past it is not sent, and the company's
administrators are emailed once per window. docs/threats/sms.md says why.
"""

import logging
from datetime import datetime, timedelta
from enum import StrEnum

import phonenumbers
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from phonenumbers import PhoneNumberType

from core.errors import ValidationFailed
from core.models import Company, SecurityEvent, SmsSend
from core.normalize import normalize_phone
from core.security import security_event_notify_on_commit
from core.transactions import one_at_a_time

logger = logging.getLogger("garante.sms")

SMS_BUDGET_WINDOW = timedelta(hours=1)

# The number types that reach a mobile phone. North American numbers (and a few other plans)
# do not tell mobiles from landlines: libphonenumber answers FIXED_LINE_OR_MOBILE for them.
# Everything else is refused: premium-rate and shared-cost numbers bill the sender's side or
# pay the number's owner per message (the fraud), and a landline, pager, VoIP, personal,
# toll-free or unknown number is not a phone the customer reads texts on.
TEXTABLE_TYPES = frozenset({PhoneNumberType.MOBILE, PhoneNumberType.FIXED_LINE_OR_MOBILE})


class SmsRefusal(StrEnum):
    """Why a company may not text a phone: the stable codes of the typed errors too."""

    INVALID = "invalid_phone"
    COUNTRY_NOT_SERVED = "phone_country_not_served"
    NOT_MOBILE = "phone_not_mobile"


MESSAGES = {
    SmsRefusal.INVALID: _("Ese número de teléfono no es válido."),
    SmsRefusal.COUNTRY_NOT_SERVED: _(
        "No enviamos SMS a teléfonos de ese país. Indique un móvil de un país en el que trabajamos."
    ),
    SmsRefusal.NOT_MOBILE: _(
        "Ese número no es de un móvil (los fijos y los de tarificación especial no reciben "
        "SMS). Indique un teléfono móvil."
    ),
}


def sms_refusal(*, company: Company, phone: str) -> SmsRefusal | None:
    """Why `company` may not text `phone` (E.164, or national in the company's country), or
    None if it may: a valid number, of a country in `company.sms_regions`, of a mobile type."""
    try:
        number = phonenumbers.parse(phone, company.country.upper())
    except phonenumbers.NumberParseException:
        return SmsRefusal.INVALID
    if not phonenumbers.is_valid_number(number):
        return SmsRefusal.INVALID
    if phonenumbers.region_code_for_number(number) not in company.sms_regions:
        return SmsRefusal.COUNTRY_NOT_SERVED
    if phonenumbers.number_type(number) not in TEXTABLE_TYPES:
        return SmsRefusal.NOT_MOBILE
    return None


def sms_phone_check(*, company: Company, phone: str) -> None:
    """ValidationFailed (code `phone_country_not_served`, `phone_not_mobile` or
    `invalid_phone`) unless `company` may text `phone`."""
    refusal = sms_refusal(company=company, phone=phone)
    if refusal is not None:
        raise ValidationFailed(MESSAGES[refusal], code=refusal.value)


def sms_phone_normalize(*, company: Company, raw: str) -> str:
    """A phone given for a contact of `company`, in E.164, if the company may text it;
    ValidationFailed otherwise (see `sms_phone_check`). Where a phone is entered."""
    phone = normalize_phone(raw, company.country)
    sms_phone_check(company=company, phone=phone)
    return phone


def sms_budget_take(*, company: Company, now: datetime | None = None) -> bool:
    """Count one SMS of `company` against its hourly budget; False, counting nothing, when the
    last 60 minutes already hold `company.sms_hourly_budget` of them.

    The count and the row that takes a place are one transaction under the company's advisory
    lock (core.transactions.one_at_a_time), so two workers sending at once cannot both take
    the last place. The first refusal of a window records a security event and emails the
    company's administrators once that transaction commits; later ones in the window do not.
    """
    now = now or timezone.now()
    window_start = now - SMS_BUDGET_WINDOW
    with one_at_a_time(Company, company.pk):
        budget = Company.objects.values_list("sms_hourly_budget", flat=True).get(pk=company.pk)
        sent = SmsSend.objects.filter(company_id=company.pk)
        # What left the window is no longer counted: deleted here, a few rows at a time.
        sent.filter(created_at__lte=window_start).delete()
        if sent.filter(created_at__gt=window_start).count() < budget:
            SmsSend.objects.create(company_id=company.pk, created_at=now)
            return True
        alerted = SecurityEvent.objects.filter(
            company_id=company.pk,
            kind=SecurityEvent.Kind.SMS_BUDGET_REACHED,
            created_at__gt=window_start,
        ).exists()
        if not alerted:
            event = SecurityEvent.objects.create(
                company_id=company.pk,
                conversation_key="",
                kind=SecurityEvent.Kind.SMS_BUDGET_REACHED,
                detail={"budget": budget, "window_minutes": SMS_BUDGET_WINDOW.seconds // 60},
                created_at=now,
            )
            security_event_notify_on_commit(event_id=event.pk)
            logger.warning("company %s reached its hourly SMS budget (%d)", company.pk, budget)
        return False
