"""gunicorn's configuration, read from the working directory by every `gunicorn` started in the
repository (the README's command, tests/servers.py, bench/load.py): the metrics of all its
workers in one place, so that a scrape of /metrics, answered by whichever worker, sums them.

prometheus_client's multiprocess mode: each worker writes its values to files of its own in
PROMETHEUS_MULTIPROC_DIR and core.metrics adds them up. The variable must be set before any
worker imports prometheus_client, so it is set here, in the master, which reads this file
before it starts a worker. Set by the operator, that directory is used and emptied at start
(values of a previous run would otherwise be added to this one's); unset, a private directory
is made, and removed when the server stops.
"""

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

_made = not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
if _made:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="garante-metrics-")
_directory = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
_directory.mkdir(parents=True, exist_ok=True)
for _stale in _directory.glob("*.db"):
    _stale.unlink()


def child_exit(server, worker) -> None:
    """A worker gone: its live gauges go with it (its counters stay in the sum)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server) -> None:
    if _made:
        with contextlib.suppress(OSError):
            shutil.rmtree(_directory)
