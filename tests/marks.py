"""Marks shared by test modules."""

import pytest

# A guarantee the SQLite demo does not give: it has one writer at a time, so core.durable
# writes the evidence of a failed call (security events, failed identifications, wrong codes)
# in the call's own transaction, and the rollback that answers the failure takes it along.
needs_durable_writes = pytest.mark.postgres(
    reason="needs PostgreSQL: on SQLite the evidence of a failed call is rolled back with it "
    "(core/durable.py)"
)
