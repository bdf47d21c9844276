"""One amount rule (sales.money: AMOUNT_TEXT, the money columns' digits) serves the tools and
the integration API: both publish the same pattern, and both take and refuse the same texts
at its edges."""

from decimal import Decimal

import pytest
from django.test import Client
from pydantic import ValidationError

from integration.serializers.sales import OpportunityIn, QuoteAcceptIn, QuoteIn
from sales import money
from sales.models import Quote
from tooling.registry import registry

# The models' DecimalField: 14 digits, 3 of them decimals.
LARGEST = "99999999999.999"
TAKEN = ["0", "53.33", "1.000", "00000000053", LARGEST]
REFUSED = [
    "100000000000",  # twelve digits before the point
    "1.0000",  # four decimals
    "-1",
    "1e2",
    " 5",
    "5 ",
    "",
    "1.",
    ".5",
    "53,33",
    "+5",
    "NaN",
]
TOOLS = ["create_quote", "accept_quote"]


def tool_takes(tool: str, text: str) -> bool:
    try:
        registry.get(tool).input.model_validate({"expected_total": text})
    except ValidationError as error:
        return not [e for e in error.errors() if e["loc"][0] == "expected_total"]
    return True


def api_takes(serializer: type, field: str, text: str) -> bool:
    checked = serializer(data={field: text})
    checked.is_valid()
    return field not in checked.errors


def test_the_bound_is_the_money_columns():
    column = Quote._meta.get_field("total")
    assert (column.max_digits, column.decimal_places) == (
        money.STORED_MAX_DIGITS,
        money.STORED_DECIMAL_PLACES,
    )
    assert len(LARGEST.replace(".", "")) == column.max_digits
    assert Decimal(LARGEST) < money.STORED_AMOUNT_LIMIT


@pytest.mark.parametrize("text", TAKEN)
def test_both_apis_take_an_amount_the_columns_hold(text):
    assert [tool_takes(tool, text) for tool in TOOLS] == [True, True]
    assert api_takes(QuoteIn, "expected_total", text)
    assert api_takes(QuoteAcceptIn, "expected_total", text)
    assert api_takes(OpportunityIn, "amount", text)


@pytest.mark.parametrize("text", REFUSED)
def test_both_apis_refuse_what_the_columns_cannot_hold_or_is_not_plain_digits(text):
    assert [tool_takes(tool, text) for tool in TOOLS] == [False, False]
    assert not api_takes(QuoteIn, "expected_total", text)
    assert not api_takes(QuoteAcceptIn, "expected_total", text)
    assert not api_takes(OpportunityIn, "amount", text)


def test_a_tool_still_takes_a_json_number_within_the_columns_range():
    assert tool_takes("accept_quote", 53.33)
    assert not tool_takes("accept_quote", -1)
    assert not tool_takes("accept_quote", 10**11)


@pytest.mark.django_db
def test_both_documents_publish_the_one_pattern():
    document = Client().get("/api/v1/schema/?format=json").json()
    schemas = document["components"]["schemas"]
    published = {
        schemas["QuoteAcceptInRequest"]["properties"]["expected_total"]["pattern"],
        schemas["QuoteInRequest"]["properties"]["expected_total"]["pattern"],
        schemas["OpportunityInRequest"]["properties"]["amount"]["pattern"],
    }
    for tool in TOOLS:
        options = registry.get(tool).input_schema["properties"]["expected_total"]["anyOf"]
        published |= {o["pattern"] for o in options if o.get("type") == "string"}

    assert published == {money.AMOUNT_TEXT}
