"""`make demo` (bin/demo) ends with the block a Gateway developer needs, once the server is
ready: the URLs, the gateway token, the admin login and a curl that works; everything else
goes to the log file the block names."""

import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port

ROOT = Path(__file__).resolve().parent.parent.parent
LOG = ROOT / "var" / "demo.log"


@pytest.mark.slow
def test_the_demo_ends_with_the_block_and_its_curl_works(tmp_path):
    address = f"127.0.0.1:{free_port()}"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "GARANTE_"))},
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        "GARANTE_DEMO_ADDRESS": address,
    }
    out = tmp_path / "terminal.txt"
    with out.open("wb") as terminal:
        demo = subprocess.Popen(
            [ROOT / "bin" / "demo"],
            cwd=ROOT,
            env=env,
            stdout=terminal,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 240
        while "curl -s" not in out.read_text():
            assert demo.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.5)
        time.sleep(1)  # anything the server would still print
        lines = out.read_text().rstrip("\n").splitlines()
        block = lines[lines.index("Garante demo ready (Ctrl-C stops it)") :]
        assert len(block) == 9, block  # the block is the end of the terminal
        fields = dict(line.strip().split(":", 1) for line in block[1:7])
        base = f"http://{address}"
        assert fields["MCP URL"].strip() == f"{base}/mcp"
        assert fields["REST tools"].strip() == f"{base}/api/tools/<name>"
        assert fields["Docs"].strip().startswith(f"{base}/api/docs")
        assert fields["Admin"].strip() == f"{base}/admin/  user 'admin' password 'admin'"
        assert fields["Log"].strip().startswith("var/demo.log")
        token = fields["Gateway token"].strip()
        curl = shlex.split(block[-1])
        assert curl[:3] == ["curl", "-s", f"{base}/api/tools/list_services"]
        headers = dict(curl[i + 1].split(": ", 1) for i, arg in enumerate(curl) if arg == "-H")
        assert headers["Authorization"] == f"Bearer {token}"
        answer = httpx.post(curl[2], headers=headers, content=curl[-1], timeout=10)
        assert answer.status_code == 200
        assert answer.json()["count"] > 0
        assert "Applying core.0001_initial" in LOG.read_text()
        # runserver writes its access line after the response has gone out
        served = r'"POST /api/tools/list_services HTTP/1.1" 200'
        deadline = time.monotonic() + 10
        while not re.search(served, LOG.read_text()):
            assert time.monotonic() < deadline, LOG.read_text()[-2000:]
            time.sleep(0.2)
    finally:
        os.killpg(demo.pid, signal.SIGTERM)
        demo.wait(timeout=30)
