"""Django's SQLite backend (the one-command demo), able to keep writes that must outlive a
rollback: the evidence of a failed call (core.durable).

On PostgreSQL that evidence is written on a connection of its own and committed at once.
SQLite allows one writer at a time, so a second connection would wait for the call's own
transaction: the evidence is written in the call's transaction instead, and registered here
with `on_rollback`. Should that transaction roll back, it is rolled back to its start and the
evidence written again before it commits; should a savepoint it was written in roll back, it
is written again in the enclosing transaction. The write lock is held all along, so no other
call sees the counts without it (a wrong code's attempt, a failed identification) in between.
A test case's own transactions are left alone: their rollback is the test's cleanup.
"""

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.db.backends.sqlite3 import base

logger = logging.getLogger("garante.durable")

# Taken right after BEGIN: what a rollback that keeps the evidence goes back to.
_START = '"garante_transaction_start"'


class DatabaseWrapper(base.DatabaseWrapper):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # (savepoint ids, atomic blocks, write) as they stood when each write was made.
        self.run_on_rollback: list[tuple[tuple, tuple, Callable[[], Any]]] = []

    def on_rollback(self, write: Callable[[], Any]) -> None:
        """Do `write` again should the transaction it was just made in roll back."""
        if self.in_atomic_block:
            entry = (tuple(self.savepoint_ids), tuple(self.atomic_blocks), write)
            self.run_on_rollback.append(entry)

    def _start_transaction_under_autocommit(self) -> None:
        super()._start_transaction_under_autocommit()
        self.cursor().execute(f"SAVEPOINT {_START}")

    def savepoint_rollback(self, sid: str) -> None:
        super().savepoint_rollback(sid)
        undone = [entry for entry in self.run_on_rollback if sid in entry[0]]
        if not undone:
            return
        self.run_on_rollback = [entry for entry in self.run_on_rollback if sid not in entry[0]]
        for sids, blocks, write in undone:
            level = sids.index(sid)
            if getattr(blocks[level + 1], "_from_testcase", False):
                continue
            # Inside the enclosing transaction, which may roll back in its turn.
            with transaction.atomic(using=self.alias):
                write()
            self.run_on_rollback.append((sids[:level], blocks[: level + 1], write))

    def commit(self) -> None:
        super().commit()
        self.run_on_rollback = []

    def rollback(self) -> None:
        undone, self.run_on_rollback = self.run_on_rollback, []
        kept = [w for _, blocks, w in undone if not getattr(blocks[0], "_from_testcase", False)]
        if not kept or self.in_atomic_block:
            super().rollback()
            return
        # Atomic's exit of the outermost block: undo the call's work, then write the evidence
        # again and commit that alone. Its own on_commit hooks run once autocommit is back.
        self.run_on_commit = []
        try:
            self.cursor().execute(f"ROLLBACK TO SAVEPOINT {_START}")
            self.in_atomic_block = True  # the writes' atomic blocks nest, their hooks wait
            try:
                for write in kept:
                    write()
            finally:
                self.in_atomic_block = False
            super().commit()
        except Exception:
            # Raised here it would replace the call's own error; logged instead.
            logger.exception("evidence of a failed call lost with its rollback")
            super().rollback()
        self.needs_rollback = False

    def close(self) -> None:
        super().close()
        if not self.in_atomic_block:
            self.run_on_rollback = []
