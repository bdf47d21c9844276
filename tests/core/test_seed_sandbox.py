"""seed_sandbox run again: without --keep-token it revokes the sandbox's gateway token and issues
a new one; with it, the token in GARANTE_SANDBOX_TOKEN stays while it is the sandbox's and not
revoked (`make cluster` started again keeps its token)."""

import re
from io import StringIO

import pytest
from django.core.management import call_command

from core.models import GatewayCredential
from core.selectors import gateway_company_authenticate
from core.services import gateway_credential_revoke

pytestmark = pytest.mark.django_db


def seeded(*arguments: str) -> str:
    out = StringIO()
    call_command("seed_sandbox", *arguments, stdout=out)
    match = re.search(r"Gateway token:\s+(\S+)", out.getvalue())
    assert match, out.getvalue()
    return match.group(1)


def active_sandbox_tokens() -> list[str]:
    return list(
        GatewayCredential.objects.filter(
            name="sandbox gateway", revoked_at__isnull=True
        ).values_list("token_hash", flat=True)
    )


def test_a_second_seed_replaces_the_token_unless_asked_to_keep_it(monkeypatch):
    first = seeded()
    second = seeded()
    assert second != first
    assert gateway_company_authenticate(first) is None
    monkeypatch.setenv("GARANTE_SANDBOX_TOKEN", second)
    assert seeded("--keep-token") == second
    assert gateway_company_authenticate(second).slug == "sandbox"
    assert active_sandbox_tokens() == [GatewayCredential.hash_token(second)]


@pytest.mark.parametrize("given", ["", "gt_not-a-token-of-ours", "revoked"])
def test_a_token_that_cannot_be_kept_is_replaced(monkeypatch, given):
    current = seeded()
    if given == "revoked":
        given = current
        credential = GatewayCredential.objects.get(token_hash=GatewayCredential.hash_token(given))
        gateway_credential_revoke(credential=credential)
    monkeypatch.setenv("GARANTE_SANDBOX_TOKEN", given)
    issued = seeded("--keep-token")
    assert issued not in (given, current)
    assert active_sandbox_tokens() == [GatewayCredential.hash_token(issued)]
    assert gateway_company_authenticate(issued).slug == "sandbox"


def test_the_token_to_keep_is_ignored_without_the_option(monkeypatch):
    current = seeded()
    monkeypatch.setenv("GARANTE_SANDBOX_TOKEN", current)
    assert seeded() != current
    assert gateway_company_authenticate(current) is None
