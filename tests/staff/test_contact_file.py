"""The customer's file on a contact's admin page (core.admin.contact_file): each kind of record
with its count, links to the filtered lists and to each record, the actions that start from the
customer, only their company's records, only what the staff member's role may see, and a
bounded number of queries however long the history."""

import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agenda.models import Appointment
from agenda.services import appointment_book, appointment_cancel
from core.models import Company, Conversation, OutboxMessage, SecurityEvent
from core.services import contact_create
from sales.models import Quote
from sales.services.quote_lifecycle import quote_create
from sales.services.quote_pricing import QuoteItem
from support.models import Case
from support.services import case_open
from tests.admin_pages import change_url

pytestmark = pytest.mark.django_db


def file_of(client, contact) -> dict[str, dict]:
    page = client.get(change_url(contact))
    assert page.status_code == 200
    return {section["key"]: section for section in page.context["contact_file"]}


def book(day, hours_from_now: int) -> Appointment:
    starts = (timezone.now() + timedelta(hours=hours_from_now)).replace(
        minute=0, second=0, microsecond=0
    )
    return appointment_book(
        company=day.company,
        contact=day.contact,
        service=day.service,
        professional=day.professional,
        starts_at=starts,
        created_via=Appointment.Via.STAFF,
        enforce_customer_rules=False,
        now=starts - timedelta(days=30),  # in the past too: staff record what happened
    )


def test_the_file_counts_each_kind_of_the_customers_records_and_links_each_one(
    client, sol_day, agent
):
    day = sol_day
    Conversation.objects.create(company=day.company, external_id="conv-ana-2", contact=day.contact)
    client.force_login(agent)

    sections = file_of(client, day.contact)

    totals = {key: s["total"] for key, s in sections.items()}
    assert totals == {
        "appointments": 1,
        "quotes": 1,
        "orders": 0,
        "cases": 1,
        "opportunities": 0,
        "conversations": 1,
        "appointment_messages": totals["appointment_messages"],
        "case_messages": 0,
        "quote_emails": 0,
        "quote_messages": 0,
        "codes": 0,
        "security": 1,
    }
    assert totals["appointment_messages"] >= 1  # the booking confirmation (and its reminder)
    first = {key: s["rows"][0] for key, s in sections.items() if s["rows"]}
    assert first["appointments"]["url"] == change_url(day.appointment)
    assert first["appointments"]["cells"][0] == day.appointment.reference
    assert first["quotes"]["url"] == change_url(day.quote)
    assert first["cases"]["url"] == change_url(day.case)
    assert first["security"]["url"] == change_url(day.event)
    assert first["appointment_messages"]["url"] == change_url(day.appointment)


def test_appointments_come_upcoming_first_soonest_first_then_the_past_latest_first(
    client, sol_day, agent
):
    day = sol_day
    later = book(day, 48)
    past = book(day, -72)
    older = book(day, -120)
    cancelled = book(day, 96)
    appointment_cancel(company=day.company, reference=cancelled.reference, enforce_cutoff=False)
    client.force_login(agent)

    section = file_of(client, day.contact)["appointments"]

    shown = [(row["group"], row["cells"][0]) for row in section["rows"]]
    assert shown == [
        ("Próximas", day.appointment.reference),
        ("Próximas", later.reference),
        ("Pasadas o canceladas", cancelled.reference),
        ("Pasadas o canceladas", past.reference),
        ("Pasadas o canceladas", older.reference),
    ]
    assert section["total"] == 5
    assert section["note"] == "2 próximas"


def test_each_smart_button_opens_the_admin_list_of_exactly_the_customers_records(
    client, sol_day, luna_day, agent, sol_admin
):
    """The filter of each list is one Django's admin accepts (not an error page), and it lists
    the customer's records of that kind, no one else's."""
    day = sol_day
    other = case_open(
        company=day.company, contact=_another_contact(day), subject="Otra persona", description="x"
    )
    client.force_login(sol_admin)

    sections = file_of(client, day.contact)

    listed = {}
    for key, section in sections.items():
        if not section["list_url"]:
            continue
        page = client.get(section["list_url"])
        assert page.status_code == 200, key  # a lookup the admin refuses redirects (?e=1)
        listed[key] = page.context["cl"].result_count
        assert listed[key] == section["total"], key
    assert set(listed) == {
        "appointments",
        "quotes",
        "orders",
        "cases",
        "opportunities",
        "conversations",
        "quote_emails",
        "codes",
        "security",
    }
    cases_page = client.get(sections["cases"]["list_url"]).content.decode()
    assert day.case.reference in cases_page
    assert other.reference not in cases_page


def _another_contact(day):
    return contact_create(company=day.company, first_name="Bea", phone="+34600999888")


def test_an_accepted_quote_is_counted_as_an_order_not_as_a_quote(client, sol_day, agent):
    day = sol_day
    Quote.objects.filter(pk=day.quote.pk).update(state=Quote.State.ACCEPTED)
    client.force_login(agent)

    sections = file_of(client, day.contact)

    assert (sections["quotes"]["total"], sections["orders"]["total"]) == (0, 1)
    assert sections["orders"]["rows"][0]["cells"][0] == day.quote.reference
    assert sections["orders"]["note"] == "1 por entregar"


def test_another_companys_records_never_appear_in_the_file(client, sol_day, luna_day, agent):
    """Luna's customer shares nothing with Sol's: her records are not counted, not listed."""
    day = sol_day
    # Even a record of another company pointing at this contact (which the services refuse)
    # would not be shown: the file reads the contact's own company only.
    Case.objects.filter(pk=luna_day.case.pk).update(contact=day.contact)
    client.force_login(agent)

    page = client.get(change_url(day.contact)).content.decode()

    assert luna_day.case.reference not in page
    assert luna_day.appointment.reference not in page
    assert luna_day.quote.reference not in page
    assert file_of(client, day.contact)["cases"]["total"] == 1


def test_staff_of_another_company_cannot_open_the_file(client, sol_day, luna_agent):
    client.force_login(luna_agent)

    page = client.get(change_url(sol_day.contact), follow=True)

    assert sol_day.appointment.reference not in page.content.decode()
    assert "contact_file" not in (page.context or {})


def test_a_sandbox_customers_file_shows_what_its_outbox_kept_for_them(
    client, make_company, make_staff
):
    """A sandbox sends nothing for real; its outbox is everything its customer would have
    received, whatever sent it. A production company's file has no outbox section."""
    sandbox = make_company(name="Pruebas", environment=Company.Environment.SANDBOX)
    ana = contact_create(company=sandbox, first_name="Ana", phone="+34600111222")
    bea = contact_create(company=sandbox, first_name="Bea", email="bea@example.com")
    OutboxMessage.objects.create(
        company=sandbox, channel="sms", destination=ana.phone, body="Su código es 123456"
    )
    OutboxMessage.objects.create(
        company=sandbox, channel="email", destination=bea.email, subject="Su cotización"
    )
    client.force_login(make_staff("agente.pruebas", sandbox, "agent"))

    section = file_of(client, ana)["outbox"]

    assert section["total"] == 1
    assert [row["cells"][2:] for row in section["rows"]] == [[ana.phone, "Su código es 123456"]]
    assert client.get(section["list_url"]).context["cl"].result_count == 1


def test_a_production_customers_file_has_no_outbox(client, sol_day, agent):
    client.force_login(agent)

    assert "outbox" not in file_of(client, sol_day.contact)


def test_the_contact_opened_in_a_popup_from_an_autocomplete_shows_only_the_form(
    client, sol_day, agent
):
    client.force_login(agent)

    page = client.get(change_url(sol_day.contact), {"_popup": "1"})

    assert page.status_code == 200
    assert "contact_file" not in page.context
    assert sol_day.appointment.reference not in page.content.decode()


def test_a_role_without_sales_sees_no_quotes_orders_or_opportunities(client, sol_day, agent):
    """A company that takes the sales permissions off its agents' role (say, receptionists who
    only book): the file shows no sales section, no quote, and offers no new quote."""
    sales = Permission.objects.filter(content_type__app_label="sales")
    Group.objects.get(name="agent").permissions.remove(*sales)
    client.force_login(agent)

    page = client.get(change_url(sol_day.contact))
    sections = {s["key"] for s in page.context["contact_file"]}

    assert sections.isdisjoint({"quotes", "orders", "opportunities", "quote_emails"})
    assert {"appointments", "cases", "conversations"} <= sections
    assert sol_day.quote.reference not in page.content.decode()
    actions = [a["url"] for a in page.context["contact_file_actions"]]
    assert not any("/sales/" in url for url in actions)


def test_the_actions_are_those_the_role_may_take(client, sol_day, agent, supervisor):
    """Agents book and open cases; quotes and opportunities are created by supervisors
    (sales' roles)."""
    client.force_login(agent)
    agent_actions = {a["url"].split("?")[0] for a in _actions(client, sol_day.contact)}
    client.force_login(supervisor)
    supervisor_actions = {a["url"].split("?")[0] for a in _actions(client, sol_day.contact)}

    assert agent_actions == {"/admin/agenda/appointment/add/", "/admin/support/case/add/"}
    assert supervisor_actions == agent_actions | {
        "/admin/sales/quote/add/",
        "/admin/sales/opportunity/add/",
    }


def _actions(client, contact) -> list[dict]:
    return client.get(change_url(contact)).context["contact_file_actions"]


@pytest.mark.parametrize(
    "path",
    ["/admin/agenda/appointment/add/", "/admin/sales/quote/add/", "/admin/support/case/add/"],
)
def test_each_action_opens_its_add_form_with_the_contact_preselected(
    client, sol_day, sol_admin, path
):
    client.force_login(sol_admin)
    contact = sol_day.contact
    action = next(a for a in _actions(client, contact) if a["url"].startswith(path))

    page = client.get(action["url"])

    assert page.status_code == 200
    form = page.context["adminform"].form
    assert str(form["contact"].value()) == str(contact.pk)
    assert str(form["company"].value()) == str(contact.company_id)
    # The autocomplete widget shows the customer chosen, not an empty box.
    selected = re.search(
        r'<select name="contact"[^>]*>.*?<option value="(\d+)" selected>([^<]*)</option>',
        page.content.decode(),
        re.S,
    )
    assert selected is not None and selected.groups() == (str(contact.pk), str(contact))


def test_booking_from_the_file_books_the_customer(client, sol_day, agent):
    day = sol_day
    client.force_login(agent)
    action = next(a for a in _actions(client, day.contact) if "appointment" in a["url"])
    local = (timezone.now() + timedelta(days=2)).astimezone(day.company.tz)
    form = client.get(action["url"]).context["adminform"].form

    client.post(
        action["url"],
        {
            "company": form["company"].value(),
            "contact": form["contact"].value(),
            "service": day.service.pk,
            "professional": day.professional.pk,
            "day": local.date().isoformat(),
            "at": "10:00",
        },
    )

    assert file_of(client, day.contact)["appointments"]["total"] == 2


def _history(day, n: int) -> None:
    """n more of each kind of record for the customer."""
    for i in range(n):
        book(day, -24 * (i + 2))
        quote_create(company=day.company, contact=day.contact, items=[_item(day)])
        case_open(company=day.company, contact=day.contact, subject=f"Caso {i}", description="x")
        conversation = Conversation.objects.create(
            company=day.company, external_id=f"c-{uuid.uuid4().hex[:8]}", contact=day.contact
        )
        SecurityEvent.objects.create(
            company=day.company,
            conversation_key=conversation.external_id,
            kind=SecurityEvent.Kind.IDENTITY_SWITCH,
            contact=day.contact,
        )


def _item(day) -> QuoteItem:
    return QuoteItem(day.quote.lines.first().sku, 1)


def test_the_file_takes_a_bounded_number_of_queries_however_long_the_history(
    client, sol_day, agent, django_assert_max_num_queries
):
    """Each kind costs its count and its latest rows (appointments: the next and the last),
    never a query per record: twelve more of each cost not one query more."""
    client.force_login(agent)
    client.get(change_url(sol_day.contact))  # the session and the permissions' first reads
    with CaptureQueriesContext(connection) as short:
        client.get(change_url(sol_day.contact))
    _history(sol_day, 12)

    with django_assert_max_num_queries(len(short.captured_queries)):
        page = client.get(change_url(sol_day.contact))
    assert file_of(client, sol_day.contact)["cases"]["total"] == 13
    assert page.status_code == 200
    # And the whole page, file included, within a budget: 37 queries when written (11 of the
    # admin's own, two per kind of the file, three for the appointments; the case and quote
    # messages added two kinds).
    with django_assert_max_num_queries(40):
        client.get(change_url(sol_day.contact))
