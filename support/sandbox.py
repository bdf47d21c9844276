"""Support data for the declared sandbox (see seed_sandbox): open, resolved and closed cases."""

from core.models import Company
from support import services
from support.models import Case

# (contact's document number, subject, description, state to leave the case in)
CASES = [
    (
        "12345678Z",
        "La lavadora no centrifuga",
        "Desde el lunes hace mucho ruido y no termina el centrifugado.",
        Case.State.OPEN,
    ),
    (
        "12345678Z",
        "Factura de marzo duplicada",
        "Me cobraron dos veces la factura de marzo.",
        Case.State.CLOSED,
    ),
    (
        "12345678Z",
        "Cambio de horario de entrega",
        "Necesito que las entregas sean por la tarde.",
        Case.State.RESOLVED,
    ),
    (
        "X1234567L",
        "El pedido llegó incompleto",
        "Faltan dos piezas del pedido de la semana pasada.",
        Case.State.OPEN,
    ),
    (
        "X1234567L",
        "Cambio de dirección",
        "Quiero actualizar mi dirección de envío.",
        Case.State.CLOSED,
    ),
]

STEPS = {
    Case.State.OPEN: [],
    Case.State.RESOLVED: [services.case_start, services.case_resolve],
    Case.State.CLOSED: [services.case_start, services.case_resolve, services.case_close],
}


def seed(company: Company) -> None:
    services.support_settings_get(company=company)
    for document, subject, description, state in CASES:
        contact = company.contacts.filter(document_number=document).first()
        if contact is None or Case.objects.filter(contact=contact, subject=subject).exists():
            continue
        case = services.case_open(
            company=company, contact=contact, subject=subject, description=description
        )
        # Seeded cases stand for the past: staff heard of them then, not at every seeding.
        Case.objects.filter(pk=case.pk).update(staff_notified_at=case.created_at)
        for step in STEPS[state]:
            case = step(case=case)
