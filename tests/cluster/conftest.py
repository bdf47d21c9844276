"""The cluster the tests in this folder drive over HTTP: deploy.cluster's, on free ports, with
a database of its own (dropped after), started once for the session (`make cluster-test`).

Its nodes run the production settings (config.settings): the tests reach them only as a
client would, through nginx or at one node, and read the database directly (psycopg) to
count effects. What they need in the database besides the sandbox (another credential, a
staff member) is made by `cluster.shell(code)`, Django's shell against the cluster's database.
"""

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest

from deploy.cluster import Cluster
from deploy.processes import executable
from tests.factories import ANA_EMAIL
from tests.script_support import scratch_database

ROOT = Path(__file__).resolve().parent.parent.parent
SERVER_URL = "postgres://postgres@127.0.0.1:5432/postgres"
# The nodes' deadline per tool call in these tests (config.settings).
CALL_DEADLINE_SECONDS = 4.0


class ClusterUnderTest(Cluster):
    def shell(self, code: str) -> str:
        """Run Python in Django's shell against the cluster's database (not through PgBouncer),
        returning what it printed."""
        result = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", code],
            cwd=ROOT,
            env=self.direct_environment(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    def sql(self, query: str, params: tuple = ()) -> list[tuple]:
        with psycopg.connect(self.database_url, autocommit=True) as connection:
            cursor = connection.execute(query, params)
            return cursor.fetchall() if cursor.description else []

    def start_sending(self) -> None:
        """Start the cluster, then let its seeded company send for real. A sandbox's messages
        stay in its outbox, and these tests follow codes and emails to real channels (a local
        SMTP server, the file backends), as a production company's; `start` seeds it again
        only while it is a sandbox."""
        if self.sql("SELECT to_regclass('core_company')") != [(None,)]:  # started before
            self.sql("UPDATE core_company SET environment = 'sandbox' WHERE slug = 'sandbox'")
        self.start(static=False)  # no page is styled here
        self.sql("UPDATE core_company SET environment = 'production' WHERE slug = 'sandbox'")

    def logs(self) -> str:
        parts = []
        for log in sorted(self.directory.glob("*.log")):
            parts.append(f"== {log.name}\n{log.read_text(errors='replace')[-2000:]}")
        return "\n".join(parts)


@pytest.fixture(scope="session")
def cluster() -> Iterator[ClusterUnderTest]:
    for program in ("pgbouncer", "nginx"):
        try:
            executable(program)
        except SystemExit:
            if os.environ.get("GARANTE_REQUIRE_SERVICES"):
                raise
            pytest.skip(f"{program} is not installed (apt-get install -y {program})")
    # Named after DATABASE_URL's database, as pytest-django names the test database after it:
    # runs of several checkouts on one server stay apart.
    named = urlsplit(os.environ.get("DATABASE_URL", ""))
    prefix = named.path.lstrip("/") if named.scheme.startswith("postgres") else ""
    prefix = prefix or "garante"
    name = f"{prefix}_cluster_{uuid.uuid4().hex[:8]}"
    directory = ROOT / "var" / f"cluster-test-{uuid.uuid4().hex[:8]}"
    with scratch_database(SERVER_URL, name) as database_url:
        running = ClusterUnderTest.from_environment(
            directory=directory,
            database_url=database_url,
            redis_url="redis://127.0.0.1:6379/10",
            nginx_port=_free(),
            node_ports=[_free(), _free()],
            pgbouncer_port=_free(),
            # Fewer server connections than the nodes' 16 threads: calls queue in PgBouncer.
            pool_size=6,
            # Short idle limits (the production margin between them kept): the keep-alive
            # test's idle gaps reach both in seconds (test_keepalive.py).
            upstream_keepalive_seconds=2,
            # A day's window: the throttle test's count never straddles a window's end.
            extra_env={
                "GARANTE_INTEGRATION_RATE": "20/day",
                # Short, so that the freezes of tests/cluster/test_bursts.py end soon.
                "GARANTE_CALL_DEADLINE_SECONDS": str(CALL_DEADLINE_SECONDS),
            },
        )
        try:
            running.start_sending()
            yield running
        finally:
            running.stop()
            # Connections PgBouncer or a killed node left are gone before the drop.
    shutil.rmtree(directory, ignore_errors=True)


def _free() -> int:
    from deploy.processes import free_port

    return free_port()


@pytest.fixture
def gateway(cluster: ClusterUnderTest) -> dict[str, str]:
    return {"Authorization": f"Bearer {cluster.token}"}


def tool(url: str, name: str, body: dict, *, token: str, conversation: str, key: str, **kw):
    """One call of the REST tool mirror."""
    return httpx.post(
        f"{url}/api/tools/{name}",
        json=body,
        headers={
            "Authorization": f"Bearer {token}",
            "X-Conversation-Id": conversation,
            "Idempotency-Key": key,
        },
        timeout=kw.pop("timeout", 30),
        **kw,
    )


def identified_conversation(cluster, url: str | None = None) -> str:
    """A new conversation of the cluster's sandbox, identified as Ana (through `url`, or the
    cluster's front door)."""
    conversation = f"conv-{uuid.uuid4().hex[:10]}"
    response = tool(
        url or cluster.url,
        "identify_contact",
        {"email": ANA_EMAIL},
        token=cluster.token,
        conversation=conversation,
        key=uuid.uuid4().hex,
    )
    assert response.status_code == 200, response.text
    return conversation


def case_body(subject: str) -> dict:
    """open_case's arguments for Ana, with this subject: each a new case (`new_case`), not a
    possible duplicate of the one before (docs/tools.md, above the key)."""
    return {
        "identifier": ANA_EMAIL,
        "subject": subject,
        "description": "Fallos.",
        "new_case": True,
    }
