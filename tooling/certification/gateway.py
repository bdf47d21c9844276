"""The Gateway's side of the wire: tool calls over one SDK client, recorded as `Exchange`s."""

import hashlib
import json
from typing import Any

from mcp import Client, MCPError
from mcp.types import CallToolResult

from tooling.certification.exchange import (
    CONVERSATION_KEY,
    FAULT_KEY,
    IDEMPOTENCY_KEY,
    Blocked,
    Contact,
    Exchange,
)


def gateway_key(conversation: str, tool: str, arguments: dict[str, Any]) -> str:
    """Deterministic per logical operation, like the Gateway's: conversation, tool and the
    argument signature (the company is implied by the token). A repeated call repeats it."""
    signature = json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(f"{conversation}\n{tool}\n{signature}".encode()).hexdigest()
    return f"gw-{digest[:48]}"


class Gateway:
    """Tool calls over one SDK client, recorded as `Exchange`s."""

    def __init__(self, client: Client, writes: set[str], contacts: list[Contact]) -> None:
        self.client = client
        self.writes = writes
        self.contacts = contacts
        self.exchanges: list[Exchange] = []
        self.speakers: dict[str, Contact] = {}

    async def call(
        self,
        conversation: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        fault: str | None = None,
    ) -> Exchange:
        arguments = dict(arguments or {})
        meta = self.meta(conversation, tool, arguments, fault)
        exchange = Exchange(conversation, tool, arguments, meta, True, "", None)
        exchange.speaker = self.speakers.get(conversation)
        try:
            result = await self.client.call_tool(tool, arguments, meta=meta)
        except MCPError as error:
            exchange.rpc_error = f"{error.error.code}: {error.error.message}"
            exchange.body = {"jsonrpc_error": error.error.code}
        else:
            record_result(exchange, result)
        if tool == "identify_contact" and not exchange.is_error:
            self.note_speaker(exchange)
        self.exchanges.append(exchange)
        return exchange

    def meta(
        self, conversation: str, tool: str, arguments: dict[str, Any], fault: str | None
    ) -> dict[str, Any]:
        """The `_meta` the Gateway sends: the conversation, a key on writes, a fault if asked."""
        meta: dict[str, Any] = {CONVERSATION_KEY: conversation}
        if tool in self.writes:
            meta[IDEMPOTENCY_KEY] = gateway_key(conversation, tool, arguments)
        if fault is not None:
            meta[FAULT_KEY] = fault
        return meta

    def note_speaker(self, identified: Exchange) -> None:
        """From now on the conversation speaks for the customer it identified (for check 6)."""
        given = {str(v).casefold() for v in identified.arguments.values()}
        for contact in self.contacts:
            mine = {contact.document_number, contact.email, contact.phone}
            if given & {x.casefold() for x in mine if x}:
                identified.speaker = self.speakers[identified.conversation] = contact

    async def identify(self, conversation: str, contact: Contact) -> Exchange:
        exchange = await self.call(
            conversation, "identify_contact", {"document": contact.document_number}
        )
        if exchange.is_error:
            raise Blocked(f"identify_contact as {contact.label} failed: {exchange.got()}")
        return exchange


def record_result(exchange: Exchange, result: CallToolResult) -> None:
    """The tool result into the exchange: its first text block, and its structured content
    (or, without one, that text parsed as JSON)."""
    exchange.is_error = bool(result.is_error)
    texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    exchange.text = texts[0] if texts else ""
    exchange.body = result.structured_content
    if exchange.body is None and exchange.text:
        try:
            exchange.body = json.loads(exchange.text)
        except ValueError:
            exchange.body = exchange.text
