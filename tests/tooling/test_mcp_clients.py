"""Real MCP clients against POST /mcp: the official Python SDK and the MCP Inspector CLI."""

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError

from agenda.models import Service
from tests.tooling.sdk import run_sdk

pytestmark = pytest.mark.django_db(transaction=True)

MODES = ["legacy", "2026-07-28", "auto"]
INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
ERAS = ["legacy", "modern"]


def test_the_sdk_lists_list_services_with_its_schema_and_annotations(live_server, token, subtests):
    async def session(client: Client) -> Any:
        return client.protocol_version, await client.list_tools()

    for mode in MODES:
        with subtests.test(mode=mode):
            version, listing = run_sdk(f"{live_server.url}/mcp", token, mode, session)

            assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            tool = next(t for t in listing.tools if t.name == "list_services")
            assert tool.title == "List bookable services"
            assert tool.input_schema["type"] == "object"
            assert tool.input_schema["properties"]["limit"]["maximum"] == 50
            assert tool.annotations.read_only_hint is True
            assert tool.annotations.destructive_hint is False
            assert tool.annotations.idempotent_hint is True
            assert tool.annotations.open_world_hint is False


def test_the_sdk_calls_list_services_and_gets_structured_content(
    live_server, token, company, subtests
):
    Service.objects.create(company=company, name="Corte", duration_minutes=30)
    Service.objects.create(company=company, name="Tinte", duration_minutes=60)

    async def session(client: Client) -> Any:
        return await client.call_tool(
            "list_services", {"limit": 1}, meta={"com.asixto/conversationId": "conv-sdk"}
        )

    for mode in MODES:
        with subtests.test(mode=mode):
            result = run_sdk(f"{live_server.url}/mcp", token, mode, session)

            assert result.is_error is False
            assert result.structured_content == {
                "items": [{"name": "Corte", "description": "", "duration_minutes": 30}],
                "count": 1,
                "has_more": True,
                "next_cursor": "cDE",  # where the next page starts: the second service
            }
            assert json.loads(result.content[0].text) == result.structured_content


def test_the_sdk_sees_a_business_error_as_an_is_error_result(live_server, token, subtests):
    async def session(client: Client) -> Any:
        return await client.call_tool("list_services", {})  # no conversation id

    for mode in ["legacy", "2026-07-28"]:
        with subtests.test(mode=mode):
            result = run_sdk(f"{live_server.url}/mcp", token, mode, session)

            assert result.is_error is True
            assert result.structured_content["error_type"] == "VALIDATION"
            assert result.structured_content["code"] == "missing_conversation_id"


def test_the_sdk_gets_invalid_params_for_an_unknown_tool(live_server, token, subtests):
    for mode in ["legacy", "2026-07-28"]:

        async def session(client: Client) -> Any:
            try:
                await client.call_tool("no_such_tool", {}, meta={"com.asixto/conversationId": "c"})
            except MCPError as error:
                return error
            raise AssertionError("the call should have failed")

        with subtests.test(mode=mode):
            raised = run_sdk(f"{live_server.url}/mcp", token, mode, session)

            assert raised.code == -32602


def test_the_sdk_gets_bad_arguments_as_a_tool_result_the_model_can_read(
    live_server, token, subtests
):
    for mode in ["legacy", "2026-07-28"]:

        async def session(client: Client) -> Any:
            meta = {"com.asixto/conversationId": "c"}
            return await client.call_tool("list_services", {"limit": 500}, meta=meta)

        with subtests.test(mode=mode):
            result = run_sdk(f"{live_server.url}/mcp", token, mode, session)

            assert result.is_error is True
            assert result.structured_content["problems"][0]["field"] == "limit"
            assert "50" in result.structured_content["problems"][0]["message"]


# --- MCP Inspector CLI -------------------------------------------------------------------


@pytest.fixture
def inspector(live_server, token, tmp_path: Path):
    """Run the Inspector CLI against the live server; skip cleanly without Node."""
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx (Node.js) is not installed")
    env = {
        **os.environ,
        # Keep its catalog and client config out of the user's home.
        "MCP_CATALOG_PATH": str(tmp_path / "mcp.json"),
        "MCP_CLIENT_CONFIG_PATH": str(tmp_path / "client.json"),
        "NO_UPDATE_NOTIFIER": "1",
        "npm_config_update_notifier": "false",
    }

    def run(era: str, method: str, *extra: str) -> subprocess.CompletedProcess[str]:
        command = [
            npx,
            "-y",
            INSPECTOR,
            "--cli",
            f"{live_server.url}/mcp",
            "--transport",
            "http",
            "--protocol-era",
            era,
            "--method",
            method,
            "--header",
            f"Authorization: Bearer {token}",
            "--stored-auth-only",
            "--format",
            "json",
            *extra,
        ]
        # The first run downloads the package from the npm registry.
        return subprocess.run(
            command, capture_output=True, text=True, timeout=420, env=env, check=False
        )

    return run


def _json_output(completed: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The MCP result the CLI printed (`--format json` wraps it as {"result": ...})."""
    assert completed.stdout.strip(), completed.stderr
    return json.loads(completed.stdout)["result"]


@pytest.mark.node
def test_the_inspector_lists_the_tools(inspector, subtests):
    for era in ERAS:
        with subtests.test(era=era):
            completed = inspector(era, "tools/list")

            assert completed.returncode == 0, completed.stderr
            tools = _json_output(completed)["tools"]
            listed = next(t for t in tools if t["name"] == "list_services")
            assert listed["annotations"]["readOnlyHint"] is True
            assert listed["annotations"]["openWorldHint"] is False
            assert listed["inputSchema"]["properties"]["limit"]["maximum"] == 50


@pytest.mark.node
def test_the_inspector_calls_a_tool(inspector, company, subtests):
    Service.objects.create(company=company, name="Corte", duration_minutes=30)

    for era in ERAS:
        with subtests.test(era=era):
            completed = inspector(
                era,
                "tools/call",
                "--tool-name",
                "list_services",
                "--tool-args-json",
                '{"limit": 3}',
                "--tool-metadata",
                "com.asixto/conversationId=conv-inspector",
            )

            assert completed.returncode == 0, completed.stderr
            result = _json_output(completed)
            assert result["structuredContent"]["items"] == [
                {"name": "Corte", "description": "", "duration_minutes": 30}
            ]
            assert result.get("isError", False) is False


@pytest.mark.node
def test_the_inspector_reports_a_business_error_with_exit_5(inspector, subtests):
    for era in ERAS:
        with subtests.test(era=era):
            completed = inspector(
                era, "tools/call", "--tool-name", "list_services", "--tool-args-json", "{}"
            )

            assert completed.returncode == 5, completed.stdout + completed.stderr
            assert "missing_conversation_id" in completed.stdout + completed.stderr
