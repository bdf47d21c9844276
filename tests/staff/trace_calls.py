"""A tool call in process, as the Gateway makes it over MCP, for the tests that read what it
left behind (the conversation trace, the admin's pages of it)."""

from tooling.context import CallMeta
from tooling.execution import call_tool
from tooling.registry import registry


def call(company, name: str, arguments: dict, **meta) -> object:
    meta.setdefault("conversation_id", "conv-trace")
    return call_tool(
        registry.get(name),
        company=company,
        arguments=arguments,
        meta=CallMeta(**meta),
        surface="mcp",
    )
