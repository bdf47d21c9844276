"""The Gateway-facing tool API: registry, MCP transport, REST mirror, idempotency, output cap."""
