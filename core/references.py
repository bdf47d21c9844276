"""Public references: short codes customers can read aloud, never primary keys, and the one
way a new record gets one (`insert_with_fresh_reference`)."""

import logging
import secrets
from collections.abc import Callable
from typing import TypeVar

from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, connection, transaction
from django.db.models import Model, UniqueConstraint

from core.sql import insert_unless_conflict

logger = logging.getLogger(__name__)

# Crockford-style alphabet without the look-alikes 0/O, 1/I/L and U.
ALPHABET = "23456789ABCDEFGHJKMNPQRSTVWXYZ"
LENGTH = 6
# 30**6 codes per prefix: a draw collides about never; eight in a row would mean a bug.
ATTEMPTS = 8

_M = TypeVar("_M", bound=Model)


def new_reference(prefix: str) -> str:
    """A fresh random reference such as AP-7K2F9Q. Uniqueness is the model's constraint."""
    return f"{prefix}-" + "".join(secrets.choice(ALPHABET) for _ in range(LENGTH))


def normalize_reference(raw: str) -> str:
    """Upper-case and without spaces, as references are stored."""
    return raw.strip().upper().replace(" ", "")


def insert_with_fresh_reference(
    instance: _M, *, prefix: str, insert: Callable[[_M], bool] | None = None
) -> _M:
    """INSERT the new `instance` under a freshly drawn `reference`; on the rare collision with a
    taken one, draw again. The unique index decides, so no read asks first.

    `insert(instance)` writes it once and returns True, or returns False having written
    nothing because the reference is taken (`insert_unless_reference_taken`), or raises
    IntegrityError from a savepoint of its own that undid the write. The default saves it in
    a savepoint. An IntegrityError counts as a collision only when the drawn reference is
    indeed taken (one read, on failure only); any other is raised as it comes.
    """
    insert = insert or _insert_in_savepoint
    for _attempt in range(ATTEMPTS):
        instance.reference = new_reference(prefix)
        try:
            if insert(instance):
                return instance
        except IntegrityError:
            if not reference_taken(instance):
                raise
        logger.warning("%s reference collision; drawing another", instance._meta.label)
    raise IntegrityError(f"no free {instance._meta.label} reference in {ATTEMPTS} draws")


def insert_unless_reference_taken(instance: Model) -> bool:
    """An `insert` for `insert_with_fresh_reference` that needs no savepoint on PostgreSQL: a
    taken reference is an INSERT that writes nothing (ON CONFLICT DO NOTHING on the reference's
    unique constraint), so the caller's transaction stays usable, and any other integrity
    error is raised as it comes. Skips save() and its signals; elsewhere it is save()."""
    if connection.vendor == "postgresql":
        return insert_unless_conflict(instance, unique=reference_unique_fields(type(instance)))
    return _insert_in_savepoint(instance)


def reference_unique_fields(model: type[Model]) -> tuple[str, ...]:
    """The fields of the unique constraint that makes `model.reference` unique: the reference
    alone, or with the company when references are unique per company."""
    if model._meta.get_field("reference").unique:
        return ("reference",)
    for constraint in model._meta.constraints:
        if (
            isinstance(constraint, UniqueConstraint)
            and "reference" in constraint.fields
            and constraint.condition is None
        ):
            return tuple(constraint.fields)
    raise ImproperlyConfigured(f"{model._meta.label}.reference has no unique constraint")


def _insert_in_savepoint(instance: Model) -> bool:
    with transaction.atomic():
        instance.save(force_insert=True)
    return True


def reference_taken(instance: Model) -> bool:
    """Whether a row already holds the instance's reference (within its unique constraint)."""
    model = type(instance)
    fields = [model._meta.get_field(name) for name in reference_unique_fields(model)]
    lookup = {field.attname: getattr(instance, field.attname) for field in fields}
    return model._default_manager.filter(**lookup).exists()
