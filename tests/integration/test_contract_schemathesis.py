"""Both OpenAPI documents are contracts: schemathesis drives every operation of the integration
API (/api/v1/schema/, an integration token) and of the REST tool mirror (/api/openapi.json, the
Gateway's token, with the X-Conversation-Id and Idempotency-Key headers it draws from the
document) through Django's WSGI handler with every check, and finds no deviation either way: no
answer the document does not describe, no request it calls invalid accepted, no request it
calls valid refused, except with one of the rule codes the document itself declares
(`x-rule-codes`: a closed case, a taken slot; the data's state, not the request's shape).

Bounded and deterministic for CI: a fixed seed and number of examples per operation, and the
stateful phase off (its random walks over linked operations are what the examples bound)."""

from typing import Any

import hypothesis
import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import positive_data_acceptance

from config.wsgi import application
from support.services import case_open

pytestmark = pytest.mark.django_db(transaction=True)

SEED = 20261207
# Per operation and phase: enough to hit each parameter's edges, a minute or two per document.
MAX_EXAMPLES = 8
# What a request the document calls valid may be answered besides success: the credential's
# rights, an unknown reference, a conflict of keys, the rate limit.
ANSWERS_TO_VALID_REQUESTS = {401, 403, 404, 409, 429}
# One company and credential serve every example of an operation, on purpose.
SHARED_FIXTURES = hypothesis.settings(
    suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture]
)


def _config() -> SchemathesisConfig:
    return SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True},
            "phases": {"stateful": {"enabled": False}},
        }
    )


def refused_only_by_declared_rules(ctx: Any, response: Any, case: Any) -> None:
    """schemathesis's positive_data_acceptance, but a 422 whose `code` the document lists in
    `info.x-rule-codes` is an answer about the data and not a deviation."""
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return
    status = response.status_code
    if 200 <= status < 400 or status in ANSWERS_TO_VALID_REQUESTS:
        return
    declared = case.operation.schema.raw_schema["info"].get("x-rule-codes", [])
    if status == 422 and response.json().get("code") in declared:
        return
    raise AssertionError(
        f"A request valid by the document was refused ({status}) with a code the document "
        f"does not declare as a rule: {response.text[:500]}"
    )


def _validate(case: Any, headers: dict[str, str]) -> None:
    case.call_and_validate(
        headers=headers,
        excluded_checks=[positive_data_acceptance],
        additional_checks=[refused_only_by_declared_rules],
    )


@pytest.fixture
def integration_headers(company, ana, rw_token, settings):
    settings.REST_FRAMEWORK = settings.REST_FRAMEWORK | {
        "DEFAULT_THROTTLE_RATES": {"integration": None}
    }
    case_open(company=company, contact=ana, subject="Grifo", description="Gotea")
    return {"Authorization": f"Bearer {rw_token}"}


@pytest.fixture
def gateway_headers(company, ana, token):
    return {"Authorization": f"Bearer {token}"}


# Loaded in process, at collection (generating a document reads no table): the calls then run
# through Django's WSGI handler, on the test's database.
integration = schemathesis.openapi.from_wsgi(
    "/api/v1/schema/?format=json", application, config=_config()
)
# The test application's tools (tests/testapp) fail on purpose, with 503s among them.
tools = schemathesis.openapi.from_wsgi("/api/openapi.json", application, config=_config()).exclude(
    path_regex="^/api/tools/testapp_"
)


@integration.parametrize()
@SHARED_FIXTURES
def test_the_integration_api_answers_as_its_openapi_document_says(case, integration_headers):
    """Every operation of /api/v1/, every check, zero failures."""
    _validate(case, integration_headers)


@tools.parametrize()
@SHARED_FIXTURES
def test_the_tool_mirror_answers_as_its_openapi_document_says(case, gateway_headers):
    """Every tool's POST /api/tools/<name>, every check, zero failures."""
    _validate(case, gateway_headers)
