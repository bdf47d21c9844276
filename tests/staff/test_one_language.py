"""One language, one format: a Spanish company's staff read every admin page in Spanish and its
customers every message in Spanish; an English company's, in English; and money, dates and
times have the one shape core.l10n writes in that language.

The walk uses Django's test client on every page the admin registers for a seeded company (the
dashboard, each app's index, each model's list, add page, change page of one of the company's
rows, its history and delete confirmation, and the models' own pages), as the company's
administrator, and renders every message a customer or staff member is sent. A page fails on
a common word of the other language, or on a date, time or amount in another shape. What the
company typed (names, subjects, descriptions: the seed is in Spanish for both) is taken out
first, field by field.
"""

import html
import importlib
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib import admin
from django.db import models
from django.template.loader import render_to_string
from django.urls import URLPattern
from django.utils import timezone, translation

from agenda.appointment_messages import message_text as appointment_message_text
from agenda.models import AppointmentMessage
from core.l10n import date_shown, datetime_shown, money_shown
from core.management.commands.seed_sandbox import CONTACTS
from core.models import Conversation, SecurityEvent, VerificationChallenge
from core.security import _notice_text as security_notice_text
from core.services import contact_create
from core.verification.delivery import _message_text as code_message_text
from core.verification.issue import challenge_issue
from sales.models import Opportunity, Quote
from sales.services.lead_notice import _notice_text as lead_notice_text
from sales.services.quote_email import _quote_email
from support.case_messages import message_text as case_message_text
from support.models import Case, CaseMessage
from tests import factories

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

# Common words of each language that the other never uses. A page of the other language
# shows none of them once its company's own data is taken out.
ENGLISH_WORDS = set(
    [
        "the",
        "and",
        "of",
        "to",
        "with",
        "without",
        "for",
        "this",
        "that",
        "these",
        "is",
        "are",
        "was",
        "were",
        "has",
        "have",
        "not",
        "yes",
        "save",
        "delete",
        "add",
        "change",
        "view",
        "history",
        "search",
        "filter",
        "select",
        "selected",
        "apply",
        "cancel",
        "cancelled",
        "appointment",
        "appointments",
        "customer",
        "customers",
        "contact",
        "contacts",
        "company",
        "companies",
        "quote",
        "quotes",
        "case",
        "cases",
        "state",
        "status",
        "sent",
        "printed",
        "locked",
        "stored",
        "written",
        "phone",
        "document",
        "date",
        "time",
        "today",
        "tomorrow",
        "yesterday",
        "week",
        "day",
        "days",
        "hours",
        "minutes",
        "new",
        "open",
        "closed",
        "resolved",
        "draft",
        "accepted",
        "rejected",
        "expired",
        "pending",
        "failed",
        "queued",
        "true",
        "false",
        "none",
        "all",
        "back",
        "next",
        "previous",
        "home",
        "password",
        "user",
        "users",
        "group",
        "groups",
        "permissions",
        "action",
        "actions",
        "run",
        "message",
        "messages",
        "moved",
        "by",
        "from",
        "at",
        "or",
        "show",
        "hide",
        "more",
        "less",
        "price",
        "stock",
        "service",
        "services",
        "professional",
        "professionals",
        "identified",
        "via",
        "reason",
        "when",
        "who",
        "what",
        "where",
        "why",
        "send",
        "resend",
        "revoke",
        "revoked",
        "attended",
        "scheduled",
        "booked",
        "confirmation",
        "reminder",
    ]
)
SPANISH_WORDS = set(
    [
        "de",
        "del",
        "la",
        "las",
        "el",
        "los",
        "y",
        "con",
        "sin",
        "para",
        "por",
        "una",
        "que",
        "cita",
        "citas",
        "cliente",
        "clientes",
        "empresa",
        "empresas",
        "cotización",
        "cotizaciones",
        "caso",
        "casos",
        "estado",
        "enviado",
        "enviada",
        "guardar",
        "añadir",
        "eliminar",
        "cambiar",
        "buscar",
        "filtrar",
        "seleccione",
        "hoy",
        "mañana",
        "ayer",
        "semana",
        "lunes",
        "martes",
        "miércoles",
        "jueves",
        "viernes",
        "sábado",
        "domingo",
        "enero",
        "febrero",
        "marzo",
        "abril",
        "mayo",
        "junio",
        "julio",
        "agosto",
        "septiembre",
        "octubre",
        "noviembre",
        "diciembre",
        "horas",
        "minutos",
        "nuevo",
        "nueva",
        "abierto",
        "cerrado",
        "cancelada",
        "aceptada",
        "rechazada",
        "vencida",
        "borrador",
        "correo",
        "teléfono",
        "documento",
        "fecha",
        "hora",
        "mensaje",
        "mensajes",
        "ver",
        "todo",
        "todos",
        "ninguno",
        "sí",
        "también",
        "está",
        "servicio",
        "profesional",
        "motivo",
        "recordatorio",
        "agendada",
        "atendida",
    ]
)
OTHER_WORDS = {"es": ENGLISH_WORDS, "en": SPANISH_WORDS}

# What the company and its customers typed: names, subjects, descriptions, notes.
TYPED_FIELDS = {
    "name",
    "first_name",
    "last_name",
    "display_name",
    "subject",
    "description",
    "body",
    "title",
    "notes",
    "note",
    "details",
    "reason",
    "reason_details",
    "username",
    "email",
    "unit",
    "slug",
}

# Shapes of dates, times and amounts each language must not show (core.l10n writes the other).
WRONG_SHAPES = {
    "es": [
        r"\b\d{4}-\d{2}-\d{2}\b",  # an ISO date
        r"\b\d{1,2} de [a-z]+ de \d{4}\b",  # Django's long Spanish date
        r"\b\d{1,2}:\d{2} ?[ap]\.?m\.?",  # a 12-hour clock
    ],
    "en": [
        r"\b\d{1,2}/\d{1,2}/\d{4}\b",  # a day-first or month-first date
        r"\b(?:January|February|March|April|May|June|July|August|September|October|"
        r"November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\.? \d{1,2}, \d{4}",
        r"\b\d{1,2}:\d{2} ?[ap]\.?m\.?",
    ],
}
# Every language: a time to the second outside a log of seconds, a stored timestamp, a zone
# named on a page of one zone, and an amount not written by the money formatter.
ANY_WRONG_SHAPES = [
    r"\d{2}:\d{2}:\d{2}(?:\.\d+)?[+-]\d{2}:\d{2}",
    r"\d{2}:\d{2}:\d{2}\.\d+",
    r"\b\d{1,2}:\d{2} (?:CET|CEST|UTC|GMT)\b",
]
# Amounts as core.l10n writes them ("1.077,23\u00a0€", "€1,077.23"), and the shapes of the
# other conventions: a symbol on the wrong side, a code instead of the symbol ("53,33 EUR"),
# or a plain space where the formatter puts a no-break one (a plain space before a symbol is
# two cells of a table, and so not an amount's).
MONEY = {
    "es": r"\d[\d.,\u00a0]*\u00a0€",
    "en": r"€\d[\d.,]*",
}
MONEY_SHAPE = {
    "es": r"\d{1,3}(?:\.\d{3})*,\d{2}\u00a0€",
    "en": r"€\d{1,3}(?:,\d{3})*\.\d{2}",
}
WRONG_MONEY = {
    "es": [r"€\u00a0?\d", r"\d[ \u00a0]?EUR\b", r"\d€"],
    "en": [r"\d\u00a0?€", r"\d[ \u00a0]?EUR\b", r"EUR\u00a0?\d", r"€\u00a0\d"],
}


def seed_company(language: str):
    """A company of `language` with the sandbox's data, identified conversations, codes
    sent, a security event, and its administrator."""
    company = factories.company(
        name=f"Garante {language.upper()}", language=language, timezone="Europe/Madrid"
    )
    for data in CONTACTS:
        contact_create(company=company, **data)
    for app in ("agenda", "sales", "support"):
        importlib.import_module(f"{app}.sandbox").seed(company)
    ana = company.contacts.get(document_number=CONTACTS[0]["document_number"])
    conversation = Conversation.objects.create(company=company, external_id=f"conv-{language}")
    from core.identity.binding import identify_contact

    identify_contact(conversation=conversation, kind="phone", value=ana.phone)
    challenge_issue(contact=ana, channel="sms", conversation=conversation)
    locked = challenge_issue(contact=ana, channel="email")
    VerificationChallenge.objects.filter(pk=locked.pk).update(
        status=VerificationChallenge.Status.LOCKED, attempts=5
    )
    SecurityEvent.objects.create(
        company=company,
        conversation_key=conversation.external_id,
        kind=SecurityEvent.Kind.IDENTITY_SWITCH,
        contact=ana,
    )
    # What the rest of the admin lists: credentials, feeds, time off, policies, tool calls
    # (with their idempotency records and references seen).
    from agenda.feeds import calendar_feed_issue
    from agenda.models import Professional, TimeOff
    from core.models import StepUpPolicy
    from core.services import gateway_credential_issue
    from integration.services import integration_credential_issue
    from sales.selectors import sales_settings_for
    from tests.staff.trace_calls import call

    gateway_credential_issue(company=company, name="gateway")
    integration_credential_issue(company=company, name="erp")
    professional = Professional.objects.filter(company=company).first()
    calendar_feed_issue(company=company, professional=professional)
    starts = timezone.now() + timedelta(days=20)
    TimeOff.objects.create(
        professional=professional, starts_at=starts, ends_at=starts + timedelta(hours=3)
    )
    StepUpPolicy.objects.get_or_create(company=company, defaults={"actions": ["accept_quote"]})
    sales_settings_for(company=company)
    talk = {"conversation_id": f"conv-tools-{language}"}
    document = ana.document_number
    call(company, "identify_contact", {"document": document}, idempotency_key="id", **talk)
    call(company, "list_services", {}, **talk)
    call(company, "list_my_quotes", {"identifier": document}, **talk)
    call(
        company,
        "open_case",
        {"identifier": document, "subject": "Factura", "description": "No llegó la factura."},
        idempotency_key=f"k-{language}-2",
        **talk,
    )
    user = factories.staff_member(f"admin-{language}", company, "admin")
    return company, user


def typed_values() -> set[str]:
    """Every value typed into a TYPED_FIELDS text field, in any table."""
    from django.apps import apps

    values: set[str] = set()
    for model in apps.get_models():
        names = [
            f.name
            for f in model._meta.get_fields()
            if isinstance(f, (models.CharField, models.TextField))
            and f.name in TYPED_FIELDS
            and not f.choices
        ]
        for row in model._default_manager.values_list(*names) if names else []:
            values.update(v for v in row if v)
    return values


def visible_text(page: str) -> str:
    """What a reader sees or hears: text, and the titles, labels, placeholders, image
    descriptions and button captions of elements."""
    page = re.sub(r"(?is)<(script|style|textarea|select)\b.*?</\1>", " ", page)
    page = re.sub(r"(?s)<!--.*?-->", " ", page)
    # Django writes its yes/no icons' alt text as the Python value ("True") whatever the
    # language, and only its private _boolean_icon could change that on the server: the page's
    # script (core/static/core/admin_names.js) names them in the page's language instead.
    page = re.sub(
        r'(<img src="[^"]*/icon-(?:yes|no|unknown)\.svg") alt="(?:True|False|None)"', r"\1", page
    )
    said = re.findall(r'\b(?:title|placeholder|aria-label|alt)="([^"]*)"', page)
    said += re.findall(r'<input[^>]*type="(?:submit|button)"[^>]*value="([^"]*)"', page)
    text = re.sub(r"(?s)<[^>]+>", " ", page)
    # Spaces collapsed, but not the no-break space money and dates are written with.
    return re.sub(r"[ \t\r\n]+", " ", html.unescape(" ".join([text, *said])))


def problems(text: str, language: str, typed: set[str]) -> list[str]:
    text = re.sub(r"(?:https?://|/admin/)\S+", " ", text)  # addresses are not words
    text = re.sub(r"\b\w+_\w+\b", " ", text)  # nor names in code (the tools': accept_quote)
    # nor the JSON a tool was called with or answered, shown as it travelled (the API's)
    text = re.sub(r'\{\s*(?:"[^{}]*)?\}', " ", text)
    if typed:
        values = "|".join(re.escape(v) for v in sorted(typed, key=len, reverse=True))
        text = re.sub(rf"(?<!\w)(?:{values})(?!\w)", " ", text)
    found = []
    # Words, not codes: a reference such as "CS-6Y2PFE" holds no word.
    words = {w for w in re.findall(r"[^\W_]+", text.lower()) if not re.search(r"\d", w)}
    found += [f"word {w!r}" for w in sorted(words & OTHER_WORDS[language])]
    for shape in [*WRONG_SHAPES[language], *ANY_WRONG_SHAPES]:
        found += [f"shape {m!r}" for m in re.findall(shape, text)]
    for amount in re.findall(MONEY[language], text):
        if not re.fullmatch(MONEY_SHAPE[language], amount):
            found.append(f"amount {amount!r}")
    for shape in WRONG_MONEY[language]:
        found += [f"amount {m!r}" for m in re.findall(shape, text)]
    return found


def admin_pages(company, user) -> list[str]:
    """Every admin page of the company: the dashboard, app indexes, and per model its list,
    add page, and its row's change, history, delete and own pages."""
    pages = ["/admin/"]
    for model, model_admin in admin.site._registry.items():
        opts = model._meta
        base = f"/admin/{opts.app_label}/{opts.model_name}/"
        pages.append(f"/admin/{opts.app_label}/")
        row = _row_of(company, model)
        for pattern in model_admin.get_urls():
            if not isinstance(pattern, URLPattern):
                continue
            route = str(pattern.pattern)
            if "<" not in route:
                pages.append(base + route)
            elif row is not None and re.fullmatch(r"<path:object_id>/[\w/-]*", route):
                pages.append(base + route.replace("<path:object_id>", str(row.pk)))
    return list(dict.fromkeys(pages))


def _row_of(company, model):
    """The company's newest row of `model` (None if it has none or cannot tell whose)."""
    names = {f.name for f in model._meta.get_fields()}
    if model._meta.model_name == "company":
        return company
    for path in (
        "company",
        "professional__company",
        "case__company",
        "quote__company",
        "conversation__company",
        "price_list__company",
        "product__company",
        "user__memberships__company",
        "appointment__company",
        "contact__company",
    ):
        if path.split("__")[0] in names:
            try:
                return model._default_manager.filter(**{path: company}).order_by("-pk").first()
            except Exception:
                continue
    return None


def messages_sent(company) -> list[tuple[str, str]]:
    """Every kind of message a customer or a staff member of `company` is sent: (what, text)."""
    sent = []
    with translation.override(company.language), timezone.override(company.tz):
        example = AppointmentMessage.objects.filter(company=company).first()
        for kind in AppointmentMessage.Kind.values:
            fields = {
                f.attname: getattr(example, f.attname)
                for f in AppointmentMessage._meta.concrete_fields
                if f.name != "id"
            }
            message = AppointmentMessage(**{**fields, "kind": kind})
            sent.append((f"appointment {kind}", " ".join(appointment_message_text(message))))
        for message in CaseMessage.objects.filter(case__company=company):
            sent.append((f"case {message.kind}", " ".join(case_message_text(message))))
        for quote in Quote.objects.filter(company=company):
            sent.append((f"quote {quote.reference}", " ".join(_quote_email(quote))))
        for challenge in VerificationChallenge.objects.filter(company=company):
            for purpose in VerificationChallenge.Purpose.values:
                challenge.purpose = purpose
                sent.append((f"code {purpose}", " ".join(code_message_text(challenge, "123456"))))
        for opportunity in Opportunity.objects.filter(company=company):
            sent.append((f"lead {opportunity.reference}", " ".join(lead_notice_text(opportunity))))
        for event in SecurityEvent.objects.filter(company=company):
            sent.append((f"security {event.kind}", " ".join(security_notice_text(event))))
        case = Case.objects.filter(company=company).first()
        comment = case.comments.first()
        for template in ("support/email/case_opened.txt", "support/email/customer_comment.txt"):
            sent.append((template, render_to_string(template, {"case": case, "comment": comment})))
    return sent


@pytest.fixture(params=["es", "en"])
def seeded(request):
    return seed_company(request.param)


def test_the_formatter_writes_the_shapes_the_walk_expects():
    """The walk's money and date shapes are the formatter's own."""
    moment = timezone.now().replace(year=2026, month=12, day=5, hour=21, minute=54)
    for language in ("es", "en"):
        with translation.override(language):
            assert re.fullmatch(MONEY_SHAPE[language], money_shown(Decimal("1077.23"), "EUR"))
            assert re.fullmatch(MONEY_SHAPE[language], money_shown(Decimal("249"), "EUR"))
            shown = datetime_shown(moment, factories.MADRID)
            assert problems(shown, language, set()) == []
    with translation.override("es"):
        assert datetime_shown(moment, factories.MADRID) == "05/12/2026 22:54"
        assert date_shown(moment.date()) == "05/12/2026"
        assert money_shown(Decimal("1077.23"), "EUR") == "1.077,23\u00a0€"
    with translation.override("en"):
        assert datetime_shown(moment, factories.MADRID) == "2026-12-05 22:54"
        assert money_shown(Decimal("1077.23"), "EUR") == "€1,077.23"


def test_every_admin_page_speaks_the_companys_language_in_its_formats(client, seeded):
    company, user = seeded
    client.force_login(user)
    typed = typed_values()
    failures, walked = {}, 0
    for url in admin_pages(company, user):
        response = client.get(url)
        if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
            continue
        walked += 1
        found = problems(visible_text(response.content.decode()), company.language, typed)
        if found:
            failures[url] = found
    assert walked > 80, "the walk reached too few pages"
    assert failures == {}


def test_every_message_speaks_the_companys_language_in_its_formats(seeded):
    company, _user = seeded
    typed = typed_values()
    sent = messages_sent(company)
    kinds = {what.split(" ")[0] for what, _ in sent}
    assert kinds >= {"appointment", "case", "quote", "code", "lead", "security"}
    failures = {
        what: found for what, text in sent if (found := problems(text, company.language, typed))
    }
    assert failures == {}


def test_save_messages_read_well_for_a_feminine_record_and_quote_states_agree(client):
    company, user = seed_company("es")
    client.force_login(user)
    from sales.models import PriceList
    from tests.admin_pages import change_form_data, change_url

    price_list = PriceList.objects.filter(company=company).first()  # "lista de precios"
    saved = client.post(change_url(price_list), change_form_data(client, price_list), follow=True)
    said = re.sub(r"<[^>]+>", "", " ".join(str(m) for m in saved.context["messages"]))
    quotes = client.get("/admin/sales/quote/").content.decode()

    assert f"Se ha guardado «{price_list}» (lista de precios)." in said
    assert not any(w in said for w in ("El lista", "fue agregado", "se cambió"))
    with translation.override("es"):
        assert str(Quote.State.SENT.label) == "Enviada"
        assert str(Quote.State.ACCEPTED.label) == "Aceptada"
    assert "Enviado" not in visible_text(quotes)


def test_a_staff_member_reads_the_admin_in_the_companys_language_whatever_the_browser(
    client, make_company
):
    english = make_company(language="en")
    user = factories.staff_member("lee", english, "admin")
    client.force_login(user)

    page = client.get("/admin/", HTTP_ACCEPT_LANGUAGE="es").content.decode()

    assert "Today at a glance" in page
    assert "De un vistazo" not in page
    assert client.get("/admin/", HTTP_ACCEPT_LANGUAGE="es")["Content-Language"] == "en"


def test_the_companys_language_is_the_requests_only(client, make_company):
    english = make_company(language="en")
    client.force_login(factories.staff_member("leo", english, "admin"))

    with translation.override("es"):
        client.get("/admin/", HTTP_ACCEPT_LANGUAGE="es")
        # What runs next in the thread (a task, a test) speaks its own language, not the page's.
        assert translation.get_language() == "es"


def test_a_staff_member_who_chose_a_language_keeps_it(client, make_company, settings):
    spanish = make_company(language="es")
    user = factories.staff_member("lena", spanish, "admin")
    client.force_login(user)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"

    assert client.get("/admin/")["Content-Language"] == "en"


def test_times_past_a_day_ago_keep_the_one_shape():
    yesterday = timezone.now() - timedelta(days=1)
    with translation.override("es"):
        assert re.fullmatch(r"\d{2}/\d{2}/\d{4} \d{2}:\d{2}", datetime_shown(yesterday))
