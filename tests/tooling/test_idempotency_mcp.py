"""Idempotency over MCP: the Gateway's `_meta` key goes through the same engine as REST."""

import pytest

from tests.testapp import services
from tests.testapp.models import Counter, Reservation

pytestmark = pytest.mark.django_db(transaction=True)

INCREMENT = "testapp_increment_counter"


def tool_result(response) -> dict:
    assert response.status_code == 200
    return response.json()["result"]


def test_a_repeated_call_with_the_same_key_has_one_effect_and_the_same_result(mcp, company):
    first = tool_result(mcp.call(INCREMENT, {"name": "visits"}, key="gw-key-1"))
    second = tool_result(mcp.call(INCREMENT, {"name": "visits"}, key="gw-key-1"))

    assert first["isError"] is False
    assert second == first
    assert first["structuredContent"] == {"counter": "visits", "value": 1, "by": 1}
    assert Counter.objects.get(company=company, name="visits").value == 1


def test_the_cancel_twice_sequence_over_mcp_reports_success_both_times(mcp, company):
    reservation = services.reservation_create(company=company, owner=mcp.conversation_id)
    arguments = {"reference": reservation.reference}

    first = tool_result(mcp.call("testapp_cancel_reservation", arguments, key="gw-cancel"))
    second = tool_result(mcp.call("testapp_cancel_reservation", arguments, key="gw-cancel"))

    assert first["isError"] is False
    assert second == first
    reservation.refresh_from_db()
    assert reservation.cancellations == 1


def test_a_write_without_the_gateway_key_is_a_validation_error_and_not_executed(mcp, company):
    result = tool_result(mcp.call(INCREMENT, {"name": "visits"}))

    assert result["isError"] is True
    assert result["structuredContent"]["error_type"] == "VALIDATION"
    assert result["structuredContent"]["code"] == "missing_idempotency_key"
    assert not Counter.objects.filter(company=company).exists()


def test_the_same_key_with_other_arguments_is_a_conflict_result(mcp, company):
    mcp.call(INCREMENT, {"name": "visits"}, key="gw-key-1")

    result = tool_result(mcp.call(INCREMENT, {"name": "visits", "by": 2}, key="gw-key-1"))

    assert result["isError"] is True
    assert result["structuredContent"]["error_type"] == "CONFLICT"
    assert result["structuredContent"]["code"] == "idempotency_conflict"
    assert Counter.objects.get(company=company, name="visits").value == 1


def test_rest_and_mcp_share_one_key_space_per_company(mcp, tool_client, company):
    """The same conversation's call, first over REST then over MCP: one effect, one answer."""
    over_rest = tool_client.call(INCREMENT, {"name": "visits"}, key="shared-1")
    over_mcp = tool_result(
        mcp.call(
            INCREMENT,
            {"name": "visits"},
            key="shared-1",
            conversation_id=tool_client.conversation_id,
        )
    )

    assert over_mcp["structuredContent"] == over_rest.json()
    assert over_mcp["content"][0]["text"] == over_rest.text
    assert Counter.objects.get(company=company, name="visits").value == 1


def test_a_read_tool_needs_no_key_over_mcp(mcp, company):
    result = tool_result(mcp.call("testapp_read_counter", {"name": "visits"}))

    assert result["isError"] is False
    assert result["structuredContent"] == {"counter": "visits", "value": 0}
    assert not Reservation.objects.exists()
