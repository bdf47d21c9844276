"""The oracle's model of a conversation's verification, on sequences a soak found."""

import pytest

from tests.properties.runs import InProcessMachine
from tests.properties.world import fresh_phone

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_at_the_limit_another_identifier_voids_the_verification(machine_environment):
    """Soak seed 246275311: at its identification limit a conversation's mismatched
    identifiers answered too_many_attempts and kept the verification (the refusal comes
    before the identifier is looked up, and recorded nothing that voids it). The oracle, unsure
    after the first such refusal, took the second for a certain "no" and called the customer's
    next protected action a violation. The refusal now voids the verification, so the oracle
    is certain, and the protected action asks for a new code."""
    machine = InProcessMachine()
    try:
        conversation = machine.first_conversation()
        ana, bruno = machine.customers["A"][:2]
        machine.send(conversation, "identify_contact", {"document": ana.document})
        company = machine.world.tenants["A"].company
        for n in range(company.identify_failures_per_conversation):
            mismatch = machine.send(
                conversation,
                "open_case",
                {"identifier": bruno.document, "subject": f"Avería {n}", "description": "No va."},
            )
            assert mismatch.code == "identity_mismatch"
        mark = machine.code_mark("sms")
        machine.send(
            conversation,
            "request_verification_code",
            {"identifier": ana.document, "channel": "sms"},
        )
        # What the request_code rule records of a code sent.
        conversation.code = machine.read_code(conversation, "sms", mark)
        conversation.code_spent, conversation.code_attempts = False, 0
        assert conversation.code is not None
        verified = machine.send(
            conversation, "verify_code", {"identifier": ana.document, "code": conversation.code}
        )
        assert not verified.is_error
        assert conversation.verified == "yes"

        first = machine.send(
            conversation,
            "open_case",
            {"identifier": bruno.email, "subject": "Otra", "description": "No va."},
        )
        second = machine.send(
            conversation, "verify_code", {"identifier": bruno.email, "code": "000000"}
        )
        assert (first.code, second.code) == ("too_many_attempts", "too_many_attempts")
        assert conversation.verified == "no"

        # The oracle judges this answer inside send: it must not be a violation.
        changed = machine.send(
            conversation,
            "update_contact_details",
            {"identifier": ana.document, "phone": fresh_phone()},
        )
        assert changed.code == "verification_required", changed.short()
    finally:
        machine.teardown()
