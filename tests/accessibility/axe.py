"""axe-core in the browser tests: WCAG checks of a page as a real browser renders it.

The engine is the npm package pinned in tests/accessibility/package.json, installed into
tests/accessibility/node_modules by `make axe-install` (which `make test` runs) or, when it is
missing, by the `axe` fixture itself with the same npm command, so a fresh machine needs no
step of its own. Under GARANTE_REQUIRE_SERVICES (CI) an engine that cannot be installed fails
the tests instead of skipping them. Loaded for every test by tests/conftest.py.
"""

import fcntl
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from selenium import webdriver

FOLDER = Path(__file__).resolve().parent
SCRIPT = FOLDER / "node_modules" / "axe-core" / "axe.min.js"
INSTALL = [
    "npm",
    "install",
    "--no-package-lock",
    "--no-audit",
    "--no-fund",
    "--loglevel=error",
]
# WCAG 2.0, 2.1 and 2.2, levels A and AA: what the customer pages promise.
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
BLOCKING = {"serious", "critical"}


def _install() -> str:
    """Install the pinned engine with npm; an empty answer when it worked, else why not."""
    if shutil.which("npm") is None:
        return "npm is not installed"
    try:
        done = subprocess.run(
            INSTALL, cwd=FOLDER, capture_output=True, text=True, timeout=600, check=False
        )
    except subprocess.TimeoutExpired:
        return "npm install timed out"
    if done.returncode != 0 or not SCRIPT.exists():
        return f"npm install failed: {done.stderr.strip()[-500:]}"
    return ""


@pytest.fixture(scope="session")
def axe_source() -> str:
    """The text of axe.min.js, installed first when missing."""
    if not SCRIPT.exists():
        # One install at a time: pytest-xdist's workers may all find it missing.
        with (FOLDER / ".install-lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            problem = "" if SCRIPT.exists() else _install()
        if problem:
            if os.environ.get("GARANTE_REQUIRE_SERVICES"):
                pytest.fail(f"GARANTE_REQUIRE_SERVICES is set but axe-core is missing: {problem}")
            pytest.skip(f"axe-core is not available: {problem} (run `make axe-install`)")
    return SCRIPT.read_text(encoding="utf-8")


def violations(driver: webdriver.Chrome, source: str) -> list[dict]:
    """Run axe on the page the driver shows (WCAG A and AA): its violations, each with its
    rule, impact and the nodes it found."""
    driver.set_script_timeout(60)
    if not driver.execute_script("return typeof window.axe !== 'undefined'"):
        # Through the driver, not a <script> of the page: the pages' content policy allows none.
        driver.execute_script(source)
    result = driver.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        axe.run(document, {runOnly: {type: 'tag', values: arguments[0]}})
          .then(r => done(r.violations.map(v => ({
              id: v.id, impact: v.impact, help: v.help,
              nodes: v.nodes.map(n => n.target.join(' '))}))))
          .catch(e => done([{id: 'axe-error', impact: 'critical', help: String(e), nodes: []}]));
        """,
        TAGS,
    )
    return result


@pytest.fixture
def axe(axe_source: str) -> Callable[[webdriver.Chrome], list[dict]]:
    """`axe(driver)`: the serious and critical WCAG A/AA violations of the page shown (the
    test asserts there are none; minor and moderate ones are listed in its message)."""

    def check(driver: webdriver.Chrome) -> list[dict]:
        return [v for v in violations(driver, axe_source) if v["impact"] in BLOCKING]

    return check
