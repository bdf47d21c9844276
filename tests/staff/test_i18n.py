"""Spanish and English: customers read Spanish messages in English when their company speaks
English, and staff read the admin in Spanish by default (English on request)."""

import ast
import gettext
import re
from pathlib import Path

import pytest
from django.utils import translation

from core.errors import PermissionRefused
from core.services import gateway_credential_issue
from tests.conftest import McpClient
from tests.factories import ANA_DOCUMENT
from tests.staff.trace_calls import call
from tooling import mcp as mcp_module

ROOT = Path(__file__).resolve().parents[2]
LOCALE = ROOT / "locale"


def po_entries(path: Path) -> dict[str, str]:
    """msgid -> msgstr of a .po file (no plurals in our catalogs); a msgid with a context is
    keyed as gettext keys it, "context\x04msgid"."""
    entries: dict[str, str] = {}
    current: dict[str, str] = {}
    key = None
    for line in [*path.read_text(encoding="utf-8").splitlines(), ""]:
        if line.startswith(("msgctxt ", "msgid ", "msgstr ")):
            key, _, literal = line.partition(" ")
            current[key] = ast.literal_eval(literal)
        elif line.startswith('"') and key:
            current[key] += ast.literal_eval(line)
        elif not line.strip():
            if current.get("msgid"):
                context = current.get("msgctxt")
                msgid = f"{context}\x04{current['msgid']}" if context else current["msgid"]
                entries[msgid] = current.get("msgstr", "")
            current, key = {}, None
    return entries


@pytest.mark.parametrize("language", ["en", "es"])
def test_the_committed_catalogs_are_compiled_from_the_current_po_files(language):
    folder = LOCALE / language / "LC_MESSAGES"
    with open(folder / "django.mo", "rb") as compiled:
        catalog = gettext.GNUTranslations(compiled)

    translated = {k: v for k, v in po_entries(folder / "django.po").items() if v}

    assert translated, "an empty catalog"
    stale = {k: v for k, v in translated.items() if catalog.gettext(k) != v}
    assert stale == {}


def test_with_english_a_spanish_user_message_comes_out_in_english():
    error = PermissionRefused()

    with translation.override("en"):
        english = error.as_dict()["user_message"]
    with translation.override("es"):
        spanish = error.as_dict()["user_message"]

    assert english == "I cannot do that for the person I am talking to."
    assert spanish == "No puedo hacer eso para la persona que me habla."


@pytest.mark.django_db
def test_a_company_that_speaks_english_gets_tool_errors_in_english(make_company):
    english = make_company(language="en")
    spanish = make_company(language="es")
    arguments = {"identifier": ANA_DOCUMENT, "appointment": "AP-7K2F9Q"}

    in_english = call(english, "cancel_appointment", arguments, idempotency_key="k-en")
    in_spanish = call(spanish, "cancel_appointment", arguments, idempotency_key="k-es")

    assert in_english.body["code"] == in_spanish.body["code"]
    assert in_english.body["user_message"] == (
        "First I need to identify you with your ID document, phone or email."
    )
    assert in_spanish.body["user_message"] == (
        "Antes necesito identificarle con su documento, teléfono o correo."
    )


@pytest.mark.django_db(transaction=True)
def test_over_mcp_every_answer_to_a_customer_is_in_the_companys_language(
    live_server, make_company, monkeypatch
):
    english = make_company(language="en")
    token = gateway_credential_issue(company=english, name="gateway")[1]
    with McpClient(live_server.url, token, "conv-english") as mcp:
        invalid = mcp.call("list_services", {"limit": "many"}).json()["result"]
        invalid = invalid["structuredContent"]
        refused = mcp.call(
            "cancel_appointment",
            {"identifier": ANA_DOCUMENT, "appointment": "AP-7K2F9Q"},
            key="k-en",
        ).json()
        monkeypatch.setattr(mcp_module, "call_tool", _explode)
        failed = mcp.call("list_services", {}).json()

    assert invalid["user_message"] == "Some details are missing or not valid."
    assert refused["result"]["structuredContent"]["user_message"] == (
        "First I need to identify you with your ID document, phone or email."
    )
    assert failed["result"]["structuredContent"]["user_message"] == (
        "Our system is not available right now. Please try again later."
    )


def _explode(*args, **kwargs):
    raise RuntimeError("unexpected")


@pytest.mark.django_db(transaction=True)
def test_the_admin_speaks_spanish_by_default_and_english_on_request(
    client, sol_day, agent, settings
):
    client.force_login(agent)

    spanish = client.get("/admin/").content.decode()
    spanish_list = client.get("/admin/agenda/appointment/").content.decode()
    # A Spanish company's staff read Spanish whatever their browser asks; English when they
    # choose it (Django's language cookie).
    browser = client.get("/admin/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"
    english = client.get("/admin/").content.decode()

    assert "Citas de hoy" in spanish
    assert "Administración de Garante" in spanish
    assert "Casos abiertos" in spanish
    assert re.search(r"Referencia\s*</a>", spanish_list)
    assert "Agendada" in spanish_list
    assert "Today&#x27;s appointments" in english  # the apostrophe escaped, as templates do
    assert "Citas de hoy" not in english
    assert "Citas de hoy" in browser
