"""The `identifier` argument is declared once, by the toolkit: every tool that takes one
publishes the same schema and reads the same texts, and a tool declaring its own bound is
refused at registration."""

import pytest
from pydantic import Field, ValidationError

from tooling.registry import (
    IDENTIFIER_MAX_LENGTH,
    IDENTIFIER_MIN_LENGTH,
    Tool,
    ToolInput,
    ToolOutput,
    registry,
)
from tooling.toolkit import Identifier

LONGEST_EMAIL = f"{'a' * 64}@{'b' * 63}.{'c' * 63}.{'d' * 58}.es"


def tools_taking_an_identifier() -> list[Tool]:
    return [t for t in registry.all() if "identifier" in t.input.model_fields]


def identifier_problems(tool: Tool, value: str) -> list[dict]:
    """The problems validation finds with `value` as the tool's identifier (the other
    arguments left out: their problems are not looked at)."""
    try:
        tool.input.model_validate({"identifier": value})
    except ValidationError as error:
        return [e for e in error.errors() if e["loc"] == ("identifier",)]
    return []


def test_every_identified_tool_publishes_one_identifier():
    tools = tools_taking_an_identifier()
    # agenda, sales, support and the identity tools all take one.
    assert {"book_appointment", "accept_quote", "add_case_comment", "verify_code"} <= {
        t.name for t in tools
    }
    schemas = {t.name: t.input_schema["properties"]["identifier"] for t in tools}
    first = schemas[tools[0].name]
    assert (first["minLength"], first["maxLength"]) == (IDENTIFIER_MIN_LENGTH, 254)
    assert {name: schema for name, schema in schemas.items() if schema != first} == {}
    assert all(t.identified for t in tools)


@pytest.mark.django_db
def test_every_real_identifier_fits_and_nothing_longer(ana):
    assert len(LONGEST_EMAIL) == IDENTIFIER_MAX_LENGTH
    real = [ana.document_number, ana.phone, "600 111 222", ana.email, LONGEST_EMAIL]
    for tool in tools_taking_an_identifier():
        for value in real:
            assert identifier_problems(tool, value) == [], (tool.name, value)
        assert identifier_problems(tool, LONGEST_EMAIL + "x"), tool.name
        assert identifier_problems(tool, "   "), tool.name


class _OwnBoundIn(ToolInput):
    identifier: str = Field(min_length=3, max_length=120)


class _ToolkitIn(ToolInput):
    identifier: Identifier


def _declared(input_model: type[ToolInput]) -> Tool:
    return Tool(
        name="own_identifier",
        title="t",
        description="d",
        input=input_model,
        output=ToolOutput,
        handler=lambda ctx, params: {},
        identified=True,
    )


def test_a_tool_declaring_its_own_identifier_bound_is_refused():
    with pytest.raises(ValueError, match="toolkit's Identifier"):
        _declared(_OwnBoundIn).check_declaration()
    _declared(_ToolkitIn).check_declaration()
