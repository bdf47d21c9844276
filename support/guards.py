"""What every case transition checks first: its row lock, its owner, and its state.

A closed case takes nothing more (`case_closed_error`, offering a new case); any other state
refuses a transition its machine does not allow from there (`case_guard`). Each refusal carries
the case's state (the machine value and the customer's label). None of them writes: the
services (support.services) call them holding the row lock, before they change anything.
"""

from collections.abc import Callable
from typing import Any

from django.utils.translation import gettext_lazy as _
from django_fsm import can_proceed

from core.errors import ValidationFailed
from core.identity import check_owner
from core.models import Contact
from core.states import state_shown
from support.models import CUSTOMER_STATE_LABELS, Case


def case_lock(case: Case) -> Case:
    """The case's row, read again under lock, with its company."""
    return Case.objects.select_for_update().select_related("company").get(pk=case.pk)


def case_check_owner(contact: Contact | None, case: Case) -> None:
    """Customers act only on their own cases; staff (contact=None) on any."""
    if contact is not None:
        check_owner(contact=contact, owner_id=case.contact_id)


def case_check_open(case: Case) -> None:
    """A closed case accepts no change (`case_closed_error`)."""
    if case.state == Case.State.CLOSED:
        raise case_closed_error(case)


def case_guard(case: Case, transition: Callable[..., Any]) -> None:
    """Refuse a transition of a closed case, or one its state does not allow.

    Call while holding the case's row lock, with the locked case's bound transition.
    """
    case_check_open(case)
    if not can_proceed(transition):
        shown = state_shown(case.state, CUSTOMER_STATE_LABELS)
        raise ValidationFailed(
            _("No puedo hacer eso con el caso %(reference)s: está %(state)s.")
            % {"reference": case.reference, "state": shown["state_label"]},
            code="invalid_transition",
            **shown,
        )


def case_closed_error(case: Case) -> ValidationFailed:
    """VALIDATION `case_closed` naming the case, offering a new one, with its state."""
    return ValidationFailed(
        _(
            "El caso %(reference)s está cerrado y ya no admite cambios. Si el problema "
            "continúa, puedo abrir un caso nuevo relacionado con él."
        )
        % {"reference": case.reference},
        code="case_closed",
        **state_shown(case.state, CUSTOMER_STATE_LABELS),
    )
