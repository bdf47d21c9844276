"""Leads reach sales: a new opportunity emails the company's sales staff once, after commit;
it waits on the dashboard with its age until one of them takes it, highlighted past the
company's pickup time; only the company's sales staff can be given it."""

from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from core.errors import ValidationFailed
from sales.models import Opportunity, SalesSettings
from sales.selectors import lead_overdue_filter, sales_staff
from sales.services.lead_notice import (
    opportunity_owner_notices_pending,
    opportunity_owner_notify,
    opportunity_team_notices_pending,
    opportunity_team_notify,
)
from sales.services.opportunities import opportunity_assign, opportunity_create
from tests.admin_pages import change_form_data, change_url
from tests.factories import PASSWORD, bruno

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(company, other_company, make_staff):
    """Sol's sales staff (a supervisor and an administrator), an agent of Sol who only sees
    the pipeline, and a supervisor of another company."""
    return {
        "sara": make_staff("sara", role="supervisor", email="sara@example.com"),
        "maria": make_staff("maria", role="admin", email="maria@example.com"),
        "pablo": make_staff("pablo", role="agent", email="pablo@example.com"),
        "luna": make_staff("luna", other_company, role="supervisor", email="luna@example.com"),
    }


def lead(company, contact, **fields):
    fields.setdefault("title", "Máquina de café")
    return opportunity_create(company=company, contact=contact, **fields)


def test_a_new_lead_emails_the_company_sales_staff_once_after_commit(
    company, ana, team, ana_conv, django_capture_on_commit_callbacks, settings
):
    settings.GARANTE_PUBLIC_URL = "https://garante.example.com"
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        opportunity = lead(company, ana, notes="Para su oficina", conversation=ana_conv)
    assert mail.outbox == []  # nothing before the commit

    for callback in callbacks:
        callback()

    (email,) = mail.outbox
    assert sorted(email.bcc) == ["maria@example.com", "sara@example.com"]
    assert email.to == []
    assert email.subject == f"Nuevo cliente potencial {opportunity.reference}: Máquina de café"
    assert "Ana García ha pedido, a través del agente" in email.body
    assert "Para su oficina" in email.body
    assert "Asignada a: nadie aún" in email.body
    assert "en 4 horas, se resalta en el panel" in email.body
    assert f"https://garante.example.com{change_url(opportunity)}" in email.body
    opportunity.refresh_from_db()
    assert opportunity.team_notified_at is not None

    assert opportunity_team_notify(opportunity_id=opportunity.pk) == 0
    assert len(mail.outbox) == 1


def test_a_notice_whose_task_was_lost_is_sent_by_the_sweep_once(company, ana, team):
    opportunity = lead(company, ana)  # the test's transaction never commits: no task ran
    later = timezone.now() + timedelta(minutes=5)

    assert opportunity_team_notices_pending(now=timezone.now()) == []  # still in its grace
    assert opportunity.pk in opportunity_team_notices_pending(now=later)
    assert opportunity_team_notify(opportunity_id=opportunity.pk) == 1
    assert opportunity_team_notices_pending(now=later) == []
    assert len(mail.outbox) == 1


def test_a_notice_refused_for_good_is_kept_with_its_reason_and_not_retried(
    company, ana, team, smtp_refusing
):
    smtp_refusing("550 5.1.1 No such user")
    opportunity = lead(company, ana)

    assert opportunity_team_notify(opportunity_id=opportunity.pk) == 0

    opportunity.refresh_from_db()
    assert (opportunity.team_notified_at, opportunity.team_notice_error) == (
        None,
        "SMTP recipient refused 550",
    )
    later = timezone.now() + timedelta(minutes=5)
    assert opportunity_team_notices_pending(now=later) == []


def test_without_sales_staff_the_notice_is_settled_and_the_lead_still_waits(company, ana):
    opportunity = lead(company, ana)

    assert opportunity_team_notify(opportunity_id=opportunity.pk) == 0

    opportunity.refresh_from_db()
    assert opportunity.team_notice_error == "no sales staff with an email"
    assert mail.outbox == []
    assert Opportunity.objects.filter(lead_overdue_filter(now=timezone.now())).count() == 0


def test_the_sales_staff_are_those_who_may_run_the_pipeline_in_that_company(
    company, other_company, team
):
    assert list(sales_staff(company_ids=[company.pk])) == [team["maria"], team["sara"]]
    assert list(sales_staff(company_ids=[other_company.pk])) == [team["luna"]]
    team["sara"].is_active = False
    team["sara"].save()
    assert list(sales_staff(company_ids=[company.pk])) == [team["maria"]]


def test_a_lead_is_assigned_only_to_the_company_sales_staff(company, ana, team):
    opportunity = lead(company, ana)

    for outsider in (team["pablo"], team["luna"]):
        with pytest.raises(ValidationFailed) as refused:
            opportunity_assign(opportunity=opportunity, owner=outsider)
        assert refused.value.code == "owner_not_sales_staff"

    taken = opportunity_assign(opportunity=opportunity, owner=team["sara"])
    assert (taken.owner, taken.assigned_at is not None) == (team["sara"], True)
    first_taken = taken.assigned_at
    again = opportunity_assign(opportunity=opportunity, owner=team["sara"])
    assert again.assigned_at == first_taken  # no change, no new time

    released = opportunity_assign(opportunity=opportunity, owner=None)
    assert (released.owner, released.assigned_at) == (None, None)
    with pytest.raises(ValidationFailed):
        lead(company, ana, owner=team["pablo"])


def test_a_lead_nobody_took_in_its_company_pickup_time_is_overdue(
    company, other_company, ana, team
):
    now = timezone.now()
    waiting = lead(company, ana)
    taken = lead(company, ana, owner=team["maria"])
    elsewhere = lead(other_company, bruno(other_company))
    Opportunity.objects.filter(pk__in=[waiting.pk, taken.pk, elsewhere.pk]).update(
        created_at=now - timedelta(hours=5)
    )
    SalesSettings.objects.create(company=other_company, lead_pickup_hours=8)

    overdue = set(
        Opportunity.objects.filter(lead_overdue_filter(now=now)).values_list("pk", flat=True)
    )

    # 5 hours: past Sol's default of 4, within the other company's 8; a taken one never.
    assert overdue == {waiting.pk}
    assert set(
        Opportunity.objects.filter(lead_overdue_filter(now=now + timedelta(hours=4))).values_list(
            "pk", flat=True
        )
    ) == {waiting.pk, elsewhere.pk}


def test_the_dashboard_shows_new_leads_with_their_age_the_late_ones_highlighted(
    client, company, ana, team
):
    late, fresh = lead(company, ana), lead(company, ana, title="Molinillo")
    Opportunity.objects.filter(pk=late.pk).update(created_at=timezone.now() - timedelta(hours=6))
    client.login(username="pablo", password=PASSWORD)  # an agent sees the pipeline too

    page = client.get(reverse("admin:index")).content.decode()

    panel = page[page.index('id="panel-leads"') :]
    panel = panel[: panel.index("</table>")]
    rows = panel.split("<tr")[2:]
    assert late.reference in rows[0] and 'class="garante-highlight"' in rows[0]
    assert "6 horas" in rows[0] and "nadie aún" in rows[0]
    assert fresh.reference in rows[1] and "garante-highlight" not in rows[1]
    assert "minuto" in rows[1]


def test_staff_assign_a_lead_from_the_form_only_to_the_company_sales_staff(
    client, company, ana, team
):
    opportunity = lead(company, ana)
    client.login(username="maria", password=PASSWORD)
    page = client.get(change_url(opportunity))
    choices = {str(user) for user in page.context["adminform"].form.fields["owner"].queryset}
    assert choices == {"maria", "sara"}

    refused = client.post(
        change_url(opportunity), change_form_data(client, opportunity, owner=team["pablo"].pk)
    )
    assert refused.status_code == 200  # the form again, with the field's error
    assert Opportunity.objects.get(pk=opportunity.pk).owner is None

    saved = client.post(
        change_url(opportunity), change_form_data(client, opportunity, owner=team["sara"].pk)
    )
    assert saved.status_code == 302
    opportunity.refresh_from_db()
    assert (opportunity.owner, opportunity.assigned_at is not None) == (team["sara"], True)


def test_assign_to_me_takes_the_selected_leads(client, company, ana, team):
    opportunity = lead(company, ana)
    client.login(username="sara", password=PASSWORD)

    response = client.post(
        reverse("admin:sales_opportunity_changelist"),
        {"action": "assign_to_me", "_selected_action": [opportunity.pk]},
        follow=True,
    )

    assert [str(m) for m in response.context["messages"]] == ["Se le ha asignado 1 oportunidad."]
    opportunity.refresh_from_db()
    assert opportunity.owner == team["sara"]
    waiting = client.get(reverse("admin:sales_opportunity_changelist") + "?lead=waiting")
    assert opportunity.reference not in waiting.content.decode()


def test_an_administrator_sets_the_pickup_time_and_a_supervisor_only_reads_it(
    client, company, ana, team
):
    late = lead(company, ana)
    Opportunity.objects.filter(pk=late.pk).update(created_at=timezone.now() - timedelta(hours=5))
    client.login(username="sara", password=PASSWORD)
    assert client.get(reverse("admin:sales_salessettings_add")).status_code == 403

    client.login(username="maria", password=PASSWORD)
    saved = client.post(
        reverse("admin:sales_salessettings_add"),
        {"company": company.pk, "lead_pickup_hours": "8"},
    )
    assert saved.status_code == 302
    refused = client.post(
        reverse("admin:sales_salessettings_change", args=[company.sales_settings.pk]),
        {"company": company.pk, "lead_pickup_hours": "0"},
    )
    assert refused.status_code == 200  # at least an hour
    assert SalesSettings.objects.get(company=company).lead_pickup_hours == 8

    waiting = client.get(reverse("admin:sales_opportunity_changelist") + "?lead=overdue")
    assert late.reference not in waiting.content.decode()  # 5 hours: within the company's 8
    page = client.get(reverse("admin:index")).content.decode()
    assert "garante-highlight" not in page[page.index('id="panel-leads"') :].split("</table>")[0]


def test_the_list_says_how_long_a_lead_waits_and_filters_those_past_the_pickup_time(
    client, company, ana, team
):
    late, fresh = lead(company, ana), lead(company, ana, title="Molinillo")
    Opportunity.objects.filter(pk=late.pk).update(created_at=timezone.now() - timedelta(days=2))
    client.login(username="pablo", password=PASSWORD)
    changelist = reverse("admin:sales_opportunity_changelist")

    overdue = client.get(changelist + "?lead=overdue").content.decode()

    assert late.reference in overdue and fresh.reference not in overdue
    assert "2 días · fuera del plazo de atención" in overdue
    waiting = client.get(changelist + "?lead=waiting").content.decode()
    assert late.reference in waiting and fresh.reference in waiting


# The salesperson a lead is assigned to (issue 43) -------------------------------------------------


def test_a_salesperson_given_a_lead_by_a_colleague_is_emailed_once_with_its_link(
    company, ana, team, django_capture_on_commit_callbacks, settings
):
    settings.GARANTE_PUBLIC_URL = "https://garante.example.com"
    opportunity = lead(company, ana)
    mail.outbox.clear()

    with django_capture_on_commit_callbacks(execute=True):
        opportunity_assign(opportunity=opportunity, owner=team["sara"], by=team["maria"])

    (email,) = mail.outbox
    assert email.bcc == ["sara@example.com"]
    assert email.subject == f"Oportunidad {opportunity.reference} asignada a usted: Máquina de café"
    assert f"https://garante.example.com{change_url(opportunity)}" in email.body
    opportunity.refresh_from_db()
    assert opportunity.owner_notified_at is not None
    assert opportunity_owner_notify(opportunity_id=opportunity.pk) == 0  # once
    assert opportunity_owner_notices_pending(now=timezone.now() + timedelta(hours=1)) == []
    assert len(mail.outbox) == 1


def test_taking_a_lead_yourself_emails_nobody_and_a_new_assignment_starts_over(
    company, ana, team, django_capture_on_commit_callbacks
):
    opportunity = lead(company, ana)
    mail.outbox.clear()

    with django_capture_on_commit_callbacks(execute=True):
        opportunity_assign(opportunity=opportunity, owner=team["sara"], by=team["sara"])
    assert mail.outbox == []

    with django_capture_on_commit_callbacks(execute=True):
        opportunity_assign(opportunity=opportunity, owner=team["maria"], by=team["sara"])
    (email,) = mail.outbox
    assert email.bcc == ["maria@example.com"]


def test_an_assignment_notice_whose_task_was_lost_is_sent_by_the_sweep(company, ana, team):
    opportunity = lead(company, ana)
    opportunity_assign(opportunity=opportunity, owner=team["sara"], by=team["maria"])  # no commit
    mail.outbox.clear()
    later = timezone.now() + timedelta(minutes=5)

    assert opportunity.pk in opportunity_owner_notices_pending(now=later)
    assert opportunity_owner_notify(opportunity_id=opportunity.pk) == 1
    assert opportunity_owner_notices_pending(now=later) == []


def test_a_salesperson_without_email_is_recorded_not_told(company, ana, make_staff):
    nomail = make_staff("nomail", role="supervisor", email="")
    boss = make_staff("boss", role="admin", email="boss@example.com")
    opportunity = lead(company, ana)
    opportunity_assign(opportunity=opportunity, owner=nomail, by=boss)
    mail.outbox.clear()

    assert opportunity_owner_notify(opportunity_id=opportunity.pk) == 0

    opportunity.refresh_from_db()
    assert opportunity.owner_notice_error == "the salesperson has no email"
    assert mail.outbox == []


def test_assigning_a_lead_on_its_page_emails_the_salesperson_and_the_page_says_so(
    client, company, ana, team, django_capture_on_commit_callbacks
):
    opportunity = lead(company, ana)
    mail.outbox.clear()
    client.login(username="maria", password=PASSWORD)

    with django_capture_on_commit_callbacks(execute=True):
        saved = client.post(
            change_url(opportunity), change_form_data(client, opportunity, owner=team["sara"].pk)
        )

    assert saved.status_code == 302
    (email,) = mail.outbox
    assert email.bcc == ["sara@example.com"]
    assert change_url(opportunity) in email.body
    page = client.get(change_url(opportunity)).content.decode()
    assert "Responsable avisado" in page or "responsable avisado" in page.lower()
    assert "la tomó él mismo" not in page
