"""A staff member's role in the chosen company bounds what they may do through /api/v1/, as it
bounds it in the admin (core.roles): per company and per action, never by the group alone."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from core.models import StaffMembership
from core.roles import staff_membership_set
from sales.models import Opportunity, Quote
from sales.services import QuoteItem, opportunity_create, quote_create
from support.models import Case
from support.services import case_open

pytestmark = pytest.mark.django_db

Role = StaffMembership.Role


def _staff(username, *memberships):
    user = get_user_model().objects.create_user(username, password="x", is_staff=True)
    for company, role in memberships:
        staff_membership_set(user=user, company=company, role=role)
    client = APIClient()
    client.force_login(user)
    return client


def _post(client, path, company=None):
    headers = {"HTTP_X_GARANTE_COMPANY": company.slug} if company else {}
    return client.post(f"/api/v1/{path}", {}, format="json", HTTP_IDEMPOTENCY_KEY="k-1", **headers)


def test_an_agent_cannot_accept_a_quote(company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=[QuoteItem(sku="CAF-001", quantity=1)])
    agent = _staff("agente", (company, Role.AGENT))

    response = _post(agent, f"quotes/{quote.reference}/accept")

    quote.refresh_from_db()
    assert response.status_code == 403
    assert response.json()["code"] == "role_not_allowed"
    assert quote.state == Quote.State.SENT


def test_an_agent_cannot_win_an_opportunity_nor_create_one(company, ana):
    opportunity = opportunity_create(company=company, contact=ana, title="Equipo")
    agent = _staff("agente", (company, Role.AGENT))

    won = _post(agent, f"opportunities/{opportunity.reference}/win")
    created = agent.post(
        "/api/v1/opportunities", {"title": "x"}, format="json", HTTP_IDEMPOTENCY_KEY="k-2"
    )

    opportunity.refresh_from_db()
    assert (won.status_code, created.status_code) == (403, 403)
    assert opportunity.state == Opportunity.State.NEW
    assert Opportunity.objects.count() == 1


def test_an_agent_still_reads_and_works_cases(company, ana):
    case = case_open(company=company, contact=ana, subject="Grifo", description="Gotea")
    agent = _staff("agente", (company, Role.AGENT))

    listed = agent.get("/api/v1/opportunities")
    started = _post(agent, f"cases/{case.reference}/start")

    assert listed.status_code == 200
    assert started.status_code == 200, started.content
    case.refresh_from_db()
    assert case.state == Case.State.IN_PROGRESS


def test_a_supervisor_may_win_an_opportunity(company, ana):
    opportunity = opportunity_create(company=company, contact=ana, title="Equipo")
    supervisor = _staff("supervisora", (company, Role.SUPERVISOR))

    response = _post(supervisor, f"opportunities/{opportunity.reference}/win")

    assert response.status_code == 200, response.content
    assert response.json()["state"] == "won"


def test_the_role_is_the_one_held_in_the_chosen_company(company, other_company, ana):
    """An admin of another company is only an agent here: Django's groups are global, the
    role is per company."""
    opportunity = opportunity_create(company=company, contact=ana, title="Equipo")
    client = _staff("mixta", (company, Role.AGENT), (other_company, Role.ADMIN))

    response = _post(client, f"opportunities/{opportunity.reference}/win", company=company)

    assert response.status_code == 403
    opportunity.refresh_from_db()
    assert opportunity.state == Opportunity.State.NEW
