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


def http_machine(url: str) -> type[GatewayMachine]:
    """The machine against the live server at `url` (codes are read from the sandboxes'
    outboxes in the database, as in process)."""

    class HttpMachine(GatewayMachine):
        def make_transport(self, world: World) -> Any:
            return OverHttp(f"{url}/mcp", tokens(world))

    return HttpMachine
