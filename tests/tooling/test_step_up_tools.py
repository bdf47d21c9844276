"""The company's step-up policy holds for every tool it may list: each tool acting for an
identified customer asks for the verification itself, and the policy lists nothing else."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from core.models import StepUpPolicy
from tests.reliability.test_tenant_isolation import ANA, arguments_for, seeded_sandbox, snapshot
from tooling.context import CallMeta
from tooling.execution import call_tool
from tooling.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

CONVERSATION = "conv-step-up"


def call(company, name: str, arguments: dict):
    meta = CallMeta(conversation_id=CONVERSATION, idempotency_key=f"k-{uuid.uuid4().hex}")
    return call_tool(
        registry.get(name), company=company, arguments=arguments, meta=meta, surface="mcp"
    )


def sees_its_things(company) -> dict[str, str]:
    """Ana identifies and reads what she has, so the conversation has seen every reference."""
    assert call(company, "identify_contact", {"document": ANA}).is_error is False
    day = (timezone.now() + timedelta(days=7)).date().isoformat()
    slots = call(company, "find_available_slots", {"service": "Corte de pelo", "from": day})
    appointments = call(company, "list_my_appointments", {"identifier": ANA})
    # The sandbox's quotes are settled: one more, open, for accept_quote and reject_quote.
    quote = call(
        company, "create_quote", {"identifier": ANA, "items": [{"sku": "CAF-001", "quantity": 1}]}
    )
    cases = call(company, "list_my_cases", {"identifier": ANA}).body["items"]
    by_state = {c["state"]: c["reference"] for c in cases}
    return {
        "day": day,
        "slot": slots.body["items"][0]["slot"],
        "appointment": appointments.body["items"][0]["appointment"],
        "quote": quote.body["reference"],
        "case": by_state["open"],
        "closed_case": by_state["closed"],
        "resolved_case": by_state["resolved"],
    }


def test_every_tool_a_policy_may_list_asks_for_the_code_before_it_acts():
    """Before, seven of them ignored a policy that listed them: a quote was rejected, a case
    read, without the code staff had asked for."""
    company, _token = seeded_sandbox()
    refs = sees_its_things(company)
    matrix = arguments_for(ANA, refs)
    listed = [t.name for t in registry.all() if t.takes_step_up and t.name in matrix]
    assert set(listed) == set(matrix) - {
        "find_available_slots",
        "identify_contact",
        "list_services",
        "search_products",
        "request_verification_code",
        "verify_code",
    }
    StepUpPolicy.objects.update_or_create(company=company, defaults={"actions": listed})
    before = snapshot(company)

    answers = {name: call(company, name, matrix[name]) for name in listed}

    assert {
        name: (outcome.body.get("error_type"), outcome.body.get("code"))
        for name, outcome in answers.items()
    } == dict.fromkeys(listed, ("PERMISSION", "verification_required"))
    assert snapshot(company) == before
