"""`Certification`: connect as the Gateway, refuse a non-sandbox, run every scenario, report."""

import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import anyio
import httpx2
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Tool

from tooling.certification.agenda import agenda
from tooling.certification.exchange import CHECKS, Blocked, Contact, Refused, Report, Row
from tooling.certification.gateway import Gateway
from tooling.certification.outcomes import outcomes
from tooling.certification.preflight import preflight
from tooling.certification.responses import inspect_responses
from tooling.certification.sales import sales
from tooling.certification.scenario import Scenario, setup
from tooling.certification.support import support

MODES = ("legacy", "2026-07-28", "auto")
# The scenarios in the order they run, each with the check a failure outside its probes is
# reported under (the first check it serves).
SECTIONS: tuple[tuple[str, int, Callable[[Scenario], Awaitable[None]]], ...] = (
    ("setup", 1, setup),
    ("agenda", 1, agenda),
    ("sales", 5, sales),
    ("support", 1, support),
    ("outcomes", 7, outcomes),
)


class Certification:
    """One certification run against one server and one sandbox company."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        contacts: list[Contact],
        mode: str = "legacy",
        timeout: float = 30,
        today: datetime | None = None,
    ) -> None:
        if len(contacts) < 2:
            raise ValueError("certification needs two sandbox contacts")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.url = url
        self.token = token
        self.contacts = contacts
        self.mode = mode
        self.timeout = timeout
        self.today = (today or datetime.now(UTC)).date()
        self.run_id = secrets.token_hex(4)
        self.report = Report(url=url, mode=mode, started_at=datetime.now(UTC).isoformat())

    def run(self) -> Report:
        try:
            anyio.run(self._run)
        except Refused as refused:
            self.report.refused = str(refused)
        return self.report

    async def _run(self) -> None:
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {self.token}"}, timeout=self.timeout
        )
        transport = Client(streamable_http_client(self.url, http_client=http), mode=self.mode)
        try:
            async with http, transport as client:
                await self._session(client)
        except BaseException as error:
            # The SDK runs in task groups, so a failure may arrive wrapped in a group.
            cause = _innermost(error)
            if isinstance(cause, Refused):
                raise cause from None
            if isinstance(cause, MCPError | httpx2.HTTPError | OSError):
                raise Refused(f"cannot talk MCP to {self.url}: {cause!r}") from None
            raise

    async def _session(self, client: Client) -> None:
        tools = (await client.list_tools()).tools
        scenario = self._scenario(client, tools)
        await preflight(scenario)
        for name, check, section in SECTIONS:
            try:
                await section(scenario)
            except Blocked as blocked:
                # A step outside any probe failed: say so under the check it serves first.
                self.report.rows.append(
                    Row(check, f"{name}: preparation", "", got=f"not run: {blocked}")
                )
        inspect_responses(scenario)
        for number in CHECKS:
            if not any(r.check == number for r in self.report.rows):
                self.report.rows.append(Row(number, "(no probe ran)", "", got="not run"))

    def _scenario(self, client: Client, tools: list[Tool]) -> Scenario:
        """The run's shared state over a gateway that keys every tool not declared read-only."""
        writes = {
            t.name
            for t in tools
            if not (t.annotations is not None and t.annotations.read_only_hint)
        }
        gateway = Gateway(client, writes, self.contacts)
        self.report.exchanges = gateway.exchanges
        return Scenario(
            gateway,
            self.report,
            schemas={t.name: t.input_schema.get("properties") or {} for t in tools},
            token=self.token,
            today=self.today,
            run_id=self.run_id,
        )


def _innermost(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error
