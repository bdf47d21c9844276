"""The bench's calls still do what they measure: each MCP scenario of `make bench`, sent twice
the way wrk sends it (bench/wrk/mcp.lua), is answered without an error. A scenario the API
has come to refuse (open_case after intents made a second case a possible duplicate) would
otherwise be found only by the next full bench run, minutes into it."""

import io
import uuid

import pytest
from django.core.management import call_command
from django.test import Client

from bench.config import CUSTOMER
from bench.scenarios import all_scenarios
from core.models import Company
from core.services import gateway_credential_issue

pytestmark = pytest.mark.django_db

SCENARIOS = [s for s in all_scenarios() if s.path == "/mcp" and s.tool]


@pytest.fixture
def gateway():
    call_command("seed_sandbox", stdout=io.StringIO())
    _credential, token = gateway_credential_issue(
        company=Company.objects.get(slug="sandbox"), name="bench scenarios"
    )
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def call(tool, arguments, conversation, key=None):
        meta = {"com.asixto/conversationId": conversation}
        if key is not None:
            meta["com.asixto/idempotencyKey"] = key
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments, "_meta": meta},
        }
        response = client.post(
            "/mcp", body, content_type="application/json", HTTP_MCP_PROTOCOL_VERSION="2025-11-25"
        )
        assert response.status_code == 200, response.content
        return response.json()["result"]

    return call


def test_the_bench_measures_at_least_the_tools_it_names():
    assert {s.short for s in SCENARIOS} >= {
        "list_services",
        "find_available_slots",
        "identify_contact",
        "open_case",
        "replay",
    }


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.short)
def test_each_call_the_bench_sends_twice_is_answered(gateway, scenario):
    # The pool's conversations are identified before the load (bench.scenarios
    # prepare_conversations); a fresh one is new on every call.
    pooled = scenario.conversation.startswith("pool:")
    shared = "bench-pool-1" if pooled else scenario.conversation
    if scenario.conversation != "fresh":
        gateway("identify_contact", {"document": CUSTOMER}, shared, key=f"id-{uuid.uuid4()}")

    for _ in range(2):
        conversation = f"fresh-{uuid.uuid4()}" if scenario.conversation == "fresh" else shared
        key = {"none": None, "fresh": f"fresh-{uuid.uuid4()}"}.get(scenario.key, scenario.key)
        result = gateway(scenario.tool, scenario.arguments, conversation, key=key)

        assert result["isError"] is False, result
