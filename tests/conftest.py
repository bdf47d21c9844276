"""Shared fixtures: companies, contacts, gateway tokens and HTTP clients against live servers."""

import itertools
import os
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db import connection

from core.models import Company
from core.services import gateway_credential_issue

_counter = itertools.count(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    is_postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    skip_pg = pytest.mark.skip(reason="needs PostgreSQL at 127.0.0.1:5432 (not reachable)")
    skip_redis = pytest.mark.skip(reason="needs Redis at 127.0.0.1:6379 (not reachable)")
    if os.environ.get("GARANTE_REQUIRE_SERVICES"):
        # CI promises PostgreSQL and Redis: a missing service must fail, not skip quietly.
        if not is_postgres or not settings.REDIS_AVAILABLE:
            raise pytest.UsageError(
                "GARANTE_REQUIRE_SERVICES is set but PostgreSQL or Redis is down"
            )
        return
    for item in items:
        if "postgres" in item.keywords and not is_postgres:
            item.add_marker(skip_pg)
        if "redis" in item.keywords and not settings.REDIS_AVAILABLE:
            item.add_marker(skip_redis)


@pytest.fixture
def make_company(db: None) -> Callable[..., Company]:
    def make(**fields: Any) -> Company:
        n = next(_counter)
        fields.setdefault("name", f"Company {n}")
        fields.setdefault("slug", f"company-{n}-{uuid.uuid4().hex[:6]}")
        fields.setdefault("environment", Company.Environment.SANDBOX)
        return Company.objects.create(**fields)

    return make


@pytest.fixture
def company(make_company: Callable[..., Company]) -> Company:
    return make_company(name="Peluquería Sol")


@pytest.fixture
def other_company(make_company: Callable[..., Company]) -> Company:
    return make_company(name="Clínica Luna")


@pytest.fixture
def token(company: Company) -> str:
    return gateway_credential_issue(company=company, name="gateway")[1]


@pytest.fixture
def other_token(other_company: Company) -> str:
    return gateway_credential_issue(company=other_company, name="gateway")[1]


class ToolClient:
    """Calls tools over the REST mirror of a live server, as the Gateway would over HTTP."""

    def __init__(self, base_url: str, token: str, conversation_id: str) -> None:
        self.base_url = base_url
        self.conversation_id = conversation_id
        self.http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    def call(
        self,
        name: str,
        arguments: dict | None = None,
        *,
        key: str | None = None,
        conversation_id: str | None = None,
    ) -> httpx.Response:
        headers = {"X-Conversation-Id": conversation_id or self.conversation_id}
        if key is not None:
            headers["Idempotency-Key"] = key
        return self.http.post(f"/api/tools/{name}", json=arguments or {}, headers=headers)


@pytest.fixture
def tool_client(live_server: Any, token: str) -> ToolClient:
    return ToolClient(live_server.url, token, f"conv-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def is_postgres() -> bool:
    return connection.vendor == "postgresql"
