"""What the scenarios of a run share: the gateway, the conversations, earlier results, the probe."""

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from typing import Any

import httpx2
from mcp import MCPError

from tooling.certification.answers import STATES, items
from tooling.certification.exchange import Blocked, Contact, Exchange, Report, Row
from tooling.certification.gateway import Gateway
from tooling.certification.verdicts import Verdict


class Scenario:
    """One run's shared state. The conversations: the first customer's main one (`a1`), one
    that reads nothing (`blind`, check 4), one that switches identity (`switch`, check 2), one
    that only reads terminal entities (`terminal`, check 3), and the second customer's (`b1`).
    `state` keeps what one step obtained for later ones (the booked appointment, the quote)."""

    def __init__(
        self,
        gateway: Gateway,
        report: Report,
        *,
        schemas: dict[str, dict[str, Any]],
        token: str,
        today: date,
        run_id: str,
    ) -> None:
        self.gw = gateway
        self.report = report
        self.contacts = gateway.contacts
        self.ana, self.bruno = self.contacts[0], self.contacts[1]
        self.token = token
        self.today = today
        self.run_id = run_id
        self.schemas = schemas
        # The largest page each list tool allows, from its own schema: reads that count
        # effects look at as much as the server lets them.
        self.limits = {
            name: (properties.get("limit") or {}).get("maximum")
            for name, properties in schemas.items()
        }
        self.state: dict[str, Any] = {}
        self.a1, self.b1 = self.conversation("ana"), self.conversation("bruno")
        self.blind = self.conversation("ana-blind")
        self.switch = self.conversation("ana-switch")
        self.terminal = self.conversation("ana-terminal")

    def conversation(self, name: str) -> str:
        return f"certify-{self.run_id}-{name}"

    @contextmanager
    def probe(self, check: int, name: str, proves: str) -> Iterator[Row]:
        """A row; anything that stops it (a missing precondition, a transport error) fails it
        with the reason instead of stopping the run."""
        row = Row(check=check, probe=name, proves=proves)
        self.report.rows.append(row)
        try:
            yield row
        except Blocked as blocked:
            row.passed, row.got = False, f"not run: {blocked}"
        except (MCPError, httpx2.HTTPError, OSError) as error:
            row.passed, row.got = False, f"transport failure: {error!r}"
        except Exception as error:  # an answer shaped so badly that the probe cannot read it
            row.passed, row.got = False, f"unreadable answer: {error!r}"

    @staticmethod
    def judge(row: Row, verdict: Verdict, *exchanges: Exchange, sent: str = "") -> None:
        row.passed, row.got = verdict
        row.sent = sent or " ; ".join(e.sent() for e in exchanges)

    def need(self, name: str) -> Any:
        if name not in self.state:
            raise Blocked(f"needs {name}, which an earlier step could not obtain")
        return self.state[name]

    def most(self, tool: str) -> dict[str, int]:
        """The `limit` argument asking `tool` for its largest page (none if it has no limit)."""
        maximum = self.limits.get(tool)
        return {"limit": maximum} if isinstance(maximum, int) else {}

    def state_filter(self, tool: str, state: str) -> dict[str, str]:
        """The argument that filters `tool`'s list by `state`, in the tool's own terms: its
        `state` (or older `status`) property, with an enum value or a word its description
        names."""
        schema = self.schemas.get(tool, {})
        prop = next((p for p in ("state", "status") if p in schema), None)
        if prop is None:
            return {}
        synonyms = STATES.get(state, (state,))
        spec = schema[prop]
        options = [o for o in spec.get("anyOf", [spec]) if isinstance(o, dict)]
        enum = [v for o in options for v in o.get("enum", [])]
        if enum:
            chosen = next((s for s in synonyms if s in enum), synonyms[0])
        else:
            text = str(spec.get("description", ""))
            chosen = next((s for s in synonyms if s in text), synonyms[0])
        return {prop: chosen}

    async def list_mine(
        self, conversation: str, tool: str, contact: Contact, state: str | None = None
    ) -> Exchange:
        """`tool` (a list_my_* read) for `contact` in `conversation`: its largest page, only
        entities in `state` when given."""
        arguments: dict[str, Any] = {"identifier": contact.identifier}
        if state is not None:
            arguments.update(self.state_filter(tool, state))
        arguments.update(self.most(tool))
        return await self.gw.call(conversation, tool, arguments)

    async def mine(
        self, conversation: str, tool: str, contact: Contact, state: str | None = None
    ) -> list[dict[str, Any]]:
        """The items of `list_mine`; Blocked if the read fails."""
        return items(await self.list_mine(conversation, tool, contact, state), tool)


async def setup(scenario: Scenario) -> None:
    """Each conversation of the run identifies its customer."""
    for conversation in (scenario.a1, scenario.blind, scenario.switch, scenario.terminal):
        await scenario.gw.identify(conversation, scenario.ana)
    await scenario.gw.identify(scenario.b1, scenario.bruno)
