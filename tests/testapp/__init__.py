"""A test-only Django app: small models and write tools that exercise the idempotency engine."""
