"""The first company as `seed_sandbox` builds it, what its staff would see change, and valid
arguments for every production tool aimed at its things: shared by the tenant-isolation
matrix, the step-up matrix and the contact-change attacks."""

import io
import re
from typing import Any

from django.core.management import call_command

from agenda.models import Appointment
from core.models import Company, Contact
from sales.models import Opportunity, Quote
from support.models import Case, CaseComment
from tests.factories import ANA_DOCUMENT
from tooling.registry import registry


def arguments_for(identifier: str, refs: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Valid arguments for every production tool, aimed at the first company's things."""
    return {
        "accept_quote": {"identifier": identifier, "quote": refs["quote"]},
        "add_case_comment": {"identifier": identifier, "case": refs["case"], "message": "Hola"},
        "book_appointment": {
            "identifier": identifier,
            "service": "Corte de pelo",
            "slot": refs["slot"],
        },
        "confirm_contact_change": {"identifier": identifier, "code": "123456"},
        "cancel_appointment": {"identifier": identifier, "appointment": refs["appointment"]},
        "confirm_case_resolved": {"identifier": identifier, "case": refs["resolved_case"]},
        "create_quote": {"identifier": identifier, "items": [{"sku": "CAF-001", "quantity": 1}]},
        "find_available_slots": {"service": "Corte de pelo", "from": refs["day"]},
        "get_case": {"identifier": identifier, "case": refs["case"]},
        "get_quote": {"identifier": identifier, "quote": refs["quote"]},
        "identify_contact": {"document": ANA_DOCUMENT},
        "list_my_appointments": {"identifier": identifier},
        "list_my_cases": {"identifier": identifier},
        "list_my_quotes": {"identifier": identifier},
        "list_services": {},
        "open_case": {
            "identifier": identifier,
            "subject": "Sigue igual",
            "description": "Vuelve a pasar.",
            "related_case": refs["closed_case"],
        },
        "reject_quote": {"identifier": identifier, "quote": refs["quote"]},
        "report_case_not_fixed": {
            "identifier": identifier,
            "case": refs["resolved_case"],
            "message": "No está arreglado.",
        },
        "request_sales_contact": {"identifier": identifier, "topic": "Quiero comprar"},
        "request_verification_code": {"identifier": identifier, "channel": "sms"},
        "reschedule_appointment": {
            "identifier": identifier,
            "appointment": refs["appointment"],
            "slot": refs["slot"],
        },
        "search_products": {"query": "Café"},
        "update_contact_details": {"identifier": identifier, "email": "nuevo@example.com"},
        "verify_code": {"identifier": identifier, "code": "123456"},
        "verification_status": {"identifier": identifier},
    }


def production_tools() -> list[str]:
    return [t.name for t in registry.all() if not t.name.startswith("testapp_")]


def snapshot(company: Company) -> dict[str, Any]:
    """What the first company's staff would see change."""
    return {
        "appointments": sorted(
            Appointment.objects.filter(company=company).values_list(
                "reference", "state", "starts_at"
            )
        ),
        "quotes": sorted(Quote.objects.filter(company=company).values_list("reference", "state")),
        "cases": sorted(Case.objects.filter(company=company).values_list("reference", "state")),
        "comments": CaseComment.objects.filter(case__company=company).count(),
        "opportunities": sorted(
            Opportunity.objects.filter(company=company).values_list("reference", "state")
        ),
        "contacts": sorted(
            Contact.objects.filter(company=company).values_list("document_number", "phone", "email")
        ),
    }


def seeded_sandbox() -> tuple[Company, str]:
    """The first company, as `seed_sandbox` builds it, and its Gateway token."""
    out = io.StringIO()
    call_command("seed_sandbox", stdout=out)
    token = re.search(r"Gateway token:\s*(\S+)", out.getvalue()).group(1)
    return Company.objects.get(slug="sandbox"), token
