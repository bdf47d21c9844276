"""Integration API fixtures: a salon with a catalog, credentials of two companies, and
clients that speak to /api/v1/ (DRF's APIClient in process, or httpx against a live server)."""

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from agenda.models import Professional, Service
from core.models import Company, Contact
from integration.models import IntegrationCredential
from integration.services import integration_credential_issue, public_references_assign


def new_key() -> str:
    return str(uuid.uuid4())


class Api:
    """An integration API client: `get(path, **params)`, and `post(path, body, key=...)`,
    which sends a fresh Idempotency-Key unless told otherwise (key=None sends none)."""

    def __init__(self, client: APIClient) -> None:
        self.client = client

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(f"/api/v1/{path}", params)

    def post(self, path: str, body: Any = None, *, key: str | None = "new", **headers: str) -> Any:
        if key == "new":
            key = new_key()
        if key is not None:
            headers["HTTP_IDEMPOTENCY_KEY"] = key
        return self.client.post(f"/api/v1/{path}", body, format="json", **headers)


@pytest.fixture
def make_api() -> Callable[..., Api]:
    def make(company: Company, scope: str = IntegrationCredential.Scope.READ_WRITE) -> Api:
        _credential, token = integration_credential_issue(company=company, name="ERP", scope=scope)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        return Api(client)

    return make


@pytest.fixture
def api(company: Company, make_api: Callable[..., Api]) -> Api:
    """A read-write credential of `company`."""
    return make_api(company)


@pytest.fixture
def read_api(company: Company, make_api: Callable[..., Api]) -> Api:
    return make_api(company, IntegrationCredential.Scope.READ)


@pytest.fixture
def other_api(other_company: Company, make_api: Callable[..., Api]) -> Api:
    """A read-write credential of another company."""
    return make_api(other_company)


@pytest.fixture
def rw_token(company: Company) -> str:
    return integration_credential_issue(
        company=company, name="web", scope=IntegrationCredential.Scope.READ_WRITE
    )[1]


def reference_of(entity: Contact | Service | Professional) -> str:
    """The public reference the API shows for a contact, service or professional."""
    kind = type(entity).__name__.lower()
    return public_references_assign(company=entity.company, kind=kind, ids=[entity.pk])[entity.pk]
