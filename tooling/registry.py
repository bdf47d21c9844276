"""The tool registry: each tool is declared once, in its app's tools.py, and served everywhere.

The MCP endpoint and the REST mirror both read this registry; neither knows any domain app.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from core.errors import ErrorType

TOOL_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _text_rules(schema: dict[str, Any]) -> None:
    """What the server checks of text arguments, written as each string's pattern: no NUL
    character (PostgreSQL cannot store one, so it is refused up front), and, since text is
    read with surrounding whitespace stripped, a minimum length counting what remains (JSON
    Schema's minLength counts every character): "   " and " · " are refused by the document
    as by us. Anchored and without lookaheads, which schema-driven generators handle."""
    for node in schema.get("properties", {}).values():
        options = [node, *node.get("anyOf", [])]
        options += [o["items"] for o in options if isinstance(o.get("items"), dict)]
        for option in options:
            if option.get("type") == "string" and "pattern" not in option:
                option["pattern"] = _text_pattern(option.get("minLength", 0))


def _text_pattern(least: int) -> str:
    text, edge = r"[^\u0000]", r"[^\s\u0000]"
    if least == 0:
        return rf"^{text}*$"
    middle = "" if least == 1 else rf"{text}{{{least - 2},}}{edge}"
    return rf"^{text}*{edge}{middle}{text}*$"


class ToolInput(BaseModel):
    """Base of every tool's input schema (and of the objects inside one): unknown arguments
    are an error, not ignored, and text is read without its surrounding whitespace."""

    model_config = ConfigDict(
        extra="forbid",
        str_strip_whitespace=True,
        json_schema_extra=lambda schema, model: model.schema_rules(schema),
    )

    @classmethod
    def schema_rules(cls, schema: dict[str, Any]) -> None:
        """Write into the JSON schema the rules the model checks beyond its fields' types
        (extend it, calling super, for a rule across fields)."""
        _text_rules(schema)


# The `identifier` argument of every identified tool, declared here once: the customer's
# document number, phone or email, read by core.identity as the identification read it. Up to
# 254 characters, the longest identifier a contact can have: an email (the EmailField's 254,
# RFC 5321's longest path); a document number is stored in 32 at most, a phone in E.164's 16.
# At least one: a shorter text than any real identifier (none has under 4) is answered by the
# identification itself, VALIDATION `invalid_identifier`, which tells the customer what to give.
IDENTIFIER_MIN_LENGTH = 1
IDENTIFIER_MAX_LENGTH = 254
Identifier = Annotated[
    str,
    Field(
        min_length=IDENTIFIER_MIN_LENGTH,
        max_length=IDENTIFIER_MAX_LENGTH,
        description="The customer's document number, phone or email: the same one used with "
        "identify_contact.",
    ),
]

# The code with which the customer confirms an action their company has them confirm
# (`@tool(confirmation=True)`, core.verification.confirmation): only the one sent to them for
# this very action and target, in this conversation, does it.
ConfirmationCode = Annotated[
    str | None,
    Field(
        default=None,
        min_length=1,
        max_length=20,
        description="Only after this tool answered confirmation_required: the code the "
        "customer received for this action, as they read it (six digits). Never invent one.",
        json_schema_extra={"pattern": r"^\s*(\d\s*){6}$"},
    ),
]

# What a tool declared `confirmation=True` tells the model, at the end of its description.
CONFIRMATION_HELP = (
    "The company may have the customer confirm it: then the answer is the error "
    "confirmation_required and a code (sent_as code), a link (link) or both were sent to the "
    "customer's own phone or email; ask the customer for the code and call again with the "
    "same arguments plus confirmation_code, or, for a link, once the customer says they "
    "tapped it, call again with the same arguments and no code."
)


class ToolOutput(BaseModel):
    """Base of every tool's success shape, which `tools/list` publishes as its outputSchema.
    Handlers still build plain dicts (the output cap measures their JSON); the shape is the
    contract clients validate `structuredContent` against, and the tests hold every tool's
    results to it (tests/tooling/test_tool_contracts.py)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ProblemOut(BaseModel):
    field: str = Field(description="The argument's dotted path, e.g. items.0.quantity.")
    message: str = Field(description="What is wrong with it and what is accepted.")


class ToolErrorOut(BaseModel):
    """Every error answer of a tool (the same body MCP puts in an isError result)."""

    model_config = ConfigDict(extra="allow")

    error_type: ErrorType
    user_message: str = Field(description="For the end customer, in the company's language.")
    code: str = Field(description="Stable machine code to branch on.")
    problems: list[ProblemOut] | None = Field(
        default=None, description="invalid_arguments: each argument that is wrong."
    )
    problems_omitted: int | None = Field(
        default=None, description="invalid_arguments: problems left out to keep it short."
    )


def _is_toolkit_identifier(input_schema: dict[str, Any]) -> bool:
    declared = input_schema["properties"]["identifier"]
    return (
        declared.get("type") == "string"
        and declared.get("minLength") == IDENTIFIER_MIN_LENGTH
        and declared.get("maxLength") == IDENTIFIER_MAX_LENGTH
    )


# handler(ctx, params): a tooling.context.ToolContext (which sits above this module) and the
# validated input.
Handler = Callable[[Any, Any], dict[str, Any]]


@dataclass(frozen=True, eq=False)
class Tool:
    name: str
    title: str
    description: str
    input: type[ToolInput]
    output: type[ToolOutput]
    handler: Handler
    write: bool = False
    destructive: bool = False
    idempotent: bool | None = None
    # One of the tools through which a customer gets verified (a code asked for, a code
    # checked): no step-up policy can ask a code for them.
    verification: bool = False
    # It acts for the identified customer: its `identifier` argument is checked against the
    # conversation's identified contact before the handler runs, which reads it as ctx.contact.
    identified: bool = False
    # verify_code: in a conversation not identified yet, `identifier` is the one its pending
    # identification in verified mode was typed with, and the handler checks it (and binds the
    # conversation with the right code); the platform checks it once identified.
    confirms_identity: bool = False
    # The step-up action a company's policy may list for it (None: none), checked after the
    # identity and before the handler, unless `step_up_deferred`: then the handler asks it
    # (ctx.require_step_up) where its own order needs, and a call that never did fails.
    step_up: str | None = None
    step_up_deferred: bool = False
    # A write whose intent is its customer alone (core.idempotency.intent; its operation is
    # the tool's name): the call's read of the conversation takes that intent's lock for the
    # customer it names, so the handler's service need not send a statement for it
    # (ctx.customer_intent_held).
    customer_intent: bool = False
    # A company's policy may have the customer confirm each effect of this tool with a code of
    # their own (core.verification.confirmation): its input takes `confirmation_code`, and its
    # handler asks `ctx.confirm(...)` before the effect; an answer that did something without
    # asking fails the call (tooling.execution).
    confirmation: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def takes_step_up(self) -> bool:
        """Whether a company's step-up policy may list this tool: it declares a step-up
        action, which the platform enforces (tooling.execution). Every tool acting for an identified
        customer, verification tools aside, declares one (tests/tooling/test_step_up_tools.py)."""
        return self.step_up is not None

    def check_declaration(self) -> None:
        """ValueError for a declaration the platform could not enforce as written."""
        takes_identifier = "identifier" in self.input.model_fields
        if self.identified != takes_identifier:
            # An identifier the platform does not check would be checked by hand, or not at all.
            raise ValueError(
                f"tool {self.name!r}: identified=True goes with an `identifier` argument"
            )
        if takes_identifier and not _is_toolkit_identifier(self.input_schema):
            # One rule for what an identifier may be, whichever tool it is given to.
            raise ValueError(f"tool {self.name!r}: `identifier` is the toolkit's Identifier")
        if self.step_up is not None and (not self.identified or self.verification):
            raise ValueError(
                f"tool {self.name!r}: step-up is for identified, non-verification tools"
            )
        if self.step_up_deferred and self.step_up is None:
            raise ValueError(f"tool {self.name!r}: step_up_deferred without a step_up action")
        takes_code = "confirmation_code" in self.input.model_fields
        if self.confirmation and not (self.identified and self.write and takes_code):
            raise ValueError(
                f"tool {self.name!r}: confirmation is for identified writes taking the "
                "toolkit's ConfirmationCode as `confirmation_code`"
            )
        if self.confirms_identity and not (self.identified and self.verification):
            raise ValueError(
                f"tool {self.name!r}: confirms_identity is for identified verification tools"
            )
        if self.customer_intent and not (self.write and self.identified):
            # Its lock is held by the write's transaction, for the identified customer.
            raise ValueError(f"tool {self.name!r}: customer_intent is for identified writes")

    @cached_property
    def input_schema(self) -> dict[str, Any]:
        schema = self.input.model_json_schema()
        schema.pop("title", None)
        schema.setdefault("properties", {})
        return schema

    @cached_property
    def output_schema(self) -> dict[str, Any]:
        """The JSON schema of the tool's success answer."""
        schema = self.output.model_json_schema(mode="serialization")
        schema.pop("title", None)
        return schema

    @cached_property
    def listed_output_schema(self) -> dict[str, Any]:
        """The outputSchema tools/list publishes: the success answer, or an error body.

        The spec has clients check structuredContent against it only on success, but the
        TypeScript SDK's client (and the MCP Inspector on it) checks error results too and
        turns every business error into a client-side exception the model never reads; so
        the error body is one of the shapes, and the success shape stays exact."""
        success = dict(self.output_schema)
        error = ToolErrorOut.model_json_schema(mode="serialization")
        definitions = {**success.pop("$defs", {}), **error.pop("$defs", {})}
        error.pop("title", None)
        schema: dict[str, Any] = {"type": "object", "anyOf": [success, error]}
        if definitions:
            schema["$defs"] = definitions
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
        tool.check_declaration()
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

    def step_up_actions(self) -> set[str]:
        """The actions a company's step-up policy may list: those the tools declare."""
        return {tool.step_up for tool in self._tools.values() if tool.step_up is not None}

    def confirm_actions(self) -> set[str]:
        """The actions a company's policy may have its customer confirm: the tools declared
        with `confirmation=True`."""
        return {tool.name for tool in self._tools.values() if tool.confirmation}


registry = ToolRegistry()


def tool(
    *,
    name: str,
    title: str,
    description: str,
    input: type[ToolInput],
    output: type[ToolOutput],
    write: bool = False,
    destructive: bool = False,
    idempotent: bool | None = None,
    verification: bool = False,
    identified: bool = False,
    step_up: bool | str = False,
    step_up_deferred: bool = False,
    confirms_identity: bool = False,
    customer_intent: bool = False,
    confirmation: bool = False,
) -> Callable[[Handler], Handler]:
    """Register the decorated function as a tool handler: `handler(ctx, params) -> dict`.

    `identified=True`: the tool acts for the identified customer named by its `identifier`
    argument; the platform checks it and the handler reads `ctx.contact`. `step_up`: the
    action a company's step-up policy may list (True: the tool's name), checked by the
    platform after the identity; with `step_up_deferred=True` the handler calls
    `ctx.require_step_up()` itself, for a tool whose checks must come first.
    `confirms_identity=True` (verify_code): in a conversation not identified yet, the platform
    leaves `identifier` to the handler, which confirms a pending identification with it.
    `customer_intent=True`: a write whose intent (core.idempotency.intent) is its customer
    alone, under the tool's name; the platform takes the intent's lock as it reads the
    conversation, and the handler tells its service so (`ctx.customer_intent_held`).
    `confirmation=True`: a company may have its customer confirm each effect with a code of
    their own; the input takes `confirmation_code: ConfirmationCode` and the handler calls
    `ctx.confirm(...)` after its guards and before the effect (a service's `authorize`)."""

    def decorator(handler: Handler) -> Handler:
        registry.register(
            Tool(
                name=name,
                title=title,
                description=description,
                input=input,
                output=output,
                handler=handler,
                write=write,
                destructive=destructive,
                idempotent=idempotent,
                verification=verification,
                identified=identified,
                confirms_identity=confirms_identity,
                step_up=name if step_up is True else step_up or None,
                step_up_deferred=step_up_deferred,
                customer_intent=customer_intent,
                confirmation=confirmation,
            )
        )
        return handler

    return decorator
