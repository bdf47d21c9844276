"""The single path every tool call takes, whatever the surface (MCP or REST).

validate arguments -> (writes) idempotency engine (core.idempotency) -> handler -> output cap ->
error mapping (core.boundary) and its outcome (core.outcome).
"""

import contextlib
import logging
import time
from typing import Any

import pydantic
from django.utils import translation
from django.utils.translation import gettext_lazy as _

from core.boundary import as_garante_error, problem, problems_error, pydantic_problems_error
from core.errors import ValidationFailed
from core.idempotency import check_gateway_key, check_http_key, idempotent_execute
from core.models import Company, Conversation
from core.outcome import Outcome, error_outcome
from tooling.context import CallMeta, ToolContext
from tooling.faults import injected_fault
from tooling.ledger import ledger_record_shown
from tooling.metrics import tool_call_observed
from tooling.output import capped
from tooling.registry import Tool
from tooling.trace import tool_call_record

logger = logging.getLogger("garante.tools")


INVALID_ARGUMENTS_MESSAGE = _("Falta algún dato o alguno no es válido.")


def parse_arguments(tool: Tool, arguments: Any) -> Any:
    """The tool's validated input, or VALIDATION `invalid_arguments` listing each problem
    (core.boundary's shape and cut), so that the model can correct its call (MCP 2025-11-25,
    SEP-1303; REST 422)."""
    nul = _nul_character_at(arguments)
    if nul is not None:
        # PostgreSQL cannot store the character, so a write would fail as if the database
        # were down: the caller's mistake is answered as one instead.
        raise problems_error(
            [nul],
            lambda path: problem(path, "Text must not contain NUL characters."),
            code="invalid_arguments",
            message=INVALID_ARGUMENTS_MESSAGE,
        )
    try:
        return tool.input.model_validate(arguments)
    except pydantic.ValidationError as exc:
        raise pydantic_problems_error(
            exc.errors(include_url=False, include_context=False, include_input=False),
            code="invalid_arguments",
            message=INVALID_ARGUMENTS_MESSAGE,
            root="(arguments)",
            schema=tool.input_schema,
        ) from None


def _nul_character_at(arguments: Any) -> str | None:
    """The dotted path of the first key or text holding a NUL character (U+0000), or None.
    Iterative, so nesting as deep as the JSON parser allows cannot exhaust the stack."""
    pending: list[tuple[tuple[str, ...], Any]] = [((), arguments)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return ".".join(path) or "(arguments)"
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and "\x00" in key:
                    return ".".join((*path, key.replace("\x00", "")))
                pending.append(((*path, str(key)), item))
        elif isinstance(value, list):
            pending.extend(((*path, str(index)), item) for index, item in enumerate(value))
    return None


def company_language(company: Company) -> contextlib.AbstractContextManager:
    """The company's language for what a call writes to its customer: an override of the
    active language, or nothing when it is already that one (the common case, where an
    override and its undoing cost more than the rest of a cheap call's translations)."""
    if translation.get_language() == company.language:
        return contextlib.nullcontext()
    return translation.override(company.language)


def call_tool(
    tool: Tool, *, company: Company, arguments: Any, meta: CallMeta, surface: str
) -> Outcome:
    """Execute one tool call and return its shaped outcome, error included: arguments that
    fail the tool's input schema are a VALIDATION outcome like any other, run nothing and
    store nothing (no idempotency record: the same key may carry the corrected call)."""
    started = time.monotonic()
    with company_language(company):
        try:
            params = parse_arguments(tool, arguments)
        except Exception as failure:  # a validator that normalises (a phone) raises its own
            where = f"validating the arguments of {tool.name}"
            outcome = error_outcome(as_garante_error(failure, logger=logger, where=where))
        else:
            outcome = _run(tool, company=company, params=params, meta=meta, surface=surface)
    elapsed = time.monotonic() - started
    elapsed_ms = elapsed * 1000
    # Its metrics and its log line (GARANTE_LOG_LEVEL=WARNING leaves the line out).
    tool_call_observed(
        tool=tool.name,
        surface=surface,
        company=company,
        conversation_id=meta.conversation_id,
        outcome=outcome,
        seconds=elapsed,
    )
    # After the call's own transaction: the trace never changes or breaks the answer.
    tool_call_record(
        tool=tool,
        company=company,
        meta=meta,
        surface=surface,
        arguments=arguments,
        outcome=outcome,
        latency_ms=elapsed_ms,
    )
    return outcome


def canonical_request(params: pydantic.BaseModel) -> dict[str, Any]:
    """The validated request the idempotency fingerprint covers (seed 2: "la petición canónica
    validada"): coerced values, but an omitted field stays omitted and an explicit null stays."""
    return params.model_dump(mode="json", exclude_unset=True)


def _run(tool: Tool, *, company: Company, params: Any, meta: CallMeta, surface: str) -> Outcome:
    def answer() -> tuple[dict[str, Any], str]:
        """The handler's answer capped, and then what it still shows recorded as seen (for a
        write, with its stored answer: core.sql.send_or_keep). A write may run this again from
        the start (core.durable), so each run has a context of its own: nothing read in a
        rolled-back run (the conversation it inserted) is carried over."""
        ctx = ToolContext(
            company=company,
            meta=meta,
            surface=surface,
            step_up_action=tool.step_up,
            customer_intent=tool.name if tool.customer_intent else None,
            confirmation_action=tool.name if tool.confirmation else None,
            confirmation_code=getattr(params, "confirmation_code", None),
        )
        body, text = capped(handler_run_checked(tool, ctx, params))
        ledger_record_shown(ctx, text)
        return body, text

    try:
        _check_conversation_id(meta.conversation_id)
        with injected_fault(company, meta.fault):
            if not tool.write:
                body, text = answer()
                return Outcome(body=body, is_error=False, status=200, text=text)
            # The one check of the key: the REST mirror's Idempotency-Key header has HTTP's
            # rules (seed 2), MCP's com.asixto/idempotencyKey the Gateway's.
            check_key = check_http_key if surface == "rest" else check_gateway_key
            key = check_key(meta.idempotency_key)

            def effect() -> tuple[dict[str, Any], int]:
                return answer()[0], 200

            result = idempotent_execute(
                company=company,
                key=key,
                operation=tool.name,
                # The conversation is part of the request: its answer is that conversation's
                # customer's. A key sent again from another conversation (a Gateway that
                # failed to scope its keys) is a conflict, never the first customer's answer.
                request={
                    "conversation": meta.conversation_id,
                    "arguments": canonical_request(params),
                },
                effect=effect,
            )
            return Outcome(
                body=result.body,
                is_error=False,
                status=result.status,
                replayed=result.replayed,
                text=result.text,
            )
    except Exception as failure:  # a GaranteError as it is; a database failure, a bug: SYSTEM
        return error_outcome(as_garante_error(failure, logger=logger, where=f"tool {tool.name}"))


def handler_run_checked(tool: Tool, ctx: ToolContext, params: Any) -> dict[str, Any]:
    """The handler's answer, behind what the tool declares, in this order: the identity
    (`identifier` checked, ctx.contact; left to a `confirms_identity` handler while the
    conversation is not identified), then the company's step-up policy for its action.
    A handler that defers the step-up and returns without having asked it is a bug, and
    fails the call (a write is then rolled back) rather than act unverified; so is a tool
    declared `confirmation=True` whose answer did something (not `already_done`) without
    asking ctx.confirm."""
    if tool.identified and not (tool.confirms_identity and ctx.conversation.contact_id is None):
        ctx.identify(params.identifier)
    if tool.step_up is not None and not tool.step_up_deferred:
        ctx.require_step_up()
    answer = tool.handler(ctx, params)
    if tool.step_up_deferred and not ctx.step_up_checked:
        raise RuntimeError(f"tool {tool.name!r} defers its step-up and never asked it")
    if tool.confirmation and not ctx.confirmation_checked and not answer.get("already_done"):
        # It acted without asking the customer's confirmation: never answered as done.
        raise RuntimeError(f"tool {tool.name!r} acted without asking the confirmation")
    return answer


def _check_conversation_id(conversation_id: Any) -> None:
    if not conversation_id or not isinstance(conversation_id, str):
        raise ValidationFailed(
            _("Falta el identificador de la conversación."), code="missing_conversation_id"
        )
    if len(conversation_id) > _CONVERSATION_ID_MAX_LENGTH or "\x00" in conversation_id:
        raise ValidationFailed(
            _("El identificador de la conversación no es válido."),
            code="invalid_conversation_id",
        )


# What the conversation's row can hold: a longer id would fail its insert as a database error.
_CONVERSATION_ID_MAX_LENGTH = Conversation._meta.get_field("external_id").max_length
