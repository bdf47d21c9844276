"""The actions a step-up policy may name: the tools that act for an identified customer, and so
can ask for a one-time code. The tool API, which sits above core, declares them here; core's
admin checks a policy against them."""

from collections.abc import Callable, Iterable

_sources: list[Callable[[], Iterable[str]]] = []


def step_up_choices_from(source: Callable[[], Iterable[str]]) -> None:
    """Take the action names `source` returns, read at each check (tools may register later)."""
    if source not in _sources:
        _sources.append(source)


def step_up_choices() -> set[str]:
    return {name for source in _sources for name in source()}
