"""A company's step-up policy is kept in the process cache: a warm sensitive write reads no
policy, a change made here takes effect at once, one made elsewhere within the cache's lifetime."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.identity import step_up_actions
from core.models import StepUpPolicy

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("process_caches_on")]


def actions_and_queries(company) -> tuple[list[str], int]:
    with CaptureQueriesContext(connection) as captured:
        actions = step_up_actions(company_id=company.pk)
    return actions, len(captured.captured_queries)


def test_a_warm_policy_costs_no_query(company):
    StepUpPolicy.objects.create(company=company, actions=["open_case"])

    assert actions_and_queries(company) == (["open_case"], 1)
    assert actions_and_queries(company) == (["open_case"], 0)


def test_a_company_without_a_policy_gets_the_current_defaults_from_the_cache(company, settings):
    settings.GARANTE_STEP_UP_DEFAULT_ACTIONS = ["accept_quote"]
    assert actions_and_queries(company) == (["accept_quote"], 1)

    settings.GARANTE_STEP_UP_DEFAULT_ACTIONS = ["accept_quote", "open_case"]

    assert actions_and_queries(company) == (["accept_quote", "open_case"], 0)


def test_a_policy_created_changed_or_deleted_here_takes_effect_at_once(company, settings):
    settings.GARANTE_STEP_UP_DEFAULT_ACTIONS = ["accept_quote"]
    assert step_up_actions(company_id=company.pk) == ["accept_quote"]

    policy = StepUpPolicy.objects.create(company=company, actions=["open_case"])
    assert step_up_actions(company_id=company.pk) == ["open_case"]

    policy.actions = ["open_case", "cancel_appointment"]
    policy.save()
    assert step_up_actions(company_id=company.pk) == ["open_case", "cancel_appointment"]

    policy.delete()
    assert step_up_actions(company_id=company.pk) == ["accept_quote"]


def test_a_policy_changed_elsewhere_takes_effect_within_the_cache_lifetime(company, cache_clock):
    StepUpPolicy.objects.create(company=company, actions=["accept_quote"])
    assert step_up_actions(company_id=company.pk) == ["accept_quote"]
    # Another process adds a tool: an UPDATE this process hears nothing about.
    StepUpPolicy.objects.filter(company=company).update(actions=["accept_quote", "open_case"])

    cache_clock["now"] += 4.9
    assert step_up_actions(company_id=company.pk) == ["accept_quote"]
    cache_clock["now"] += 0.2
    assert step_up_actions(company_id=company.pk) == ["accept_quote", "open_case"]


def test_one_companys_policy_is_not_another_companys(company, other_company):
    StepUpPolicy.objects.create(company=company, actions=["open_case"])
    StepUpPolicy.objects.create(company=other_company, actions=[])
    step_up_actions(company_id=company.pk)

    assert step_up_actions(company_id=other_company.pk) == []
    assert step_up_actions(company_id=company.pk) == ["open_case"]


def test_the_callers_list_is_its_own(company):
    StepUpPolicy.objects.create(company=company, actions=["open_case"])
    step_up_actions(company_id=company.pk).append("accept_quote")

    assert step_up_actions(company_id=company.pk) == ["open_case"]
