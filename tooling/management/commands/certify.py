"""`manage.py certify --url URL --token TOKEN`: the seed's seven checks against a running server.

Plays the Gateway over real MCP (the official SDK client) against a declared sandbox company,
prints one row per probe (check, what was sent, what came back, PASS/FAIL) and a summary per
check, optionally writes a JSON report, and exits 0 only when every check passes (1 when one
fails, 2 when certification is refused: not a sandbox, unreachable, bad token).
"""

import json
import logging
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.management.commands.seed_sandbox import CONTACTS
from tooling.certification.exchange import CHECKS, Contact, Report
from tooling.certification.run import MODES, Certification

CHECK_WIDTH = 9
PROBE_WIDTH = 52
# Per-request INFO lines of the HTTP and MCP clients would bury the table.
QUIET_LOGGERS = ("httpx", "httpx2", "httpcore", "mcp")


def load_contacts(path: str | None) -> list[Contact]:
    """The two sandbox customers: seed_sandbox's, or the operator's JSON list of objects with
    first_name, last_name, document_number, phone and email."""
    if path is None:
        rows: list[dict[str, Any]] = CONTACTS
    else:
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
    fields = ("first_name", "last_name", "document_number", "phone", "email")
    contacts = [Contact(**{f: str(row.get(f) or "") for f in fields}) for row in rows]
    if len(contacts) < 2 or not all(c.document_number for c in contacts):
        raise CommandError("certification needs two sandbox contacts with a document number")
    return contacts


def render(report: Report) -> str:
    lines = [f"Garante certification of {report.url} (MCP {report.mode})", ""]
    if report.refused is not None:
        lines.append(f"REFUSED: {report.refused}")
        return "\n".join(lines)
    lines.append(
        "Sandbox confirmed: the company honours the sandbox-only fault switch "
        "(a production company ignores it)."
    )
    lines.append("")
    lines.append(f"{'CHECK':<{CHECK_WIDTH}}{'RESULT':<8}{'PROBE':<{PROBE_WIDTH}}SENT  =>  GOT")
    for number, (seed_row, _title) in CHECKS.items():
        for row in (r for r in report.rows if r.check == number):
            verdict = "PASS" if row.passed else "FAIL"
            check = f"{number} ({seed_row})"
            lines.append(
                f"{check:<{CHECK_WIDTH}}{verdict:<8}{row.probe:<{PROBE_WIDTH}}"
                f"{row.sent}  =>  {row.got}"
            )
    lines += ["", "Summary (seed's verification table):"]
    for number, (seed_row, title) in CHECKS.items():
        verdict = "PASS" if report.check_passed(number) else "FAIL"
        lines.append(f"  {number}  [{seed_row:>3}]  {verdict}  {title}")
    probes = sum(1 for r in report.rows if r.passed)
    checks = sum(1 for n in CHECKS if report.check_passed(n))
    lines.append("")
    lines.append(
        f"Result: {'PASS' if report.passed else 'FAIL'} — {checks}/{len(CHECKS)} checks, "
        f"{probes}/{len(report.rows)} probes, {len(report.exchanges)} tool calls"
    )
    return "\n".join(lines)


class Command(BaseCommand):
    help = (
        "Run the certification checks against a running Garante server, as the Gateway "
        "would, on a declared sandbox company."
    )
    requires_system_checks: list[str] = []  # it talks to a remote server, not to this database

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", required=True, help="The MCP endpoint, e.g. http://host/mcp")
        parser.add_argument("--token", required=True, help="The sandbox company's gateway token")
        parser.add_argument("--json", dest="json_path", help="Write the full report here")
        parser.add_argument(
            "--mode",
            choices=MODES,
            default="legacy",
            help="MCP protocol era of the client (default: legacy, initialize handshake)",
        )
        parser.add_argument(
            "--contacts",
            help="JSON file with the two sandbox customers (default: seed_sandbox's)",
        )
        parser.add_argument("--timeout", type=float, default=30, help="Seconds per request")

    def handle(self, *args: object, **options: Any) -> None:
        if options["verbosity"] < 2:
            for name in QUIET_LOGGERS:
                logging.getLogger(name).setLevel(logging.WARNING)
        url = options["url"].rstrip("/")
        if not url.endswith("/mcp"):
            url += "/mcp"
        certification = Certification(
            url,
            options["token"],
            contacts=load_contacts(options["contacts"]),
            mode=options["mode"],
            timeout=options["timeout"],
        )
        report = certification.run()
        self.stdout.write(render(report))
        if options["json_path"]:
            Path(options["json_path"]).write_text(
                json.dumps(report.as_dict(), ensure_ascii=False, indent=2), encoding="utf-8"
            )
        if report.refused is not None:
            raise CommandError(f"certification refused: {report.refused}", returncode=2)
        if not report.passed:
            failed = [str(n) for n in CHECKS if not report.check_passed(n)]
            raise CommandError(f"certification failed: check(s) {', '.join(failed)}")
