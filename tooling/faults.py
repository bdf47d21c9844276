"""Sandbox-only fault injection, so certification can provoke "dependency down" for real.

`_meta["com.garante/fault"] = "database"` points this call's database connection at a port
where nothing listens: the driver itself fails to connect, and the call takes the same SYSTEM
path a real outage would meet in a process whose caches are cold (core.process_cache is
bypassed, so a cached catalogue cannot hide the outage). Production companies never honour it.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import OperationalError, connection, transaction
from django.utils.translation import gettext_lazy as _

from core.errors import ValidationFailed
from core.models import Company
from core.process_cache import process_caches_bypassed

logger = logging.getLogger("garante.tools")

SUPPORTED_FAULTS = ("database",)


@contextmanager
def injected_fault(company: Company, fault: str | None) -> Iterator[None]:
    if fault is None:
        yield
        return
    if not company.is_sandbox:
        logger.warning("fault injection %r ignored for production company %s", fault, company.pk)
        yield
        return
    if fault not in SUPPORTED_FAULTS:
        raise ValidationFailed(_("Ese fallo simulado no existe."), code="unknown_fault")
    if not transaction.get_autocommit():
        # A connection inside a transaction cannot be swapped; fail every statement instead.
        # Execute wrappers run outside Django's error translation, so raise Django's class
        # around the driver's own error, as a failing cursor would.
        def refuse(execute, sql, params, many, context):
            driver_error = connection.Database.OperationalError("simulated database outage")
            raise OperationalError(str(driver_error)) from driver_error

        with connection.execute_wrapper(refuse), process_caches_bypassed():
            yield
        return
    original = connection.settings_dict
    connection.close()
    unreachable = dict(original)
    if connection.vendor == "sqlite":
        unreachable["NAME"] = "/nonexistent/garante/outage.sqlite3"
    else:
        unreachable["HOST"], unreachable["PORT"] = "127.0.0.1", "9"
    connection.settings_dict = unreachable
    try:
        with process_caches_bypassed():
            yield
    finally:
        connection.close()
        connection.settings_dict = original
