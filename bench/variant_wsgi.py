"""Garante's WSGI application with the code-level mechanisms named in GARANTE_BENCH_OFF replaced
by what plain Django and mcp_types do (bench/variants.py), for the A/B rows of bench/load.py."""

import os

_OFF = set(os.environ.get("GARANTE_BENCH_OFF", "").split(","))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.variant_settings")

if "metrics" in _OFF:
    # Every series a no-op, before anything binds their children (core.request_log's
    # middleware binds its timers when the application is built, below).
    from core import metrics

    class _Uncounted:
        def labels(self, *values):
            return self

        def inc(self, amount=1):
            pass

        def observe(self, amount):
            pass

    for _name, _value in list(vars(metrics).items()):
        if type(_value).__module__ == "prometheus_client.metrics":  # a series or a child
            setattr(metrics, _name, _Uncounted())

from config.wsgi import application  # noqa: E402

if "answer_deadline" in _OFF:
    from core.postgresql.base import bound_this_process

    bound_this_process(None)

if "hand_built_sql" in _OFF:
    # The hottest reads as the ORM writes them: a queryset compiled on every call.
    import dataclasses

    from core.idempotency import engine
    from core.identity import binding
    from core.identity.identifiers import CONTACT_FIELD
    from core.models import Contact, Conversation, IdempotencyRecord
    from tooling import context

    _record_fields = [field.name for field in dataclasses.fields(engine._StoredRecord)]

    def _lookup(company, key):
        row = (
            IdempotencyRecord.objects.filter(company=company, key=key)
            .values_list(*_record_fields)
            .first()
        )
        return None if row is None else engine._StoredRecord(*row)

    def _conversation_read(company, external_id):
        return (
            Conversation.objects.select_related("contact")
            .filter(company=company, external_id=external_id)
            .first()
        )

    def _contact_with(*, company_id, identifier):
        lookup = {CONTACT_FIELD[identifier.kind]: identifier.value}
        return Contact.objects.filter(company_id=company_id, **lookup).first()

    engine._lookup = _lookup
    context._conversation_read = _conversation_read
    binding._contact_with = _contact_with

if "slot_search_sql" in _OFF:
    # The slot search's roster and busy times as querysets (the same rows, compiled per call).
    from agenda.availability import busy, search
    from agenda.models import MAX_BLOCKED_SPAN, AgendaSettings, Appointment, Professional, TimeOff

    _settings = [
        f"company__agenda_settings__{f.name}" for f in AgendaSettings._meta.concrete_fields
    ]
    _hours = ["working_hours__weekday", "working_hours__start_time", "working_hours__end_time"]

    def roster_rows(company, service, professional):
        professionals = Professional.objects.filter(company=company, active=True, services=service)
        if professional is not None:
            professionals = professionals.filter(pk=professional.pk)
        ordered = professionals.order_by("display_name", "id")
        return list(ordered.values_list("id", "display_name", *_hours, *_settings))

    def busy_rows(professional_ids, start, end, *, exclude_appointment_id=None):
        appointments = Appointment.objects.filter(
            professional_id__in=professional_ids,
            state=Appointment.State.SCHEDULED,
            blocked_from__gte=start - MAX_BLOCKED_SPAN,
            blocked_from__lt=end,
            blocked_until__gt=start,
        )
        if exclude_appointment_id is not None:
            appointments = appointments.exclude(pk=exclude_appointment_id)
        time_off = TimeOff.objects.filter(
            professional_id__in=professional_ids, ends_at__gt=start, starts_at__lt=end
        )
        rows = appointments.values_list("professional_id", "blocked_from", "blocked_until")
        return list(
            rows.union(time_off.values_list("professional_id", "starts_at", "ends_at"), all=True)
        )

    search.roster_rows = roster_rows
    busy.busy_rows = busy_rows

if "insert_unless_conflict" in _OFF:
    # A new row's INSERT as the ORM guards one: in a savepoint, a conflict an IntegrityError.
    from django.db import IntegrityError, transaction

    from agenda import services as agenda_services
    from core import references
    from tooling import context

    def insert_unless_conflict(instance, *, unique=None):
        try:
            with transaction.atomic():
                instance.save(force_insert=True)
        except IntegrityError:
            return False
        return True

    references.insert_unless_conflict = insert_unless_conflict
    context.insert_unless_conflict = insert_unless_conflict
    agenda_services.insert_unless_conflict = insert_unless_conflict

if "ledger_upsert" in _OFF:
    # The exposure ledger's rows as the ORM upserts them: every row written again each time.
    from django.utils import timezone

    from tooling import ledger
    from tooling.models import ExposedReference

    def _upsert(ctx, kind, rows):
        now = timezone.now()
        shown = [
            ExposedReference(
                company=ctx.company,
                conversation=ctx.conversation,
                kind=kind,
                created_at=now,
                last_seen_at=now,
                reference=reference,
                label=label,
                label_key=label_key,
                data=data,
            )
            for reference, label, label_key, data in rows
        ]
        ExposedReference.objects.bulk_create(
            shown,
            update_conflicts=True,
            unique_fields=list(ledger._UPSERT_KEY),
            update_fields=list(ledger._UPSERT_UPDATES),
        )

    ledger._upsert = _upsert

if "limits_sql" in _OFF:
    # The failure limits' one statement as the ORM writes it: a union of three querysets.
    from django.db.models import IntegerField, Value

    from core.identity import limits
    from core.models import SecurityEvent

    def _recent_failures(attempt, window_limits, now, *, beside=None):
        conversation = attempt.conversation
        if beside is not None:  # the row beside, in a statement of its own
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute(beside.sql, beside.params)
                beside.row = cursor.fetchone()
            beside.read = True
        failures = SecurityEvent.objects.filter(kind__in=limits._IDENTIFICATION_FAILURES)

        def branch(scope, **where):
            limit = window_limits[scope]
            return (
                failures.filter(created_at__gt=now - limit.window, **where)
                .annotate(scope=Value(scope, output_field=IntegerField()))
                .order_by("-created_at")
                .values_list("scope", "created_at")[: limit.failures]
            )

        branches = [
            branch(
                limits._CONVERSATION,
                company_id=conversation.company_id,
                conversation_key=conversation.external_id,
            )
        ]
        if attempt.credential_id is not None:
            branches.append(branch(limits._CREDENTIAL, credential_id=attempt.credential_id))
        if attempt.digests:
            branches.append(
                branch(
                    limits._IDENTIFIER,
                    company_id=conversation.company_id,
                    identifier_digest__in=attempt.digests,
                )
            )
        rows = branches[0].union(*branches[1:], all=True) if len(branches) > 1 else branches[0]
        found = {limits._CONVERSATION: [], limits._CREDENTIAL: [], limits._IDENTIFIER: []}
        for scope, created_at in rows:
            found[scope].append(created_at)
        for times in found.values():
            times.sort(reverse=True)
        return found

    limits._recent_failures = _recent_failures

__all__ = ["application"]

if "writes_with_answer" in _OFF:
    # A write's ledger rows and its stored answer as two statements, as the ORM sends them.
    from django.db import connection

    from core.idempotency import engine

    def execute_all(statements):
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement.sql, statement.params)

    engine.execute_all = execute_all

if "health_check_poll" in _OFF:
    # Django's own health check of a kept connection: a SELECT 1 before each request's first query.
    from django.db.backends.postgresql import base as django_postgresql

    from core.postgresql import base as garante_postgresql

    garante_postgresql.DatabaseWrapper.is_usable = django_postgresql.DatabaseWrapper.is_usable
