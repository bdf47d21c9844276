"""The Gateway-facing tool API: registry, toolkit, MCP transport, REST mirror, output cap."""
