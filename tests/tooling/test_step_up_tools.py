"""The company's step-up policy holds for every tool it may list: each tool acting for an
identified customer declares its step-up on `@tool`, the platform asks for the verification
after checking the identifier and before the handler runs, and the policy lists nothing else."""

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from django.utils import timezone

from core.models import StepUpPolicy
from tests.factories import ANA_DOCUMENT, BRUNO_DOCUMENT
from tests.reliability.tenants import arguments_for, seeded_sandbox, snapshot
from tests.testapp import services
from tests.testapp.models import Counter
from tooling.context import CallMeta
from tooling.execution import call_tool
from tooling.registry import Tool, registry
from tooling.toolkit import Identifier, ToolContext, ToolInput, ToolOutput

pytestmark = pytest.mark.django_db(transaction=True)

CONVERSATION = "conv-step-up"


def call(company, name: str, arguments: dict):
    meta = CallMeta(conversation_id=CONVERSATION, idempotency_key=f"k-{uuid.uuid4().hex}")
    return call_tool(
        registry.get(name), company=company, arguments=arguments, meta=meta, surface="mcp"
    )


def sees_its_things(company) -> dict[str, str]:
    """Ana identifies and reads what she has, so the conversation has seen every reference."""
    assert call(company, "identify_contact", {"document": ANA_DOCUMENT}).is_error is False
    day = (timezone.now() + timedelta(days=7)).date().isoformat()
    slots = call(company, "find_available_slots", {"service": "Corte de pelo", "from": day})
    appointments = call(company, "list_my_appointments", {"identifier": ANA_DOCUMENT})
    # The sandbox's quotes are settled: one more, open, for accept_quote and reject_quote.
    quote = call(
        company,
        "create_quote",
        {"identifier": ANA_DOCUMENT, "items": [{"sku": "CAF-001", "quantity": 1}]},
    )
    cases = call(company, "list_my_cases", {"identifier": ANA_DOCUMENT}).body["items"]
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
    matrix = arguments_for(ANA_DOCUMENT, refs)
    listed = [t.name for t in registry.all() if t.takes_step_up and t.name in matrix]
    assert set(listed) == set(matrix) - {
        "find_available_slots",
        "identify_contact",
        "list_services",
        "search_products",
        "request_verification_code",
        "verify_code",
        "verification_status",
    }
    actions = sorted({registry.get(name).step_up for name in listed})
    StepUpPolicy.objects.update_or_create(company=company, defaults={"actions": actions})
    before = snapshot(company)

    answers = {name: call(company, name, matrix[name]) for name in listed}

    assert {
        name: (outcome.body.get("error_type"), outcome.body.get("code"))
        for name, outcome in answers.items()
    } == dict.fromkeys(listed, ("PERMISSION", "verification_required"))
    assert snapshot(company) == before


def test_every_tool_acting_for_an_identified_customer_declares_a_step_up():
    """Verification tools aside, a tool that takes the customer's identifier declares the
    step-up action the platform checks, so a policy can list it; only those can be listed.
    Each names itself, but for the second step of a contact change, which is the first's
    action: a policy protecting the change protects both steps."""
    identified = {t.name for t in registry.all() if t.identified and not t.verification}
    declared = {t.name for t in registry.all() if t.step_up is not None}
    listable = {t.name for t in registry.all() if t.takes_step_up}
    shared = {t.name: t.step_up for t in registry.all() if t.step_up not in (None, t.name)}

    assert identified == declared == listable
    assert shared == {"confirm_contact_change": "update_contact_details"}
    assert registry.step_up_actions() == declared - set(shared)
    assert {t.name for t in registry.all() if "identifier" in t.input.model_fields} == {
        t.name for t in registry.all() if t.identified
    }
    assert "accept_quote" in declared and "update_contact_details" in declared
    assert not {t.name for t in registry.all() if t.verification} & declared


class SpeakerIn(ToolInput):
    identifier: Identifier


class SpeakerOut(ToolOutput):
    first_name: str


@pytest.fixture
def declared_tool() -> Iterator[tuple[list[str], Callable[..., Tool]]]:
    """Registers test tools for one test: `declare(name, handler, **declaration)`; the
    default handler answers the customer it serves and notes them in the list yielded first."""
    served: list[str] = []
    names: list[str] = []

    def handler(ctx: ToolContext, params: SpeakerIn) -> dict:
        served.append(ctx.contact.first_name)
        return {"first_name": ctx.contact.first_name}

    def declare(name: str, handler=handler, **declaration) -> Tool:
        names.append(name)
        tool = Tool(
            name=name,
            title=name,
            description="Test-only.",
            input=SpeakerIn,
            output=SpeakerOut,
            handler=handler,
            **declaration,
        )
        return registry.register(tool)

    yield served, declare
    for name in names:
        registry.unregister(name)


def test_the_platform_checks_the_identifier_then_the_step_up_before_the_handler(
    company, ana, declared_tool
):
    """The order the tools relied on when each checked by hand: a wrong identifier is
    refused as such (not as a missing code), a listed action waits for the code, and only
    then does the handler run, for the customer the conversation identified."""
    served, declare = declared_tool
    declare("test_speaker", identified=True, step_up="test_speaker")
    assert call(company, "identify_contact", {"document": ANA_DOCUMENT}).is_error is False
    StepUpPolicy.objects.update_or_create(company=company, defaults={"actions": ["test_speaker"]})

    wrong = call(company, "test_speaker", {"identifier": BRUNO_DOCUMENT})
    unverified = call(company, "test_speaker", {"identifier": ANA_DOCUMENT})
    StepUpPolicy.objects.update_or_create(company=company, defaults={"actions": []})
    unlisted = call(company, "test_speaker", {"identifier": ANA_DOCUMENT})

    assert wrong.body["code"] == "identity_mismatch"
    assert unverified.body["code"] == "verification_required"
    assert unlisted.is_error is False and unlisted.body == {"first_name": "Ana"}
    assert served == ["Ana"]


def test_a_tool_that_defers_its_step_up_and_never_asks_it_fails_and_writes_nothing(
    company, ana, declared_tool
):
    """A handler declared to ask for the code itself (after checks of its own) that returns
    without asking is a bug: the call fails as SYSTEM and its write is rolled back, rather
    than act for a customer the policy wanted verified."""
    _served, declare = declared_tool

    def forgetful(ctx: ToolContext, params: SpeakerIn) -> dict:
        services.counter_increment(company=ctx.company, name="forgetful")
        return {"first_name": ctx.contact.first_name}

    def careful(ctx: ToolContext, params: SpeakerIn) -> dict:
        services.counter_increment(company=ctx.company, name="careful")
        ctx.require_step_up()
        return {"first_name": ctx.contact.first_name}

    for name, handler in [("test_forgetful", forgetful), ("test_careful", careful)]:
        declare(
            name, handler, write=True, identified=True, step_up="test_any", step_up_deferred=True
        )
    assert call(company, "identify_contact", {"document": ANA_DOCUMENT}).is_error is False

    forgot = call(company, "test_forgetful", {"identifier": ANA_DOCUMENT})
    asked = call(company, "test_careful", {"identifier": ANA_DOCUMENT})

    assert forgot.body["error_type"] == "SYSTEM"
    assert asked.is_error is False
    assert dict(Counter.objects.values_list("name", "value")) == {"careful": 1}


@pytest.mark.parametrize(
    ("declaration", "problem"),
    [
        ({}, "identified=True goes with an `identifier` argument"),
        ({"identified": True, "verification": True, "step_up": "x"}, "step-up is for"),
        ({"identified": True, "step_up_deferred": True}, "without a step_up action"),
        ({"identified": True, "confirms_identity": True}, "confirms_identity is for"),
        ({"identified": True, "customer_intent": True}, "customer_intent is for"),
    ],
)
def test_a_declaration_the_platform_cannot_enforce_is_refused_at_registration(
    declared_tool, declaration, problem
):
    """A tool taking an identifier must let the platform check it; a step-up goes with an
    identified customer outside the verification tools; a deferred one needs an action; only
    a verification tool may confirm an identification itself; an intent's lock taken for the
    customer is held by an identified write's transaction only."""
    _served, declare = declared_tool

    with pytest.raises(ValueError, match=problem):
        declare("test_undeclared", **declaration)

    assert registry.get("test_undeclared") is None
