"""Test-only tools, autodiscovered like any app's: writes with guards, a slow write, failures."""

from typing import Literal

from django.db import connection
from pydantic import Field, field_validator

from core.errors import ValidationFailed
from core.references import normalize_reference
from tests.testapp import services
from tests.testapp.models import Counter
from tooling.toolkit import ToolContext, ToolInput, ToolOutput, tool


class ReservationOut(ToolOutput):
    reference: str
    state: str


class CounterOut(ToolOutput):
    counter: str
    value: int
    by: int | None = None
    note: str | None = None


class CancelReservationIn(ToolInput):
    reference: str = Field(min_length=1, max_length=16)

    @field_validator("reference")
    @classmethod
    def of_a_reservation(cls, value: str) -> str:
        # Validators may raise core errors (as normalisers of phones and documents do).
        value = normalize_reference(value)
        if not value.startswith("RS-"):
            raise ValidationFailed(
                "Esa referencia no es de una reserva.", code="not_a_reservation_reference"
            )
        return value


@tool(
    name="testapp_cancel_reservation",
    title="Cancel a reservation (test)",
    description="Cancels a reservation of the conversation's owner. Test-only.",
    input=CancelReservationIn,
    output=ReservationOut,
    write=True,
    destructive=True,
)
def cancel_reservation(ctx: ToolContext, params: CancelReservationIn) -> dict:
    # The owner is who speaks (the conversation), not an argument: a different conversation
    # retrying the same key sends identical arguments.
    reservation = services.reservation_cancel(
        company=ctx.company, reference=params.reference, requested_by=ctx.meta.conversation_id
    )
    return {"reference": reservation.reference, "state": reservation.state}


class IncrementIn(ToolInput):
    name: str = Field(min_length=1, max_length=64)
    by: int = Field(default=1, ge=1, le=1000)
    hold_ms: int = Field(default=0, ge=0, le=10_000, description="Keep the effect open (ms).")
    note: str | None = None
    tags: list[str] = Field(default_factory=list)


@tool(
    name="testapp_increment_counter",
    title="Increment a counter (test)",
    description="Adds to a named counter and answers its new value. Test-only.",
    input=IncrementIn,
    output=CounterOut,
    write=True,
)
def increment_counter(ctx: ToolContext, params: IncrementIn) -> dict:
    counter = services.counter_increment(
        company=ctx.company, name=params.name, by=params.by, hold_ms=params.hold_ms
    )
    # Keys deliberately not in jsonb's order (by length), so a replay that went through jsonb
    # would come back as different text.
    answer = {"counter": counter.name, "value": counter.value, "by": params.by}
    if params.note is not None:
        answer["note"] = params.note
    return answer


class ReadCounterIn(ToolInput):
    name: str = Field(min_length=1, max_length=64)


@tool(
    name="testapp_read_counter",
    title="Read a counter (test)",
    description="Answers a counter's value. Test-only.",
    input=ReadCounterIn,
    output=CounterOut,
)
def read_counter(ctx: ToolContext, params: ReadCounterIn) -> dict:
    counter = Counter.objects.filter(company=ctx.company, name=params.name).first()
    return {"counter": params.name, "value": counter.value if counter else 0}


class FailAfterWriteIn(ToolInput):
    name: str = Field(min_length=1, max_length=64)
    failure: Literal["business", "database", "unexpected", "commit"]


@tool(
    name="testapp_fail_after_write",
    title="Write, then fail (test)",
    description="Increments a counter, then fails the chosen way. Test-only.",
    input=FailAfterWriteIn,
    output=CounterOut,
    write=True,
)
def fail_after_write(ctx: ToolContext, params: FailAfterWriteIn) -> dict:
    services.counter_increment(company=ctx.company, name=params.name)
    if params.failure == "business":
        raise ValidationFailed("Ese contador no admite más.", code="counter_full")
    if params.failure == "database":
        with connection.cursor() as cursor:  # a real driver error, mid-transaction
            cursor.execute("SELECT * FROM testapp_table_that_does_not_exist")
    if params.failure == "commit":
        # A row whose (deferred) foreign key is checked only at COMMIT: the handler answers,
        # the answer is stored, and the database refuses the transaction as it commits.
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO testapp_counter (company_id, name, value) VALUES (%s, %s, 0)",
                [2_000_000_000, params.name],
            )
        return {"counter": params.name, "value": 0}
    raise RuntimeError("a bug after the write")
