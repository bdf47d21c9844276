"""The idempotency engine, a layer below both APIs: the tool API (MCP and its REST mirror) and
the integration API run every write through `idempotent_execute`, after checking the caller's
key with `check_gateway_key` (MCP's `_meta`) or `check_http_key` (the `Idempotency-Key` header).
Above the key, the domain services run a write tool's effect once per *intent* with
`once_per_intent` (core.idempotency.intent): a re-planned call with a new key answers what the
first one made.

This is the package's front door: the APIs import these names from `core.idempotency`, never
its modules (tests/test_architecture.py). The records are core.models.IdempotencyRecord; their
purge runs on beat's schedule (core.idempotency.tasks) and staff read them in the admin
(core.idempotency.admin).
"""

from core.idempotency.engine import (
    HTTP_KEY_PATTERN,
    IdempotentResult,
    check_gateway_key,
    check_http_key,
    effect_may_have_happened,
    idempotent_execute,
)
from core.idempotency.intent import (
    INTENT_BOUND,
    Done,
    Intent,
    intent_lock,
    intent_lock_columns,
    intent_since,
    intent_text,
    intent_wait,
    intent_wait_bound,
    lock_base,
    once_per_intent,
)

__all__ = [
    "HTTP_KEY_PATTERN",
    "INTENT_BOUND",
    "Done",
    "IdempotentResult",
    "Intent",
    "check_gateway_key",
    "check_http_key",
    "effect_may_have_happened",
    "idempotent_execute",
    "intent_lock",
    "intent_lock_columns",
    "intent_since",
    "intent_text",
    "intent_wait",
    "intent_wait_bound",
    "lock_base",
    "once_per_intent",
]
