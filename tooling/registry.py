"""The tool registry: each tool is declared once, in its app's tools.py, and served everywhere.

The MCP endpoint and the REST mirror both read this registry; neither knows any domain app.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from tooling.context import ToolContext

TOOL_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


class ToolInput(BaseModel):
    """Base of every tool's input schema: unknown arguments are an error, not ignored."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


Handler = Callable[["ToolContext", Any], dict[str, Any]]


@dataclass(frozen=True, eq=False)
class Tool:
    name: str
    title: str
    description: str
    input: type[ToolInput]
    handler: Handler
    write: bool = False
    destructive: bool = False
    idempotent: bool | None = None
    # One of the tools through which a customer gets verified (a code asked for, a code
    # checked): no step-up policy can ask a code for them.
    verification: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def takes_step_up(self) -> bool:
        """Whether a company's step-up policy may list this tool: it acts for an identified
        customer (an `identifier` argument) and is not a verification tool. Each such tool
        asks for the verification itself (`core.identity.require_step_up`), after checking
        the identifier (tests/tooling/test_step_up_tools.py holds every one of them to it)."""
        return "identifier" in self.input.model_fields and not self.verification

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        schema = self.input.model_json_schema()
        schema.pop("title", None)
        schema.setdefault("properties", {})
        return schema

    @property
    def annotations(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "readOnlyHint": not self.write,
            "destructiveHint": self.destructive,
            # Writes are safe to repeat only with the same idempotency key, which generic
            # clients do not know about; so say what a bare repeat would do.
            "idempotentHint": (not self.write) if self.idempotent is None else self.idempotent,
            "openWorldHint": False,
        }


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(self, tool: Tool) -> Tool:
        if not tool.name or len(tool.name) > 128 or set(tool.name) - TOOL_NAME_CHARS:
            raise ValueError(f"invalid tool name {tool.name!r}")
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool
        return tool

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def all(self) -> list[Tool]:
        """Every tool, in a fixed order (by name) so listings are stable."""
        return [self._tools[name] for name in sorted(self._tools)]


registry = ToolRegistry()


def tool(
    *,
    name: str,
    title: str,
    description: str,
    input: type[ToolInput],
    write: bool = False,
    destructive: bool = False,
    idempotent: bool | None = None,
    verification: bool = False,
) -> Callable[[Handler], Handler]:
    """Register the decorated function as a tool handler: `handler(ctx, params) -> dict`."""

    def decorator(handler: Handler) -> Handler:
        registry.register(
            Tool(
                name=name,
                title=title,
                description=description,
                input=input,
                handler=handler,
                write=write,
                destructive=destructive,
                idempotent=idempotent,
                verification=verification,
            )
        )
        return handler

    return decorator
