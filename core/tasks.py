"""Celery tasks of the core app: delivery of verification codes."""

import random

from django.conf import settings

from core.celery import app
from core.verification import DeliveryOutcome, challenge_deliver_once


def retry_countdown(retries: int) -> float:
    """Exponential backoff with jitter: base, 2 x base, 4 x base, ... (+ up to 20%)."""
    delay = settings.GARANTE_VERIFICATION_RETRY_BACKOFF_SECONDS * (2**retries)
    return delay * (1 + random.random() / 5)


@app.task(bind=True, name="core.challenge_deliver", ignore_result=True, acks_late=False)
def challenge_deliver(self, challenge_id: int, sealed_code: str) -> str:
    """Send one verification code. The arguments hold the code sealed, never in clear, and the
    result never holds it either (Celery logs both at some levels)."""
    max_retries = settings.GARANTE_VERIFICATION_DELIVERY_RETRIES
    outcome = challenge_deliver_once(
        challenge_id=challenge_id,
        sealed_code=sealed_code,
        last_try=self.request.retries >= max_retries,
    )
    if outcome == DeliveryOutcome.RETRY:
        if self.request.is_eager:
            # Eager mode (demo, tests) with eager_propagates lets Retry escape apply(), so
            # retry in place, as Celery's own eager retry would (without the wait).
            return self.apply(
                args=(challenge_id, sealed_code), retries=self.request.retries + 1
            ).result
        raise self.retry(countdown=retry_countdown(self.request.retries), max_retries=max_retries)
    return str(outcome)
