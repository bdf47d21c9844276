"""How the machine reaches Garante: POST /mcp in this process (Django's test client, the
whole view and the tool execution layer, nothing stubbed), or a live server over HTTP with
the official MCP SDK client. Both answer `Answer`s, so the oracle cannot tell them apart."""

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx2
from anyio.from_thread import start_blocking_portal
from django.db import connections
from django.test import Client as DjangoClient
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from tooling.certification.exchange import CONVERSATION_KEY, FAULT_KEY, IDEMPOTENCY_KEY

LEGACY_VERSION = "2025-11-25"
# Seconds spent per tool, over the process (the soak's report).
TOOL_SECONDS: Counter = Counter()
TOOL_CALLS: Counter = Counter()
# (tool, "ok" or the error's code) -> answers, over the process: how deep the runs reached.
OUTCOMES: Counter = Counter()


def counted(tool: str, answer: "Answer") -> "Answer":
    OUTCOMES[(tool, (answer.protocol_error and "protocol") or answer.code or "ok")] += 1
    return answer


@dataclass
class Answer:
    """One tools/call as the Gateway read it."""

    is_error: bool
    text: str
    body: Any
    # A JSON-RPC error or anything but a tool result: never right for a tools/call.
    protocol_error: str | None = None

    @property
    def error_type(self) -> str | None:
        return (
            self.body.get("error_type") if self.is_error and isinstance(self.body, dict) else None
        )

    @property
    def code(self) -> str | None:
        return self.body.get("code") if self.is_error and isinstance(self.body, dict) else None

    def short(self) -> str:
        if self.protocol_error:
            return f"protocol error {self.protocol_error}"
        if self.is_error:
            return f"{self.error_type} {self.code}"
        return "ok " + self.text[:120]


def call_meta(conversation: str, key: str | None, fault: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {CONVERSATION_KEY: conversation}
    if key is not None:
        meta[IDEMPOTENCY_KEY] = key
    if fault is not None:
        meta[FAULT_KEY] = fault
    return meta


class InProcess:
    """POST /mcp through Django's test client: the MCP view, call_tool, the engine, the
    handlers, on the test database, in the calling thread (a thread of its own for each of
    two concurrent calls, each with its own connection)."""

    name = "in-process"
    in_process = True

    def __init__(self, tokens: dict[str, str]) -> None:
        self.tokens = tokens

    def call(
        self,
        tenant: str,
        conversation: str,
        tool: str,
        arguments: Any,
        *,
        key: str | None = None,
        fault: str | None = None,
    ) -> Answer:
        client = DjangoClient(
            HTTP_AUTHORIZATION=f"Bearer {self.tokens[tenant]}",
            HTTP_MCP_PROTOCOL_VERSION=LEGACY_VERSION,
            HTTP_ACCEPT="application/json, text/event-stream",
        )
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": tool,
                "arguments": arguments,
                "_meta": call_meta(conversation, key, fault),
            },
        }
        started = time.monotonic()
        try:
            response = client.post("/mcp", data=json.dumps(body), content_type="application/json")
        finally:
            TOOL_SECONDS[tool] += time.monotonic() - started
            TOOL_CALLS[tool] += 1
        return counted(tool, _from_jsonrpc(response.status_code, response.content))

    def together(self, *calls: Callable[[], Answer]) -> list[Answer]:
        return _in_threads(calls)

    def close(self) -> None:
        pass


def _from_jsonrpc(status: int, content: bytes) -> Answer:
    try:
        message = json.loads(content)
    except ValueError:
        return Answer(True, content.decode(errors="replace"), None, f"HTTP {status}, not JSON")
    if status != 200 or "result" not in message:
        return Answer(
            True, json.dumps(message)[:300], None, f"HTTP {status}: {message.get('error')}"
        )
    result = message["result"]
    texts = [c.get("text", "") for c in result.get("content", []) if c.get("type") == "text"]
    text = texts[0] if texts else ""
    structured = result.get("structuredContent")
    if structured is None or json.loads(text) != structured:
        return Answer(True, text, structured, "text block and structuredContent differ")
    return Answer(bool(result.get("isError")), text, structured)


def _in_threads(calls: tuple[Callable[[], Answer], ...]) -> list[Answer]:
    """Each call in a thread of its own, released together; each thread closes its
    database connections when done (a transactional test database is flushed after)."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(index: int, call: Callable[[], Answer]) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = call()
        except BaseException as error:
            results[index] = error
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


class OverHttp:
    """A live server's /mcp with the official MCP SDK client, one per company (its token),
    driven from this synchronous machine through an anyio portal on a thread of its own."""

    name = "http"
    in_process = False

    def __init__(self, url: str, tokens: dict[str, str]) -> None:
        self._stack = contextlib.ExitStack()
        self.portal = self._stack.enter_context(start_blocking_portal())
        self.clients: dict[str, Any] = {}
        for tenant, token in tokens.items():
            # Each client is entered and left within one task of the portal (anyio's cancel
            # scopes insist), which wrap_async_context_manager gives it.
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
            self._stack.enter_context(self.portal.wrap_async_context_manager(http))
            client = Client(streamable_http_client(url, http_client=http), mode="legacy")
            self.clients[tenant] = self._stack.enter_context(
                self.portal.wrap_async_context_manager(client)
            )

    async def _call(
        self, tenant: str, conversation: str, tool: str, arguments: Any, key: Any, fault: Any
    ) -> Answer:
        client = self.clients[tenant]
        try:
            result = await client.call_tool(
                tool, arguments, meta=call_meta(conversation, key, fault)
            )
        except MCPError as error:
            return Answer(True, "", None, f"{error.error.code}: {error.error.message}")
        texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
        text = texts[0] if texts else ""
        structured = result.structured_content
        if structured is None or json.loads(text) != structured:
            return Answer(True, text, structured, "text block and structuredContent differ")
        return Answer(bool(result.is_error), text, structured)

    def call(
        self,
        tenant: str,
        conversation: str,
        tool: str,
        arguments: Any,
        *,
        key: str | None = None,
        fault: str | None = None,
    ) -> Answer:
        started = time.monotonic()
        try:
            answer = self.portal.call(self._call, tenant, conversation, tool, arguments, key, fault)
            return counted(tool, answer)
        finally:
            TOOL_SECONDS[tool] += time.monotonic() - started
            TOOL_CALLS[tool] += 1

    def together(self, *calls: Callable[[], Answer]) -> list[Answer]:
        # Each call blocks on the portal from a thread of its own: the two requests are on
        # the wire at once, over the SDK's shared connection pool.
        return _in_threads(calls)

    def close(self) -> None:
        self._stack.close()
