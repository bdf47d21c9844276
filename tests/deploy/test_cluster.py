"""deploy.cluster as an operator meets it without starting anything: the variables it reads,
the environment its processes get, its state file, its commands' refusals, and the pool model
its PgBouncer is configured from (docs/scaling.md). tests/cluster starts the real thing."""

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from deploy import cluster as deploy_cluster
from deploy.cluster import DEFAULT_DATABASE_URL, Cluster
from deploy.pgbouncer import DIRECT_CONNECTIONS, PoolModel, query_wait_timeout
from tests.config.environment import variables_read

ROOT = Path(__file__).resolve().parent.parent.parent
OPERATORS_DATABASE = "postgres://garante:secret@db.example.com:5432/garante_production"


def layout(directory: Path, **overrides) -> Cluster:
    values = {
        "directory": directory,
        "database_url": "postgres://postgres@127.0.0.1:5432/garante_cluster",
        "redis_url": "redis://127.0.0.1:6379/9",
        "nginx_port": 18100,
        "node_ports": [18101, 18102],
        "pgbouncer_port": 18103,
        **overrides,
    }
    return Cluster(**values)


def test_the_cluster_ignores_an_exported_database_url_and_reads_its_own(monkeypatch, tmp_path):
    monkeypatch.setenv("DATABASE_URL", OPERATORS_DATABASE)
    monkeypatch.delenv("GARANTE_CLUSTER_DATABASE_URL", raising=False)
    monkeypatch.setenv("GARANTE_CLUSTER_DIR", str(tmp_path))
    cluster = Cluster.from_environment()
    assert cluster.database_url == DEFAULT_DATABASE_URL
    for env in (cluster.environment(), cluster.direct_environment()):
        assert "db.example.com" not in json.dumps(env)
    assert cluster.direct_environment()["DATABASE_URL"] == DEFAULT_DATABASE_URL

    own = "postgres://postgres@127.0.0.1:5432/my_cluster"
    monkeypatch.setenv("GARANTE_CLUSTER_DATABASE_URL", own)
    cluster = Cluster.from_environment()
    assert cluster.database_url == own
    assert cluster.environment()["DATABASE_URL"].endswith(f":{cluster.pgbouncer_port}/my_cluster")


def test_the_processes_get_nothing_of_garante_from_the_callers_environment(monkeypatch, tmp_path):
    # An operator's shell with production settings exported: none reaches the cluster, where
    # a queue of another name would leave the codes' tasks unconsumed and SMTP would mail out.
    exported = {
        "GARANTE_VERIFICATION_QUEUE": "codes",
        "EMAIL_HOST": "smtp.example.com",
        "DJANGO_DEBUG": "1",
        "CELERY_TASK_ALWAYS_EAGER": "1",
        "SENTRY_DSN": "https://key@sentry.example.com/1",
    }
    for name, value in exported.items():
        monkeypatch.setenv(name, value)
    env = layout(tmp_path).environment()
    assert set(exported) & set(env) == set()
    assert env["PATH"] == os.environ["PATH"]


def test_every_variable_the_cluster_gives_its_processes_is_read_by_them(tmp_path):
    cluster = layout(tmp_path, extra_env={})
    given = {
        *cluster.environment(),
        *cluster.direct_environment(),
        *cluster.node_environment(1),
        "GARANTE_SANDBOX_TOKEN",  # to seed_sandbox --keep-token
    }
    assert {"EMAIL_FILE_PATH", "GARANTE_DB_ANSWER_SECONDS"} <= given
    assert sorted(given - set(deploy_cluster.PASSED_THROUGH) - variables_read()) == []


def test_the_state_file_is_readable_by_its_owner_only(tmp_path):
    cluster = layout(tmp_path, token="gt_secret")
    cluster.state_file.write_text("{}")
    cluster.state_file.chmod(0o644)  # as an earlier version wrote it
    cluster.save()
    assert stat.S_IMODE(cluster.state_file.stat().st_mode) == 0o600
    assert json.loads(cluster.state_file.read_text())["token"] == "gt_secret"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary file left


def test_a_state_file_read_back_is_the_same_layout(tmp_path):
    cluster = layout(tmp_path, token="gt_x", pool_size=5, upstream_keepalive_seconds=3)
    cluster.save()
    again = deploy_cluster.load(cluster.state_file)
    assert again == cluster
    assert (again.pool_size, again.node_keepalive_seconds) == (5, 8)


def cluster_command(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GARANTE_CLUSTER_DIR": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-m", "deploy.cluster", *arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_restart_and_manage_need_a_cluster_and_name_the_parts(tmp_path):
    for arguments in (["restart", "node1"], ["manage", "check"]):
        done = cluster_command(tmp_path, *arguments)
        assert done.returncode == 1
        assert "`make cluster` first" in done.stderr
    layout(tmp_path).save()
    done = cluster_command(tmp_path, "restart", "node3")
    assert done.returncode == 1
    assert "pgbouncer, node1, node2, worker1, worker2, beat, nginx" in done.stderr
    done = cluster_command(tmp_path, "restart", "node1")  # a stopped cluster: nothing runs
    assert done.returncode == 1
    assert "no part of the cluster" in done.stderr and "runs: `make cluster`" in done.stderr
    done = cluster_command(tmp_path, "restart")
    assert done.returncode == 2
    assert "restart NAME" in done.stderr


def test_manage_runs_against_the_clusters_database_with_its_settings(tmp_path):
    layout(tmp_path, database_url="postgres://postgres@127.0.0.1:5432/clusterh_probe").save()
    done = cluster_command(
        tmp_path,
        "manage",
        "shell",
        "-v",
        "0",
        "-c",
        "from django.conf import settings; d = settings.DATABASES['default'];"
        "print(d['NAME'], d['PORT'], settings.CELERY_TASK_DEFAULT_QUEUE[:8], settings.DEBUG)",
    )
    assert done.returncode == 0, done.stderr
    # Straight to PostgreSQL (5432), not through PgBouncer; the cluster's queue; production.
    assert done.stdout.split() == ["clusterh_probe", "5432", "cluster-", "False"]


# --- the pool model (deploy.pgbouncer.PoolModel, docs/scaling.md) ---------------------------


def test_the_cluster_on_this_two_core_machine_gets_eight_server_connections(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    cluster = layout(tmp_path)
    model = cluster.pool_model()
    # 2 nodes x 2 workers x (4 threads + the bookkeeping writer) + 2 Celery workers x 2.
    clients = 2 * 2 * (4 + 1) + 2 * 2
    assert (model.server_connections, model.client_connections) == (8, 2 * clients + 10)
    assert cluster.pool_size == 8
    assert layout(tmp_path, pool_size=6).pool_size == 6  # GARANTE_CLUSTER_POOL_SIZE wins


@pytest.mark.parametrize("cores", [1, 2, 8, 64])
def test_the_pool_never_exceeds_the_clients_that_could_use_it(cores):
    model = PoolModel.plan(
        server_cores=cores,
        web_processes=2,
        threads_per_process=2,
        celery_processes=1,
        db_answer_seconds=10,
        lock_wait_seconds=5,
    )
    assert 1 <= model.server_connections <= 2 * (2 + 1) + 1 * 2
    assert model.client_connections >= 2 * (2 + 1) + 2 + DIRECT_CONNECTIONS


@pytest.mark.parametrize("deadline", [2.5, 3, 5, 6.5, 10, 30, 120])
@pytest.mark.parametrize("lock_wait", [0.5, 5, 20])
def test_pgbouncers_queue_wait_ends_strictly_before_the_per_call_deadline(deadline, lock_wait):
    waited = query_wait_timeout(deadline, lock_wait)
    # Noticed up to a second late by PgBouncer's janitor: still before the deadline.
    assert waited > 0 and waited + 1 < deadline
    if deadline - 2 >= lock_wait + 1:
        assert waited >= lock_wait  # a queue behind lock waiters is not refused


def test_the_cluster_defaults_put_the_queue_wait_between_the_lock_wait_and_the_deadline(tmp_path):
    model = layout(tmp_path).pool_model()
    assert 5 < model.query_wait_timeout < 10 - 1
    env = layout(tmp_path).environment()
    assert env["GARANTE_DB_ANSWER_SECONDS"] == "10"
    assert env["GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS"] == "5000"


def test_a_deadline_too_short_for_pgbouncer_is_refused_by_name():
    with pytest.raises(ValueError, match="GARANTE_DB_ANSWER_SECONDS=2 "):
        query_wait_timeout(2, 5)
    assert query_wait_timeout(0, 5) == 6  # no deadline: past the lock wait


def test_a_part_started_again_stops_the_one_still_running_under_its_name(tmp_path):
    """A node whose stop outlasted a test's wait, or one left frozen, must not outlive the
    cluster: starting the part again ends it first (SIGTERM, woken if frozen), so the state
    file never forgets a running process."""
    cluster = layout(tmp_path)
    sleeper = [sys.executable, "-c", "import signal, time; time.sleep(60)"]
    first = cluster._run("node2", sleeper)
    os.kill(first.pid, signal.SIGSTOP)

    second = cluster._run("node2", sleeper)
    try:
        assert not first.alive()
        assert second.alive()
        assert [p.pid for p in cluster.processes if p.name == "node2"] == [second.pid]
    finally:
        cluster.stop()
    assert not second.alive()
