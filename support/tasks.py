"""Support's Celery tasks: staff emails (and the sweep that resends lost ones), and the sweep
that closes silent resolved cases."""

from celery import shared_task
from django.utils import timezone

from core.periodic import every
from core.sweeps import SWEEP_TIME_LIMITS, enqueued, sweep
from core.tasks import DATABASE_FAILURES
from support.selectors import case_ids_due_for_auto_close, case_staff_notices_pending
from support.services import case_close_if_unanswered, case_staff_notify

AUTO_CLOSE_EVERY_SECONDS = 60 * 60
NOTICE_SWEEP_EVERY_SECONDS = 15 * 60


# Only transient errors reach the task: case_staff_notify settles a notice the mail server
# refuses for good (a 5yz reply) instead of raising. OSError covers SMTPException (4yz
# replies, a dropped connection) and the network.
@shared_task(autoretry_for=(OSError, *DATABASE_FAILURES), retry_backoff=True, max_retries=5)
def case_notify_staff(case_id: int, comment_id: int | None = None) -> int:
    """Tell staff about a new case or a customer's comment; retried while mail or the database
    is down (a database that stops answering fails within GARANTE_DB_ANSWER_SECONDS), never
    for a refusal that retrying cannot change."""
    return case_staff_notify(case_id=case_id, comment_id=comment_id)


@shared_task(**SWEEP_TIME_LIMITS)
def case_staff_notices_resend() -> int:
    """Enqueue again the staff emails that never went out (the broker was down at commit)."""
    return sweep(
        "support.staff_notices_resend",
        case_staff_notices_pending(now=timezone.now()),
        lambda pending: enqueued(case_notify_staff, case_id=pending[0], comment_id=pending[1]),
    ).done


@shared_task(**SWEEP_TIME_LIMITS)
def cases_auto_close() -> int:
    """Close every resolved case whose customer stayed silent for the company's period."""
    now = timezone.now()
    # One transaction per case: a failure on one case must not keep the others open.
    return sweep(
        "support.auto_close",
        case_ids_due_for_auto_close(now=now),
        lambda case_id: case_close_if_unanswered(case_id=case_id, now=now),
    ).done


every(
    AUTO_CLOSE_EVERY_SECONDS,
    cases_auto_close,
    key="support: close resolved cases the customer did not answer",
)
every(
    NOTICE_SWEEP_EVERY_SECONDS,
    case_staff_notices_resend,
    key="support: resend staff emails that never went out",
)
