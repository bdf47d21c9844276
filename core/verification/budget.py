"""One contact's daily budget of wrong verification codes, over all their codes.

The per-code limit (five tries, the last wrong one locks) and the per-contact send limit (five
codes an hour) let a guesser who stops one short of the lock and asks for a new code try twenty
codes an hour, day after day, without a single lock. This counts every wrong guess at a
contact's codes in the period (settings.GARANTE_VERIFICATION_WRONG_CODES_PER_CONTACT): once the
budget is spent the code being guessed is locked, no code is sent to the contact through the
tool API until enough of those guesses have left the period, and the company's staff are
emailed once (a SecurityEvent, core.security). Codes staff send are theirs to judge: they are
neither refused nor locked by it.
"""

from datetime import datetime

from django.conf import settings
from django.db.models import Case, F, IntegerField, When

from core.durable import durably
from core.models import Contact, SecurityEvent, VerificationChallenge
from core.security import security_event_notify_on_commit

Status = VerificationChallenge.Status


def _wrong_guesses_by_challenge(contact_id: int, now: datetime) -> list[tuple[datetime, int]]:
    """(created, wrong guesses) of the contact's codes of the period, newest first. Every
    guess compared takes an attempt first (core.verification.check), the right one included."""
    _, period = settings.GARANTE_VERIFICATION_WRONG_CODES_PER_CONTACT
    wrong = F("attempts") - Case(
        When(status=Status.VERIFIED, then=1), default=0, output_field=IntegerField()
    )
    return list(
        VerificationChallenge.objects.filter(
            contact_id=contact_id, created_at__gt=now - period, attempts__gt=0
        )
        .annotate(wrong=wrong)
        .filter(wrong__gt=0)
        .order_by("-created_at")
        .values_list("created_at", "wrong")
    )


def wrong_codes_retry_after(contact_id: int, now: datetime) -> int | None:
    """Seconds until the contact's budget of wrong codes has room again, or None if it has
    room now."""
    budget, period = settings.GARANTE_VERIFICATION_WRONG_CODES_PER_CONTACT
    spent = 0
    for created_at, wrong in _wrong_guesses_by_challenge(contact_id, now):
        spent += wrong
        if spent >= budget:
            # Below the budget once this code's guesses, and those older, leave the period.
            return max(1, int((created_at + period - now).total_seconds()) + 1)
    return None


def wrong_codes_spent(contact_id: int, now: datetime) -> bool:
    budget, _ = settings.GARANTE_VERIFICATION_WRONG_CODES_PER_CONTACT
    total = sum(wrong for _, wrong in _wrong_guesses_by_challenge(contact_id, now))
    return total >= budget


def wrong_codes_budget_close(
    *, challenge: VerificationChallenge, conversation_key: str, now: datetime
) -> bool:
    """After a wrong guess at `challenge`: if it spent the contact's budget, lock the code and
    tell staff (once in the period), durably; whether the code is locked by it. A code staff
    sent is left alone."""
    if challenge.issued_by_id is not None or not wrong_codes_spent(challenge.contact_id, now):
        return False
    budget, period = settings.GARANTE_VERIFICATION_WRONG_CODES_PER_CONTACT

    def close() -> bool:
        # One contact's closing at a time, so that guesses spending it together tell staff once.
        list(
            Contact.objects.select_for_update(no_key=True)
            .filter(pk=challenge.contact_id)
            .values("pk")
        )
        locked = VerificationChallenge.objects.filter(pk=challenge.pk, status=Status.ACTIVE).update(
            status=Status.LOCKED
        )
        told = SecurityEvent.objects.filter(
            contact_id=challenge.contact_id,
            kind=SecurityEvent.Kind.WRONG_CODES_BUDGET_SPENT,
            created_at__gt=now - period,
        ).exists()
        if not told:
            event = SecurityEvent.objects.create(
                company_id=challenge.company_id,
                conversation_key=conversation_key,
                kind=SecurityEvent.Kind.WRONG_CODES_BUDGET_SPENT,
                contact_id=challenge.contact_id,
                detail={
                    "wrong_codes": budget,
                    "window_hours": int(period.total_seconds() // 3600),
                    "channel": challenge.channel,
                },
            )
            security_event_notify_on_commit(event_id=event.pk)
        return bool(locked)

    return durably(close)
