"""Running the machine: its settings, a seeded bounded run, and the transports' machines."""

import os
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.properties.machine import GatewayMachine
from tests.properties.transports import InProcess, OverHttp
from tests.properties.world import World


def machine_settings(examples: int, steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,  # no example database in the tree: the seeds make a run repeatable
        suppress_health_check=list(HealthCheck),
        # GARANTE_PROPS_NO_SHRINK=1: report the first failing sequence as it came (faster).
        phases=[Phase.generate]
        if os.environ.get("GARANTE_PROPS_NO_SHRINK")
        else [Phase.generate, Phase.shrink],
        print_blob=True,
    )


def run_seeded(machine: Callable[[], GatewayMachine], examples: int, steps: int, at: int) -> None:
    """One bounded run of `machine` from seed `at`; a failure says which seed it was
    (Hypothesis adds the shrunk steps and a @reproduce_failure blob)."""
    print(f"\nstateful run: seed={at} examples={examples} steps={steps}", flush=True)

    def factory() -> GatewayMachine:
        return machine()

    try:
        run_state_machine_as_test(seed(at)(factory), settings=machine_settings(examples, steps))
    except BaseException as failure:
        failure.add_note(f"stateful run seed: GARANTE_PROPS_SEED={at}")
        raise


def tokens(world: World) -> dict[str, str]:
    return {key: tenant.token for key, tenant in world.tenants.items()}


class InProcessMachine(GatewayMachine):
    def make_transport(self, world: World) -> Any:
        return InProcess(tokens(world))


def http_machine(url: str, sms_directory: Any) -> type[GatewayMachine]:
    """The machine against the live server at `url`, reading codes from its SMS files."""

    class HttpMachine(GatewayMachine):
        channels = ("sms",)  # the server's email stays in its own process

        def make_transport(self, world: World) -> Any:
            return OverHttp(f"{url}/mcp", tokens(world))

        def code_mark(self, channel: str) -> int:
            return len(list(sms_directory.glob("*.sms")))

        def read_code(
            self, conversation: Any, channel: str, since: int, to: str | None = None
        ) -> str | None:
            from tests.properties.machine import CODE_IN_MESSAGE

            files = sorted(sms_directory.glob("*.sms"), key=lambda p: p.stat().st_mtime_ns)
            codes = []
            for path in files[since:]:
                text = path.read_text(encoding="utf-8")
                found = CODE_IN_MESSAGE.search(text)
                if text.startswith(f"To: {to or conversation.speaker.phone}\n") and found:
                    codes.append(found.group(1))
            return codes[-1] if codes else None

    return HttpMachine
