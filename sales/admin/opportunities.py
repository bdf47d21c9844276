"""Staff admin for the opportunity pipeline: each stage a button through sales.services."""

from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.http import HttpRequest
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
from core.models import Contact
from sales import money
from sales.models import Opportunity, Quote
from sales.services.opportunities import (
    CLOSED_READ_ONLY,
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
        return data


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
        "created_at",
    ]
    list_filter = ["state", "owner", "company"]
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

    def get_fields(self, request: HttpRequest, obj: Opportunity | None = None) -> list[str]:
        fields = ["company", "contact", "title", "notes", "amount", "currency", "owner"]
        if obj is None:
            return fields
        return ["reference", "state", *fields, "lost_reason", "conversation", "created_at"]

    def get_inlines(self, request: HttpRequest, obj: Opportunity | None) -> list:
        return self.inlines if obj is not None else []  # no history before it exists

    def get_readonly_fields(self, request: HttpRequest, obj: Opportunity | None = None) -> Any:
        readonly = super().get_readonly_fields(request, obj)
        if obj is None:
            return readonly
        closed = CLOSED_READ_ONLY if obj.is_closed else ()  # what it closed at
        return (*readonly, *self.readonly_on_change, *closed)

    def get_form(self, request: HttpRequest, obj: Opportunity | None = None, **kwargs: Any):
        form = super().get_form(request, obj, **kwargs)
        if "currency" in form.base_fields:
            form.base_fields["currency"].required = False
        return form

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "owner":
            users = get_user_model().objects.filter(is_staff=True, memberships__isnull=False)
            kwargs["queryset"] = (
                staff_scoped(request, users, "memberships__company").distinct().order_by("username")
            )
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
        )
        obj.pk, obj.reference = opportunity.pk, opportunity.reference
        obj._state.adding = False
