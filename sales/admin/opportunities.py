"""Staff admin for the opportunity pipeline: each stage a button through sales.services; new
leads with how long they have waited for someone to take them, assigned to one of the
company's sales staff on the form or with "Assign to me"; and each company's sales settings."""

from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from core.admin import (
    CompanyScopedAdmin,
    CsvExportAdmin,
    ServiceTransitionsAdmin,
    TransitionHistoryInline,
    contact_search_fields,
    staff_scoped,
)
from core.admin.confirmation import Confirmation, nothing_sent
from core.admin.localtime import local_datetime_shown
from core.dashboard import age_shown
from core.errors import GaranteError
from core.models import Contact
from core.roles import staff_company_ids
from sales import money
from sales.models import Opportunity, Quote, SalesSettings
from sales.selectors import (
    LEAD_WAITING,
    lead_overdue_filter,
    opportunities_with_lead_overdue,
    sales_staff,
)
from sales.services.opportunities import (
    CLOSED_READ_ONLY,
    opportunity_assign,
    opportunity_create,
    opportunity_details_set,
    opportunity_lose,
    opportunity_negotiate,
    opportunity_propose,
    opportunity_qualify,
    opportunity_win,
)


def _lose_effect(opportunity: Opportunity) -> list[str]:
    """Losing closes it and expires its open quotes (opportunity_lose); nobody is told."""
    quotes = list(
        Quote.objects.filter(opportunity=opportunity, state__in=Quote.OPEN_STATES)
        .order_by("pk")
        .values_list("reference", flat=True)
    )
    effect = [
        _("%(contact)s · %(amount)s")
        % {
            "contact": opportunity.contact,
            "amount": money.shown(opportunity.amount, opportunity.currency),
        },
        _("The opportunity is closed as lost."),
    ]
    if quotes:
        effect.append(
            ngettext(
                "Its open quote %(quotes)s expires with it.",
                "Its %(count)d open quotes expire with it: %(quotes)s.",
                len(quotes),
            )
            % {"count": len(quotes), "quotes": ", ".join(quotes)}
        )
    effect.append(nothing_sent(str(opportunity.contact)))
    return effect


class OpportunityForm(forms.ModelForm):
    class Meta:
        model = Opportunity
        fields = ["company", "contact", "title", "notes", "amount", "currency", "owner"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None and "amount" in self.fields:
            # The column keeps three decimals for every currency; staff type and read the
            # amount with its own currency's ("1077.23", never "1077.230").
            currency = self.instance.currency
            self.initial["amount"] = money.quantize(self.instance.amount, currency)
            self.fields["amount"].widget.attrs["step"] = str(
                Decimal(1).scaleb(-money.minor_units(currency))
            )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        company, contact = data.get("company"), data.get("contact")
        if company and contact and contact.company_id != company.pk:
            self.add_error("contact", _("That contact belongs to another company."))
        if not data.get("currency") and company is not None:
            data["currency"] = company.currency  # blank means the company's currency
        data["currency"] = currency = (data.get("currency") or "").upper()
        amount = data.get("amount")
        if amount is not None and currency and not money.is_exact(Decimal(amount), currency):
            self.add_error("amount", _("Too many decimals for %(c)s.") % {"c": currency})
        owner = data.get("owner")
        changed_owner = company and owner and "owner" in self.changed_data
        if changed_owner and not sales_staff(company_ids=[company.pk]).filter(pk=owner.pk).exists():
            self.add_error("owner", _("Choose one of the company's sales staff."))
        return data


class LeadListFilter(admin.SimpleListFilter):
    """The leads nobody has taken yet, and those of them past their company's pickup time."""

    title = _("lead")
    parameter_name = "lead"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        return [
            ("waiting", _("Nobody took it yet")),
            ("overdue", _("Past the pickup time")),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "waiting":
            return queryset.filter(LEAD_WAITING)
        if self.value() == "overdue":
            return queryset.filter(lead_overdue_filter(now=timezone.now()))
        return queryset


@admin.register(Opportunity)
class OpportunityAdmin(CsvExportAdmin, ServiceTransitionsAdmin, CompanyScopedAdmin):
    export_fields = [
        "reference",
        "title",
        "state",
        "contact__first_name",
        "contact__last_name",
        "contact__email",
        "amount",
        "currency",
        "owner__username",
        "created_at",
        "closed_at",
    ]
    autocomplete_fields = ["contact"]
    """The pipeline: filter by stage, move with the buttons, close as won or lost."""

    form = OpportunityForm
    fsm_services = {
        "qualify": lambda o, user: opportunity_qualify(opportunity=o, by=user),
        "propose": lambda o, user: opportunity_propose(opportunity=o, by=user),
        "negotiate": lambda o, user: opportunity_negotiate(opportunity=o, by=user),
        "win": lambda o, user: opportunity_win(opportunity=o, by=user),
        "lose": lambda o, user, reason: opportunity_lose(opportunity=o, reason=reason, by=user),
    }
    fsm_confirmations = {
        "lose": Confirmation(
            reasons=[
                ("price", _("Price")),
                ("competitor", _("Went with a competitor")),
                ("no_budget", _("No budget")),
                ("no_answer", _("No answer from the customer")),
            ],
            effect=_lose_effect,
            bulk_label=_("Mark the selected opportunities lost"),
        ),
    }
    list_display = [
        "reference",
        "title",
        "contact",
        "state",
        "amount_shown",
        "owner",
        "waiting",
        "created_at",
    ]
    list_filter = ["state", LeadListFilter, "owner", "company"]
    actions = ["assign_to_me"]
    list_select_related = ["contact", "owner"]
    search_fields = ["reference", "title", *contact_search_fields("contact__")]
    date_hierarchy = "created_at"
    inlines = [TransitionHistoryInline]
    readonly_on_change = [
        "reference",
        "company",
        "contact",
        "lost_reason",
        "conversation",
        "created_at",
        "closed_at",
        "assigned_at",
        "team_notice",
        "owner_notice",
    ]

    def settled(self, opportunity: Opportunity) -> bool:
        # A closed opportunity keeps its title and notes editable (its amount and stage do
        # not change, readonly_on_change); it is never deleted.
        return False

    def deletable(self, opportunity: Opportunity) -> bool:
        return opportunity.state not in Opportunity.CLOSED_STATES

    @admin.display(description=_("amount"), ordering="amount")
    def amount_shown(self, opportunity: Opportunity) -> str:
        return money.shown(opportunity.amount, opportunity.currency)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return opportunities_with_lead_overdue(super().get_queryset(request), now=timezone.now())

    @admin.display(description=_("waiting"), ordering="created_at")
    def waiting(self, opportunity: Opportunity) -> str:
        """How long a lead nobody took has waited; past the pickup time, said in red."""
        if opportunity.state != Opportunity.State.NEW or opportunity.owner_id is not None:
            return "—"
        age = age_shown(timezone.now() - opportunity.created_at)
        if not getattr(opportunity, "lead_overdue", False):
            return age
        return format_html(
            '<strong class="garante-overdue" style="color: var(--delete-button-bg, #ba2121)">'
            "{} · {}</strong>",
            age,
            _("past the pickup time"),
        )

    @admin.display(description=_("sales staff notified"))
    def team_notice(self, opportunity: Opportunity) -> str:
        if opportunity.team_notice_error:
            return _("not sent: %(error)s") % {"error": opportunity.team_notice_error}
        if opportunity.team_notified_at is None:
            return _("on its way")
        return local_datetime_shown(opportunity.team_notified_at, opportunity.company.tz)

    @admin.display(description=_("owner notified"))
    def owner_notice(self, opportunity: Opportunity) -> str:
        """Whether the salesperson it was assigned to was emailed (nobody is when they took it
        themselves: that time is the assignment's own)."""
        if opportunity.owner_id is None:
            return "—"
        if opportunity.owner_notice_error:
            return _("not sent: %(error)s") % {"error": opportunity.owner_notice_error}
        if opportunity.owner_notified_at is None:
            return _("on its way")
        if opportunity.owner_notified_at == opportunity.assigned_at:
            return _("they took it themselves")
        return local_datetime_shown(opportunity.owner_notified_at, opportunity.company.tz)

    @admin.action(description=_("Assign to me"), permissions=["change"])
    def assign_to_me(self, request: HttpRequest, queryset: QuerySet) -> None:
        """The staff member takes the selected opportunities (one of the company's sales staff
        only, as the form's owner field)."""
        taken = 0
        for opportunity in queryset.select_related("company"):
            try:
                opportunity_assign(opportunity=opportunity, owner=request.user, by=request.user)
            except GaranteError as refusal:
                self.message_user(
                    request, f"{opportunity.reference}: {refusal.user_message}", messages.ERROR
                )
                continue
            taken += 1
        if taken:
            self.message_user(
                request,
                ngettext(
                    "%(n)d opportunity assigned to you.",
                    "%(n)d opportunities assigned to you.",
                    taken,
                )
                % {"n": taken},
            )

    def get_fields(self, request: HttpRequest, obj: Opportunity | None = None) -> list[str]:
        fields = ["company", "contact", "title", "notes", "amount", "currency", "owner"]
        if obj is None:
            return fields
        if obj.is_closed:
            # Read-only once closed: shown by the money formatter, not as the stored decimal.
            fields[fields.index("amount")] = "amount_shown"
        return [
            "reference",
            "state",
            *fields,
            "assigned_at",
            "lost_reason",
            "conversation",
            "created_at",
            "team_notice",
            "owner_notice",
        ]

    def get_inlines(self, request: HttpRequest, obj: Opportunity | None) -> list:
        return self.inlines if obj is not None else []  # no history before it exists

    def get_readonly_fields(self, request: HttpRequest, obj: Opportunity | None = None) -> Any:
        readonly = super().get_readonly_fields(request, obj)
        if obj is None:
            return readonly
        # What it closed at; the amount is read as amount_shown (get_fields).
        closed = (*CLOSED_READ_ONLY, "amount_shown") if obj.is_closed else ()
        return (*readonly, *self.readonly_on_change, *closed)

    def get_form(self, request: HttpRequest, obj: Opportunity | None = None, **kwargs: Any):
        form = super().get_form(request, obj, **kwargs)
        if "currency" in form.base_fields:
            form.base_fields["currency"].required = False
        if obj is not None and "owner" in form.base_fields:
            # Only its own company's sales staff, and whoever owns it now (kept if their role
            # changed since, so the form still saves its other fields).
            staff = sales_staff(company_ids=[obj.company_id])
            owners = get_user_model().objects.filter(pk__in=staff.values("pk"))
            if obj.owner_id is not None:
                owners = owners | get_user_model().objects.filter(pk=obj.owner_id)
            form.base_fields["owner"].queryset = owners.distinct().order_by("username")
        return form

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "owner":
            # A new opportunity's company is chosen on the form: the sales staff of the staff
            # member's companies, each checked against the company chosen (OpportunityForm).
            kwargs["queryset"] = sales_staff(company_ids=staff_company_ids(request))
        if db_field.name == "contact":
            kwargs["queryset"] = staff_scoped(request, Contact.objects.all())
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Opportunity, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            # Only what the form changed: a full save would write back a stale stage. The
            # service refuses an amount changed after the opportunity closed (in another tab).
            opportunity_details_set(
                opportunity=obj,
                changes={field: getattr(obj, field) for field in form.changed_data},
                by=request.user,
            )
            return
        opportunity = opportunity_create(
            company=data["company"],
            contact=data["contact"],
            title=data["title"],
            notes=data.get("notes", ""),
            amount=data.get("amount") or Decimal(0),
            currency=data.get("currency") or None,
            owner=data.get("owner"),
            by=request.user,
        )
        obj.pk, obj.reference = opportunity.pk, opportunity.reference
        obj._state.adding = False


@admin.register(SalesSettings)
class SalesSettingsAdmin(CompanyScopedAdmin):
    """Each company's sales rules: how long a new lead may wait for someone to take it."""

    list_display = ["company", "lead_pickup_hours"]
