"""The gateway token lookup is kept in the process cache for a few seconds: no query on a warm call,
changes made here take effect at once, changes made elsewhere within the cache's lifetime."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone, translation

from core import process_cache
from core.models import Company, GatewayCredential
from core.process_cache import change_seen_everywhere
from core.selectors import authentications, gateway_company_authenticate
from core.services import gateway_credential_issue, gateway_credential_revoke

pytestmark = pytest.mark.usefixtures("process_caches_on")


def queries_of(call):
    with CaptureQueriesContext(connection) as captured:
        result = call()
    return result, [q["sql"] for q in captured.captured_queries]


def test_a_warm_token_costs_no_query(company, token):
    first, sql = queries_of(lambda: gateway_company_authenticate(token))
    assert first.pk == company.pk
    assert len(sql) == 2  # the lookup, and last_used_at (once a minute)
    second, sql = queries_of(lambda: gateway_company_authenticate(token))
    assert second.pk == company.pk and second.name == company.name
    assert sql == []


def test_each_request_gets_its_own_company_instance(company, token):
    first = gateway_company_authenticate(token)
    second = gateway_company_authenticate(token)
    assert first == second and first is not second
    first.name = "changed by a request"
    assert gateway_company_authenticate(token).name == company.name


def test_unknown_tokens_are_never_cached(company, token):
    for _ in range(2):
        result, sql = queries_of(lambda: gateway_company_authenticate("gt_not-a-token"))
        assert result is None and len(sql) == 1
    assert gateway_company_authenticate("") is None


def test_revoking_here_takes_effect_at_once(company):
    credential, token = gateway_credential_issue(company=company, name="gateway")
    assert gateway_company_authenticate(token) == company
    gateway_credential_revoke(credential=credential)
    assert gateway_company_authenticate(token) is None


def test_a_company_saved_here_is_served_as_it_now_is(company, token):
    assert gateway_company_authenticate(token).language == "es"
    company.language = "en"
    company.save()
    assert gateway_company_authenticate(token).language == "en"


def test_a_revocation_made_elsewhere_takes_effect_within_the_cache_lifetime(
    company, token, cache_clock
):
    assert gateway_company_authenticate(token) == company
    # Another process revokes: an UPDATE this process hears nothing about.
    GatewayCredential.objects.filter(company=company).update(revoked_at=timezone.now())
    cache_clock["now"] += 4.9
    assert gateway_company_authenticate(token) == company
    cache_clock["now"] += 0.2
    assert gateway_company_authenticate(token) is None


def test_a_company_changed_elsewhere_is_seen_after_the_cache_lifetime(company, token, cache_clock):
    assert gateway_company_authenticate(token).timezone == "Europe/Madrid"
    Company.objects.filter(pk=company.pk).update(timezone="Atlantic/Canary")
    assert gateway_company_authenticate(token).timezone == "Europe/Madrid"
    cache_clock["now"] += 5.1
    assert gateway_company_authenticate(token).timezone == "Atlantic/Canary"


def test_last_used_is_refreshed_once_a_minute(company, token, monkeypatch):
    gateway_company_authenticate(token)
    credential = GatewayCredential.objects.get(company=company)
    assert credential.last_used_at is not None
    later = credential.last_used_at + timedelta(minutes=2)
    monkeypatch.setattr(timezone, "now", lambda: later)
    _, sql = queries_of(lambda: gateway_company_authenticate(token))
    assert len(sql) == 1 and sql[0].startswith("UPDATE")
    credential.refresh_from_db()
    assert credential.last_used_at == later


def test_with_the_cache_off_every_call_asks_the_database(company, token, settings):
    settings.GARANTE_PROCESS_CACHE_SECONDS = 0
    gateway_company_authenticate(token)
    for _ in range(2):
        result, sql = queries_of(lambda: gateway_company_authenticate(token))
        assert result.pk == company.pk and len(sql) == 1


def test_deleting_a_company_forgets_its_tokens(make_company):
    doomed = make_company(name="Se va")
    _, token = gateway_credential_issue(company=doomed, name="gateway")
    assert gateway_company_authenticate(token) == doomed
    doomed.delete()
    assert gateway_company_authenticate(token) is None


def test_the_cache_is_bounded_and_forgets_by_tag(monkeypatch, settings):
    cache = process_cache.ProcessCache("test")
    monkeypatch.setattr(process_cache, "MAX_ENTRIES", 3)
    loads = []

    def load(key, tag):
        def loader():
            loads.append(key)
            return tag, f"value of {key}"

        return loader

    for key, tag in [("a", 1), ("b", 1), ("c", 2)]:
        assert cache.get(key, load(key, tag)) == f"value of {key}"
    assert cache.get("a", load("a", 1)) == "value of a" and loads == ["a", "b", "c"]
    cache.forget(tag=1)
    cache.get("a", load("a", 1))
    cache.get("c", load("c", 2))
    assert loads == ["a", "b", "c", "a"]  # c kept: another tag
    cache.get("d", load("d", 3))
    cache.get("e", load("e", 3))  # a fourth entry: the full cache starts over
    cache.get("c", load("c", 2))
    assert loads[-3:] == ["d", "e", "c"]


def test_a_bypassed_cache_reads_its_source_every_time_and_keeps_nothing():
    cache = process_cache.ProcessCache("test")
    loads = []

    def load():
        loads.append(1)
        return "tag", len(loads)

    with process_cache.process_caches_bypassed():
        assert [cache.get("k", load), cache.get("k", load)] == [1, 2]
    assert cache.get("k", load) == 3 and cache.get("k", load) == 3


def test_every_cache_of_the_process_can_be_emptied_at_once(company, token):
    gateway_company_authenticate(token)
    process_cache.process_caches_forget()
    _, sql = queries_of(lambda: gateway_company_authenticate(token))
    assert len(sql) == 1


@pytest.mark.django_db(transaction=True)
def test_a_change_is_forgotten_again_when_it_commits(company, token, settings):
    settings.GARANTE_PROCESS_CACHE_SECONDS = 5
    token_hash = GatewayCredential.hash_token(token)
    assert gateway_company_authenticate(token).language == "es"
    before = authentications.get(token_hash, lambda: None)  # what the cache holds now
    with transaction.atomic():
        company.language = "en"
        company.save()
        # Another request of this process read the rows before the change committed, and
        # keeps what it read.
        authentications.get(token_hash, lambda: (company.pk, before))
        assert gateway_company_authenticate(token).language == "es"
    assert gateway_company_authenticate(token).language == "en"


@pytest.mark.parametrize(
    ("redis_url", "seconds", "told"),
    [
        ("", 1, "en 1 segundo como máximo"),
        ("", 5, "en 5 segundos como máximo"),
        ("redis://127.0.0.1:6379/9", 5, "desde su próxima petición"),
    ],
)
def test_staff_are_told_when_every_server_sees_their_change(settings, redis_url, seconds, told):
    settings.GARANTE_REDIS_URL, settings.GARANTE_PROCESS_CACHE_SECONDS = redis_url, seconds

    with translation.override("es"):
        assert change_seen_everywhere() == told
