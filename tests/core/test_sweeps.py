"""core.sweeps: a sweep goes on past one failing row, and stops for what is not one row's."""

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.db import OperationalError, connection
from kombu.exceptions import OperationalError as BrokerUnavailable
from prometheus_client import REGISTRY

from core.sweeps import SweepResult, sweep


def failed_rows(name: str) -> float:
    return (
        REGISTRY.get_sample_value("garante_sweep_rows_total", {"sweep": name, "outcome": "failed"})
        or 0.0
    )


# With the database: the failure path looks at the connection when one is open.
def test_a_failing_row_is_logged_and_counted_and_the_others_go_on(caplog, db):
    handled = []

    def handle(row: int) -> bool:
        if row == 2:
            raise ValueError("bad data")
        handled.append(row)
        return row != 3  # 3 is no longer due

    before = failed_rows("test.rows")
    result = sweep("test.rows", [1, 2, 3, 4], handle)

    assert result == SweepResult(done=2, skipped=1, failed=1)
    assert handled == [1, 3, 4]
    assert failed_rows("test.rows") == before + 1
    (record,) = [r for r in caplog.records if r.name == "garante.sweeps" and r.exc_info]
    assert record.getMessage() == "sweep test.rows: row 2 failed; it stays due for the next run"
    assert "ValueError: bad data" in caplog.text


@pytest.mark.parametrize(
    "stop", [SoftTimeLimitExceeded(), BrokerUnavailable("Error 111 connecting")], ids=repr
)
def test_the_time_limit_and_a_broker_outage_stop_the_sweep(stop):
    handled = []

    def handle(row: int) -> bool:
        if row == 2:
            raise stop
        handled.append(row)
        return True

    with pytest.raises(type(stop)):
        sweep("test.stops", [1, 2, 3], handle)
    assert handled == [1]


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_a_database_that_stopped_answering_stops_the_sweep():
    handled = []

    def handle(row: int) -> bool:
        with connection.cursor() as cursor:
            if row == 2:  # the server ends this connection, as a failover or a restart would
                cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            cursor.execute("SELECT 1")
        handled.append(row)
        return True

    with pytest.raises(OperationalError):
        sweep("test.outage", [1, 2, 3], handle)
    assert handled == [1]
    connection.close()
