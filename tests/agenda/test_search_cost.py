"""A slot search reads the appointments of its window, not the whole table (PostgreSQL plan)."""

import json

import pytest

from agenda.availability.busy import scheduled_in_window
from agenda.availability.search import slots_available
from tests.factories import MONDAY_8AM, local
from tests.statements import plan_nodes

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def test_the_window_query_touches_only_rows_near_the_window(long_history, marta):
    queryset = scheduled_in_window([marta.pk], local(2026, 12, 7), local(2026, 12, 14))

    plan = json.loads(queryset.explain(format="json", analyze=True))[0]["Plan"]

    nodes = list(plan_nodes(plan))
    scans = [n for n in nodes if "Scan" in n["Node Type"]]
    assert all(n["Node Type"] != "Seq Scan" for n in scans), plan
    examined = sum(n.get("Actual Rows", 0) + n.get("Rows Removed by Filter", 0) for n in scans)
    assert examined < 50, plan


def test_a_search_over_a_long_history_makes_a_fixed_number_of_queries(
    long_history, company, service, django_assert_max_num_queries
):
    with django_assert_max_num_queries(6):
        slots = slots_available(
            company=company,
            service=service,
            starts_at=local(2026, 12, 7),
            ends_at=local(2026, 12, 14),
            now=MONDAY_8AM,
        )

    assert len(slots) == 5 * 16  # the history lies before the week: every slot is free
