"""Writes that must outlive the failing call they are part of: the evidence of a failed call.

A tool call runs inside the idempotency transaction, and every error rolls that transaction
back (only successes are stored). The evidence of a failure — a wrong code tried, an
identifier of somebody else, a failed identification counted towards a rate limit — must not
vanish with it, or a brute force could retry for ever.

The evidence is written first, on the call's own connection, in a transaction of its own.
`keeping_evidence(work)` runs a unit of work in a transaction; when the work reaches
`durably(fn)` for the first time, the work is abandoned (its transaction rolls back, releasing
every lock it took), `fn` runs and commits alone, and the work runs again from the start. On
that run `durably(fn)` answers what `fn` returned without writing again, so the call decides
on evidence already committed: a limit counted under a lock, an attempt taken before a code is
compared. A call therefore never holds one connection while waiting for another (with a
transaction-pooling PgBouncer, calls that did exhausted the pool and waited for a connection
that none of them would free), and PostgreSQL and SQLite (one writer at a time) take the same
path.

Rules for `fn`: a self-contained write that decides afresh from what it reads and refers to
rows already committed (the work that called it is rolled back when it runs). Rules for the
work: everything it does before its last `durably` is done again, so it writes only to the
database (in its transaction) until then.
"""

import functools
import logging
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.db import transaction

from core.transactions import joined

T = TypeVar("T")

logger = logging.getLogger("garante.durable")

# A call records at most a few pieces of evidence (an attempt taken, then the lock of its
# challenge); more rounds than this means the work does not reach the same evidence twice.
_MAX_ROUNDS = 8


class _EvidenceFirst(BaseException):
    """Unwinds the work to its start so that `fn` can commit alone. A BaseException, so that
    no `except Exception` on the way mistakes it for the work's own failure."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(_name(fn))
        self.fn = fn


@dataclass(frozen=True)
class _Raised:
    """What a piece of evidence raised (an error of its own, or of its on_commit hooks): raised
    again, at the same point, on every later run of the work."""

    error: Exception


@dataclass
class _Evidence:
    """The evidence a unit of work has committed, in the order it asked for it."""

    written: list[tuple[str, Any]] = field(default_factory=list)
    position: int = 0

    def recorded(self, fn: Callable[[], Any]) -> tuple[bool, Any]:
        """What `fn` gave when an earlier run of the work reached this point, and whether it
        did (raising what it raised). A different `fn` here means the work took another path
        this time (what it read changed): what was recorded from here on is forgotten."""
        if self.position < len(self.written):
            name, value = self.written[self.position]
            if name == _name(fn):
                self.position += 1
                if isinstance(value, _Raised):
                    raise value.error
                return True, value
            del self.written[self.position :]
        return False, None


_current: ContextVar[_Evidence | None] = ContextVar("garante_evidence", default=None)


def _name(fn: Callable[[], Any]) -> str:
    return getattr(fn, "__qualname__", repr(fn))


def durably(fn: Callable[[], T]) -> T:
    """Run `fn`, a write that must stand whatever the caller's transaction does, and return
    its value.

    In autocommit it commits at once. Inside `keeping_evidence` it is committed before the
    work goes on (see the module's docstring). Elsewhere inside a transaction (a staff action,
    a test calling a service in its own transaction) it is written in that transaction.
    """
    if transaction.get_autocommit():
        with transaction.atomic():
            return fn()
    evidence = _current.get()
    if evidence is None:
        with transaction.atomic():
            return fn()
    found, value = evidence.recorded(fn)
    if found:
        return value
    raise _EvidenceFirst(fn)


def decided_once(fn: Callable[[], T]) -> T:
    """The value of `fn`, a decision the work takes before it writes evidence, as its first
    run took it: the later runs, which see that evidence committed, reuse that decision (a
    limit checked before a failure is recorded must not count the failure itself)."""
    evidence = _current.get()
    if evidence is None:
        return fn()
    found, value = evidence.recorded(fn)
    if found:
        return value
    try:
        value = fn()
    except Exception as error:
        evidence.written.append((_name(fn), _Raised(error)))
        evidence.position += 1
        raise
    evidence.written.append((_name(fn), value))
    evidence.position += 1
    return value


def keeping_evidence(work: Callable[[], T]) -> T:
    """Run `work` in a transaction, committing the evidence it asks for with `durably` before
    it decides on it. Inside another `keeping_evidence` the outer one does this, so nested
    units of work are run once by the outermost, in its transaction (core.transactions.joined:
    a refusal leaves it usable, any other failure marks it for rollback)."""
    if _current.get() is not None:
        with joined():
            return work()
    evidence = _Evidence()
    token = _current.set(evidence)
    try:
        for _ in range(_MAX_ROUNDS):
            evidence.position = 0
            try:
                with transaction.atomic():
                    return work()
            except _EvidenceFirst as first:
                # The work's transaction has rolled back: nothing of it remains, no lock.
                value: Any
                try:
                    with transaction.atomic():
                        value = first.fn()
                except Exception as error:
                    value = _Raised(error)
                evidence.written.append((_name(first.fn), value))
        raise RuntimeError(f"a unit of work asked for new evidence {_MAX_ROUNDS} times")
    finally:
        _current.reset(token)


def keeps_evidence(func: Callable[..., T]) -> Callable[..., T]:
    """`func` run as a unit of work that keeps its evidence (`keeping_evidence`), in place of
    `transaction.atomic` on a service that records some."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        return keeping_evidence(lambda: func(*args, **kwargs))

    return wrapper
