"""One way for a service to write inside a tool call's transaction without a savepoint."""

from collections.abc import Callable
from typing import TypeVar

from django.db import transaction

from core.errors import GaranteError

_T = TypeVar("_T")


def without_savepoint(work: Callable[[], _T]) -> _T:
    """Run `work` in the caller's transaction (or a new one) without a savepoint of its own:
    inside a tool call's transaction one would cost two statements and guard nothing.

    Refusals (GaranteError) are raised after the block, so a caller's transaction stays
    usable; `work` must therefore refuse only before it writes, or after a write that its own
    savepoint undid. Any other exception aborts the transaction as usual.
    """
    with transaction.atomic(savepoint=False):
        try:
            return work()
        except GaranteError as error:
            refusal = error
    raise refusal
