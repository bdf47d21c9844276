"""Refuse a company that is not a declared sandbox, before any write (and check 7's first row)."""

from core.errors import ErrorType
from tooling.certification.exchange import Refused
from tooling.certification.scenario import Scenario
from tooling.certification.verdicts import verdict_error


async def preflight(s: Scenario) -> None:
    """`list_services` plainly (it must succeed), then with the sandbox-only fault switch: a
    sandbox answers SYSTEM, a production company ignores the switch and succeeds."""
    probe = s.conversation("preflight")
    plain = await s.gw.call(probe, "list_services", {"limit": 1})
    if plain.is_error or plain.rpc_error:
        raise Refused(f"list_services fails without any fault injected: {plain.got()}")
    faulted = await s.gw.call(probe, "list_services", {"limit": 1}, fault="database")
    if not faulted.is_error and faulted.rpc_error is None:
        raise Refused(
            "this company ignores the sandbox-only fault switch, so it is not a declared "
            "sandbox (environment=production): certification writes are refused"
        )
    if faulted.error_type != ErrorType.SYSTEM:
        raise Refused(f"unexpected answer to the sandbox probe: {faulted.got()}")
    with s.probe(
        7, "dependency down on a read → SYSTEM", "an outage is not 'we have nothing'"
    ) as row:
        s.judge(row, verdict_error(faulted, ErrorType.SYSTEM), faulted)
