"""Shared fixtures: the cast (tests/factories.py: companies, Ana and Bruno, the salon's service
and Marta, staff, an identified conversation), the agenda's frozen clock, gateway tokens and
HTTP clients against live servers."""

import fcntl
import itertools
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import hypothesis
import pytest
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, Permission
from django.core.management import call_command
from django.db import connection
from django.db.models import Q
from django.utils import translation

from agenda import clock
from agenda.models import AgendaSettings, Professional, Service
from agenda.selectors import agenda_settings_for
from core import process_cache
from core.identity import identify_contact
from core.models import Company, Contact, Conversation
from core.services import gateway_credential_issue
from core.sms import LocmemBackend
from tests import factories

# No deadline per example: a property is about what holds, not how fast (speed is measured by
# `make bench`), and on a loaded machine a slow example is not a failing one.
hypothesis.settings.register_profile("garante", deadline=None)
hypothesis.settings.load_profile("garante")

# gunicorn_server, sqlite_database; chromium, browser, phone_browser (see their docstrings)
pytest_plugins = ["tests.servers", "tests.browser", "tests.accessibility.axe"]

# What makes a test slow: a real server, worker or process of its own, or a database flushed
# after it (transaction=True) instead of rolled back. `make test-fast` leaves these out.
SLOW_FIXTURES = frozenset(
    {
        "live_server",
        "gunicorn_server",
        "sqlite_database",
        "celery_publisher",
        "postgresql_test_database_url",
        "smtp_refusing",
        "outage_stack",
        "transactional_db",
    }
)


def _is_slow(item: pytest.Item) -> bool:
    database = item.get_closest_marker("django_db")
    return bool(
        SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        or (database is not None and database.kwargs.get("transaction"))
    )


# Under pytest-xdist (`make test`: two workers, `--dist loadgroup`) a module's tests run on one
# worker, in order, so its module-scoped servers, workers and clusters start once. The modules of
# a group here also run on one worker, one after the other: each fires many requests at a
# multi-threaded gunicorn at once, one database connection per thread, and two of them together
# would take too many of the connections PostgreSQL shares with everybody's runs.
XDIST_GROUPS = {
    "tests/agenda/test_concurrency.py": "many-connections",
    "tests/reliability/test_concurrency.py": "many-connections",
    "tests/tooling/test_idempotency_concurrency.py": "many-connections",
}


def pytest_ignore_collect(collection_path: Any, config: pytest.Config) -> bool | None:
    """tests/cluster starts a cluster of its own (minutes): collected only when named on the
    command line (`make cluster-test`, a CI step of its own), not by `make test`."""
    if collection_path.name == "cluster" and collection_path.parent.name == "tests":
        named = [str(arg) for arg in config.args]
        if not any("tests/cluster" in arg for arg in named):
            return True
    return None


# Code that runs in another process (a server, a worker, a browser) is out of mutmut's sight:
# it credits a mutant's kill to the tests that reached its function in this process, and the
# other process would need mutmut and the mutant's name. Under `make mutate` these are skipped.
OTHER_PROCESS_FIXTURES = frozenset(
    {
        "gunicorn_server",
        "sqlite_database",
        "celery_publisher",
        "outage_stack",
        "chromium",
        "browser",
        "phone_browser",
    }
)


def _runs_elsewhere(item: pytest.Item) -> bool:
    return bool(OTHER_PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("GARANTE_MUTATION_RECHECK"):
        # A survivor tested again (tests/mutation/recheck.py): only what mutmut had to skip.
        kept = [i for i in items if _runs_elsewhere(i)]
        config.hook.pytest_deselected(items=[i for i in items if not _runs_elsewhere(i)])
        items[:] = kept
    if "MUTANT_UNDER_TEST" in os.environ:
        elsewhere = pytest.mark.skip(reason="runs the code in another process (make mutate)")
        for item in items:
            if _runs_elsewhere(item):
                item.add_marker(elsewhere)
    for item in items:
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
        group = XDIST_GROUPS.get(item.nodeid.split("::", 1)[0])
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    is_postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    without_pg = "needs PostgreSQL (this run is on SQLite: none at 127.0.0.1:5432, or DATABASE_URL)"
    skip_redis = pytest.mark.skip(reason="needs Redis at 127.0.0.1:6379 (not reachable)")
    if os.environ.get("GARANTE_REQUIRE_SERVICES"):
        # CI promises PostgreSQL and Redis: a missing service must fail, not skip quietly.
        if not is_postgres or not settings.REDIS_AVAILABLE:
            raise pytest.UsageError(
                "GARANTE_REQUIRE_SERVICES is set but PostgreSQL or Redis is down"
            )
        return
    for item in items:
        postgres = item.get_closest_marker("postgres")
        if postgres is not None and not is_postgres:
            item.add_marker(pytest.mark.skip(reason=postgres.kwargs.get("reason", without_pg)))
        if "redis" in item.keywords and not settings.REDIS_AVAILABLE:
            item.add_marker(skip_redis)


# Under mutmut (`make mutate`, tests/mutation/run.py) every test session is a process of its
# own, several at once: each takes a free slot (a file lock held until the process ends, even
# when killed) and its own reused test database, test_<name>_mut<slot>. A session killed at its
# time limit in a transaction=True test leaves committed rows behind: the slot's marker file
# says so, and the next session of that slot flushes the database first.
_mutation_slot: tuple[int, Path, Any] | None = None


def _mutation_worker_slot() -> tuple[int, Path] | None:
    global _mutation_slot
    if "MUTANT_UNDER_TEST" not in os.environ:
        return None
    if _mutation_slot is None:
        name = settings.DATABASES["default"]["NAME"]
        folder = Path(tempfile.gettempdir()) / f"garante-mutation-slots-{Path(str(name)).name}"
        folder.mkdir(exist_ok=True)
        for slot in itertools.count():
            handle = (folder / f"{slot}.lock").open("w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            _mutation_slot = (slot, folder / f"{slot}.dirty", handle)
            break
    slot, dirty, _handle = _mutation_slot
    return slot, dirty


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    taken = _mutation_worker_slot()
    if taken is None:
        return
    for alias in settings.DATABASES:
        database = settings.DATABASES[alias]
        test = database.setdefault("TEST", {})
        if database["ENGINE"].endswith("postgresql"):
            test["NAME"] = f"{test.get('NAME') or 'test_' + database['NAME']}_mut{taken[0]}"


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    taken = _mutation_worker_slot()
    if taken is None:
        yield
        return
    dirty = taken[1]
    if dirty.exists():
        with django_db_blocker.unblock():
            call_command("flush", interactive=False, verbosity=0)
    dirty.touch()
    yield
    dirty.unlink(missing_ok=True)


@pytest.fixture(autouse=True)
def _the_default_language_again() -> Iterator[None]:
    """Each test starts in the site's language: a request through the test client leaves the
    language its LocaleMiddleware chose active in the thread (in production every request
    chooses its own), and code outside a request speaks whatever is active."""
    yield
    translation.activate(settings.LANGUAGE_CODE)


@pytest.fixture
def make_company(db: None) -> Callable[..., Company]:
    return factories.company


@pytest.fixture
def company(db: None) -> Company:
    return factories.company(name="Peluquería Sol")


@pytest.fixture
def other_company(db: None) -> Company:
    return factories.company(name="Clínica Luna")


@pytest.fixture
def ana(company: Company) -> Contact:
    """Ana García, a customer of `company` with a document, a phone and an email."""
    return factories.ana(company)


@pytest.fixture
def bruno(company: Company) -> Contact:
    """Bruno López, another customer of `company`."""
    return factories.bruno(company)


@pytest.fixture
def catalog(company: Company) -> factories.Catalog:
    return factories.catalog(company)


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The agenda's "now", MONDAY_8AM (Monday 7 December 2026, 08:00 in Madrid), moved by
    hand: `frozen_clock["now"] = ...`. Shared with a live server, which runs in this process;
    not with gunicorn."""
    moment = {"now": factories.MONDAY_8AM}
    monkeypatch.setattr(clock, "now", lambda: moment["now"])
    return moment


@pytest.fixture
def agenda_settings(company: Company) -> AgendaSettings:
    """The salon's booking rules: an hour's notice, 60 days ahead, a slot every 30 minutes,
    cancellations up to two hours before."""
    settings = agenda_settings_for(company=company)
    settings.minimum_notice_minutes = 60
    settings.booking_horizon_days = 60
    settings.slot_step_minutes = 30
    settings.cancellation_cutoff_minutes = 120
    settings.save()
    return settings


@pytest.fixture
def service(company: Company, agenda_settings: AgendaSettings) -> Service:
    """ "Corte de pelo", 30 minutes and 10 of buffer, under the salon's booking rules."""
    return factories.service(company)


@pytest.fixture
def marta(company: Company, service: Service) -> Professional:
    """Gives `service`, Monday to Friday, 09:00-13:00 and 15:00-19:00 (local)."""
    return factories.marta(company, service)


@pytest.fixture
def staff(company: Company, request: pytest.FixtureRequest) -> AbstractBaseUser:
    """Maria, an administrator of `company`, through the admin role's group as staff join in
    production. A test about given permissions names them with the `staff_permissions`
    marker, and she holds exactly those: `@pytest.mark.staff_permissions("agenda")` (an app's
    permissions), `("core.view_idempotencyrecord")` (one), or none at all."""
    marker = request.node.get_closest_marker("staff_permissions")
    if marker is None:
        return factories.staff_member("maria", company, "admin")
    wanted = Q(pk__in=[])
    for name in marker.args:
        app_label, _, codename = name.partition(".")
        wanted |= Q(
            content_type__app_label=app_label, **({"codename": codename} if codename else {})
        )
    return factories.staff_member(
        "maria", company, "admin", permissions=Permission.objects.filter(wanted)
    )


@pytest.fixture
def make_identified(db: None) -> Callable[[Contact, str], Conversation]:
    """`make_identified(contact, external_id)`: the conversation `external_id` of the contact's
    company (created if new), identified as that contact by their document, as
    identify_contact leaves it."""

    def make(contact: Contact, external_id: str) -> Conversation:
        conversation, _ = Conversation.objects.get_or_create(
            company=contact.company, external_id=external_id
        )
        identify_contact(conversation=conversation, kind="document", value=contact.document_number)
        conversation.refresh_from_db()
        return conversation

    return make


@pytest.fixture
def ana_conv(ana: Contact, make_identified: Callable[[Contact, str], Conversation]) -> Conversation:
    """The conversation "conv-ana", identified as Ana."""
    return make_identified(ana, "conv-ana")


@pytest.fixture
def make_staff(db: None, request: pytest.FixtureRequest) -> Callable[..., Any]:
    """`make_staff(username, company=None, role="agent", **fields)`: a staff member
    (`factories.staff_member`) of `company`, or of the `company` fixture when none is given."""

    def make(username: str, company: Company | None = None, role: str = "agent", **fields: Any):
        of = company if company is not None else request.getfixturevalue("company")
        return factories.staff_member(username, of, role, **fields)

    return make


@pytest.fixture
def sms_outbox(settings) -> Iterator[list]:
    """Text messages go to a list in this process (`core.sms.LocmemBackend`), empty at first."""
    settings.GARANTE_SMS_BACKEND = "locmem"
    LocmemBackend.outbox.clear()
    yield LocmemBackend.outbox
    LocmemBackend.outbox.clear()


@pytest.fixture
def token(company: Company) -> str:
    return gateway_credential_issue(company=company, name="gateway")[1]


@pytest.fixture
def other_token(other_company: Company) -> str:
    return gateway_credential_issue(company=other_company, name="gateway")[1]


class ToolClient:
    """Calls tools over the REST mirror of a live server, as the Gateway would over HTTP."""

    def __init__(self, base_url: str, token: str, conversation_id: str) -> None:
        self.base_url = base_url
        self.conversation_id = conversation_id
        self.http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    def call(
        self,
        name: str,
        arguments: dict | None = None,
        *,
        key: str | None = None,
        conversation_id: str | None = None,
    ) -> httpx.Response:
        headers = {"X-Conversation-Id": conversation_id or self.conversation_id}
        if key is not None:
            headers["Idempotency-Key"] = key
        return self.http.post(f"/api/tools/{name}", json=arguments or {}, headers=headers)


@pytest.fixture
def tool_client(live_server: Any, token: str) -> Iterator[ToolClient]:
    client = ToolClient(live_server.url, token, f"conv-{uuid.uuid4().hex[:8]}")
    yield client
    client.http.close()  # frees the live server's keep-alive thread and its DB connection


@pytest.fixture
def ana_client(
    tool_client: ToolClient, ana: Contact, make_identified: Callable[[Contact, str], Conversation]
) -> ToolClient:
    """`tool_client`, its conversation identified as Ana."""
    make_identified(ana, tool_client.conversation_id)
    return tool_client


@pytest.fixture
def is_postgres() -> bool:
    return connection.vendor == "postgresql"


class McpClient:
    """Speaks JSON-RPC to POST /mcp of a live server, as the Gateway would.

    `request(..., modern=False)` sends a legacy-era request (MCP-Protocol-Version 2025-11-25);
    `modern=True` adds the 2026-07-28 `_meta` envelope and the matching routing headers.
    Every response is checked for the one header this stateless server must never send.
    """

    LEGACY = "2025-11-25"
    MODERN = "2026-07-28"

    def __init__(self, base_url: str, token: str | None, conversation_id: str) -> None:
        self.url = f"{base_url}/mcp"
        self.conversation_id = conversation_id
        headers = {"Accept": "application/json, text/event-stream"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        self.http = httpx.Client(
            headers=headers, timeout=30, event_hooks={"response": [self._no_session_id]}
        )
        self._ids = itertools.count(1)

    def __enter__(self) -> "McpClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        # Closing the socket lets the live server's thread release its database connection.
        self.http.close()

    @staticmethod
    def _no_session_id(response: httpx.Response) -> None:
        assert "mcp-session-id" not in response.headers, "a stateless server minted a session"

    def post(self, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
        if isinstance(body, bytes | str):
            headers = {"Content-Type": "application/json", **(headers or {})}
            return self.http.post(self.url, content=body, headers=headers)
        return self.http.post(self.url, json=body, headers=headers)

    def request(
        self,
        method: str,
        params: dict | None = None,
        *,
        modern: bool = False,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        params = dict(params or {})
        sent = {"MCP-Protocol-Version": self.MODERN if modern else self.LEGACY}
        if modern:
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": self.MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                **params.get("_meta", {}),
            }
            sent["Mcp-Method"] = method
            if method == "tools/call":
                sent["Mcp-Name"] = params["name"]
        body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        return self.post(body, {**sent, **(headers or {})})

    def call(
        self,
        name: str,
        arguments: dict | None = None,
        *,
        key: str | None = None,
        conversation_id: str | None = None,
        meta: dict | None = None,
        modern: bool = False,
    ) -> httpx.Response:
        """tools/call with the Gateway's `_meta` keys (conversation id unless overridden)."""
        call_meta = {"com.asixto/conversationId": conversation_id or self.conversation_id}
        if key is not None:
            call_meta["com.asixto/idempotencyKey"] = key
        call_meta.update(meta or {})
        params = {"name": name, "arguments": arguments or {}, "_meta": call_meta}
        return self.request("tools/call", params, modern=modern)


@pytest.fixture
def mcp(live_server: Any, token: str) -> Iterator[McpClient]:
    with McpClient(live_server.url, token, f"conv-{uuid.uuid4().hex[:8]}") as client:
        yield client


@pytest.fixture
def process_caches_on(settings):
    """The process caches on (5 s, as shipped), every cache empty before and after the test."""
    settings.GARANTE_PROCESS_CACHE_SECONDS = 5
    process_cache.process_caches_forget()
    yield
    process_cache.process_caches_forget()


@pytest.fixture
def cache_clock(monkeypatch) -> dict[str, float]:
    """The process caches' clock, moved by hand: `cache_clock["now"] += seconds`."""
    moment = {"now": 1000.0}
    monkeypatch.setattr(process_cache, "_clock", lambda: moment["now"])
    return moment
