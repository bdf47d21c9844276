"""The admin reads alike everywhere: settled and read-only records offer neither Save nor
Delete, every page says its time zone and shows its rows' times in their company's, money has
its currency's decimals and symbol, masked phones follow the company's language, and every
field is named in the staff's language."""

import re
from decimal import Decimal

import pytest
from django.apps import apps
from django.utils import timezone, translation
from django.utils.functional import Promise

from agenda.services import appointment_cancel
from core.models import VerificationChallenge
from core.normalize import mask_phone
from core.verification.issue import challenge_issue
from tests.admin_pages import change_url
from tests.factories import ANA_PHONE

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_cancelled_appointment_offers_neither_save_nor_delete(client, sol_day, agent):
    appointment = appointment_cancel(
        company=sol_day.company, reference=sol_day.appointment.reference, enforce_cutoff=False
    )
    client.force_login(agent)

    page = client.get(change_url(appointment)).content.decode()

    assert 'name="_save"' not in page and 'name="_continue"' not in page
    assert "deletelink" not in page
    assert 'name="_fsm_transition_to"' not in page  # no transition leaves "cancelled"


def test_a_scheduled_appointment_offers_only_the_transitions_its_state_allows(
    client, sol_day, agent
):
    client.force_login(agent)

    page = client.get(change_url(sol_day.appointment)).content.decode()

    offered = set(re.findall(r'name="_fsm_transition_to"\s+value="(\w+)"', page))
    assert offered == {"cancel", "reschedule", "mark_attended", "mark_no_show"}


@pytest.mark.parametrize("model", ["securityevent", "verificationchallenge", "toolcall"])
def test_records_that_must_not_change_have_no_save_delete_or_bulk_delete(
    client, sol_day, sol_admin, model
):
    from tests.staff.trace_calls import call

    challenge = challenge_issue(contact=sol_day.contact, channel="sms")
    call(sol_day.company, "list_services", {}, conversation_id="conv-r")
    from tooling.models import ToolCall

    obj = {
        "securityevent": sol_day.event,
        "verificationchallenge": challenge,
        "toolcall": ToolCall.objects.get(company=sol_day.company),
    }[model]
    client.force_login(sol_admin)

    page = client.get(change_url(obj)).content.decode()
    listing = client.get(f"/admin/{obj._meta.app_label}/{model}/").content.decode()
    delete = client.post(change_url(obj).replace("/change/", "/delete/"), {"post": "yes"})

    assert 'name="_save"' not in page and "deletelink" not in page
    assert 'value="delete_selected"' not in listing
    assert delete.status_code == 403
    assert type(obj).objects.filter(pk=obj.pk).exists()


def test_pages_say_their_zone_and_lists_show_each_row_in_its_companys(client, sol_day, agent):
    client.force_login(agent)
    zone = sol_day.company.tz

    detail = client.get(change_url(sol_day.case)).content.decode()
    listing = client.get("/admin/support/case/").content.decode()

    assert f"Fechas y horas en hora de {sol_day.company.timezone}" in detail
    local = timezone.localtime(sol_day.case.created_at, zone)
    # One company's list is in its zone, named once under the title, not on every row.
    assert f"{local:%d/%m/%Y %H:%M}" in listing
    assert f"{local:%d/%m/%Y %H:%M} {local.tzname()}" not in listing


def test_a_superuser_list_of_several_companies_names_each_rows_zone(
    admin_client, sol_day, luna_day
):
    listing = admin_client.get("/admin/support/case/").content.decode()

    assert "cada fila en la zona horaria de su empresa" in listing
    for day in (sol_day, luna_day):
        local = timezone.localtime(day.case.created_at, day.company.tz)
        assert f"{local:%d/%m/%Y %H:%M} {local.tzname()}" in listing


def test_money_has_the_currencys_decimals_and_symbol(client, sol_day, sol_admin):
    client.force_login(sol_admin)
    total = sol_day.quote.total

    listing = client.get("/admin/sales/quote/").content.decode()
    detail = client.get(change_url(sol_day.quote)).content.decode()

    shown = f"{total:.2f}".replace(".", ",") + "\xa0€"
    assert shown in listing and shown in detail
    assert f"{total:.3f}".replace(".", ",") not in listing  # never three decimals for euros


def test_money_in_english_puts_the_symbol_first():
    from sales import money

    with translation.override("en"):
        assert money.shown(Decimal("249"), "EUR") == "€249.00"
    with translation.override("es"):
        assert money.shown(Decimal("249"), "EUR") == "249,00\xa0€"
        assert money.shown(Decimal("5"), "JPY") == "5\xa0JPY"


def test_masked_phones_are_worded_in_the_companys_language(make_company):
    from core.services import contact_create

    english = make_company(name="Sunny Salon", language="en")
    contact = contact_create(company=english, first_name="Amy", phone=ANA_PHONE)

    challenge = challenge_issue(contact=contact, channel="sms")

    assert challenge.masked_destination == "phone ending in 22"
    assert mask_phone(ANA_PHONE, "es") == "teléfono terminado en 22"
    assert VerificationChallenge.objects.get(pk=challenge.pk).masked_destination.endswith("22")


def test_every_field_of_garante_is_named_for_translation_and_in_spanish():
    untranslated = []
    for label in ("core", "agenda", "sales", "support", "tooling", "integration"):
        for model in apps.get_app_config(label).get_models():
            for field in model._meta.get_fields():
                if field.auto_created or not field.concrete:
                    continue
                if not isinstance(field.verbose_name, Promise):
                    untranslated.append(f"{model.__name__}.{field.name}")
    assert untranslated == []
    with translation.override("es"):
        from agenda.models import Appointment
        from sales.models import QuoteLine

        assert str(Appointment._meta.get_field("company").verbose_name) == "empresa"
        assert str(QuoteLine._meta.get_field("quote").verbose_name) == "cotización"


def test_the_header_has_no_link_to_a_site_that_does_not_exist(client, agent):
    client.force_login(agent)

    page = client.get("/admin/").content.decode()

    assert 'href="/"' not in page


def test_the_dashboard_lists_codes_locked_in_the_last_day(client, sol_day, supervisor):
    challenge = challenge_issue(contact=sol_day.contact, channel="sms")
    VerificationChallenge.objects.filter(pk=challenge.pk).update(
        status=VerificationChallenge.Status.LOCKED
    )
    challenge_issue(contact=sol_day.contact, channel="sms")  # a newer one, not locked
    client.force_login(supervisor)

    page = client.get("/admin/")
    panels = {p.key: p for p in page.context["dashboard_panels"]}

    assert panels["codes"].total == 1
    assert "status__exact=locked" in panels["codes"].more_url
    listed = client.get(panels["codes"].more_url)
    assert listed.status_code == 200
    assert list(listed.context["cl"].result_list) == [challenge]
