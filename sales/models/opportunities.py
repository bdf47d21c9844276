"""Opportunities: a potential sale the sales team follows, with guarded states.

State fields are protected django-fsm-2 fields: only the transition methods change them, and
only the services in sales.services call those, under a row lock.
"""

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django_fsm import FSMField, FSMModelMixin, transition
from django_fsm_log.decorators import fsm_log_by, fsm_log_description

from core.models import Company, Contact, Conversation
from sales.models.catalogue import currency_clean, money_field


class Opportunity(FSMModelMixin, models.Model):
    """A potential sale the sales team follows, from first contact to won or lost."""

    class State(models.TextChoices):
        NEW = "new", _("New")
        QUALIFIED = "qualified", _("Qualified")
        PROPOSAL = "proposal", _("Proposal")
        NEGOTIATION = "negotiation", _("Negotiation")
        WON = "won", _("Won")
        LOST = "lost", _("Lost")

    OPEN_STATES = (State.NEW, State.QUALIFIED, State.PROPOSAL, State.NEGOTIATION)
    CLOSED_STATES = (State.WON, State.LOST)

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="opportunities", verbose_name=_("company")
    )
    reference = models.CharField(_("reference"), max_length=16, unique=True, editable=False)
    contact = models.ForeignKey(
        Contact, on_delete=models.PROTECT, related_name="opportunities", verbose_name=_("contact")
    )
    title = models.CharField(_("title"), max_length=200)
    notes = models.TextField(_("notes"), blank=True, help_text=_("What the customer asked for."))
    amount = money_field(_("amount"), default=Decimal(0))
    currency = models.CharField(_("currency"), max_length=3)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="sales_opportunities",
        verbose_name=_("owner"),
    )
    # When the current owner took it (a lead waits, highlighted past the company's pickup
    # time, until someone does: sales.selectors.leads_waiting).
    assigned_at = models.DateTimeField(_("assigned"), null=True, blank=True, editable=False)
    lost_reason = models.CharField(_("lost reason"), max_length=300, blank=True)
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("conversation"),
    )
    state = FSMField(_("stage"), default=State.NEW, choices=State.choices, protected=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    closed_at = models.DateTimeField(_("closed"), null=True, blank=True, editable=False)
    # The sales staff's email about the new opportunity (sales.services.lead_notice): sent
    # once after commit, or refused for good with the reason kept; the sweep resends the rest.
    team_notified_at = models.DateTimeField(
        _("sales staff notified"), null=True, blank=True, editable=False
    )
    team_notice_error = models.CharField(
        _("sales staff email error"), max_length=200, blank=True, editable=False
    )
    # The email to the salesperson it was assigned to (sales.services.lead_notice): once per
    # assignment (assigning it again clears both), or refused for good with the reason kept.
    owner_notified_at = models.DateTimeField(
        _("owner notified"), null=True, blank=True, editable=False
    )
    owner_notice_error = models.CharField(
        _("owner email error"), max_length=200, blank=True, editable=False
    )

    class Meta:
        verbose_name = _("opportunity")
        verbose_name_plural = _("opportunities")
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["company", "state"])]

    def __str__(self) -> str:
        return f"{self.reference} · {self.title}"

    def clean(self) -> None:
        self.currency = currency_clean(self.currency)

    @property
    def is_closed(self) -> bool:
        return self.state in self.CLOSED_STATES

    @fsm_log_by
    @transition(
        field=state, source=State.NEW, target=State.QUALIFIED, custom={"label": _("Qualify")}
    )
    def qualify(self, by=None) -> None:
        pass

    @fsm_log_by
    @transition(
        field=state,
        source=State.QUALIFIED,
        target=State.PROPOSAL,
        custom={"label": _("Move to proposal")},
    )
    def propose(self, by=None) -> None:
        pass

    @fsm_log_by
    @transition(
        field=state,
        source=State.PROPOSAL,
        target=State.NEGOTIATION,
        custom={"label": _("Move to negotiation")},
    )
    def negotiate(self, by=None) -> None:
        pass

    @fsm_log_by
    @transition(field=state, source=OPEN_STATES, target=State.WON, custom={"label": _("Win")})
    def win(self, by=None) -> None:
        pass

    @fsm_log_by
    @fsm_log_description
    @transition(
        field=state, source=OPEN_STATES, target=State.LOST, custom={"label": _("Mark lost")}
    )
    def lose(self, by=None, description=None) -> None:
        pass


# How a state reads to the customer (Spanish source text, translated per company); the admin
# keeps the choice labels above.
OPPORTUNITY_STATE_LABELS: dict[str, Promise] = {
    Opportunity.State.NEW: _("nueva"),
    Opportunity.State.QUALIFIED: _("calificada"),
    Opportunity.State.PROPOSAL: _("en propuesta"),
    Opportunity.State.NEGOTIATION: _("en negociación"),
    Opportunity.State.WON: _("ganada"),
    Opportunity.State.LOST: _("perdida"),
}
