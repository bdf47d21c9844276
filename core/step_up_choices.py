"""The actions a step-up policy may name: the tools that act for an identified customer, and so
can ask for a one-time code, and those of them whose effect the customer can be asked to
confirm with a code of their own. The tool API, which sits above core, declares them here;
core's admin checks a policy against them."""

from collections.abc import Callable, Iterable

_sources: list[Callable[[], Iterable[str]]] = []


def step_up_choices_from(source: Callable[[], Iterable[str]]) -> None:
    """Take the action names `source` returns, read at each check (tools may register later)."""
    if source not in _sources:
        _sources.append(source)


def step_up_choices() -> set[str]:
    return {name for source in _sources for name in source()}


_confirm_sources: list[Callable[[], Iterable[str]]] = []


def confirm_choices_from(source: Callable[[], Iterable[str]]) -> None:
    """Take the names of the actions a customer may be asked to confirm that `source`
    returns, read at each check."""
    if source not in _confirm_sources:
        _confirm_sources.append(source)


def confirm_choices() -> list[str]:
    return sorted({name for source in _confirm_sources for name in source()})
