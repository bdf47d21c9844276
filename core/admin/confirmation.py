"""The confirmation page before a transition that cannot be undone or that tells the customer.

Staff cancelling an appointment, marking a no-show, rejecting a quote... press the button (or
choose the list action for several records) and get a page in the style of Django's delete
confirmation: each record with what will happen to it, in the staff member's language (who
is told, by which channel, or that nobody is), and a reason to choose from the action's short
list or to write. Only the page's own "Yes" applies it, record by record, through the same
service as every other path, with the reason; a refusal is shown alone, as a stale button's.

The page carries what each record was confirmed against (its state, and for some records the
fields whose change makes the confirmation stale, e.g. an appointment's start): a record that
changed while the page was open is refused and nothing is done to it, nor sent. The reason is
plain text (core.reasons); a choice from the list is written in the company's language, since
the customer may read it.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from django import forms
from django.contrib import messages
from django.contrib.admin import helpers
from django.contrib.admin.options import IS_POPUP_VAR
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import translation
from django.utils.functional import Promise
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext
from django_fsm import can_proceed

from core.errors import GaranteError
from core.reasons import REASON_MAX_LENGTH, reason_normalized, reason_problem

OTHER = "other"
CONFIRM_TEMPLATE = "admin/garante/confirm_transition.html"
# A page lists every record it confirms, each with its effect, for staff to read: "select all"
# over thousands of rows would be a page nobody reads, so larger selections are refused.
BULK_LIMIT = 100


@dataclass(frozen=True)
class Confirmation:
    """What a transition asks before it is applied.

    `reasons`: the action's short list (code, label), labels written so that they read well to
    staff in the history and to the customer in a message; "Other" (free text) is added.
    `effect(obj)`: what it does to `obj`, sentences in the active language (the staff
    member's): who is told and how, or that nobody is. `bulk_label`: the list action's name.
    `confirmed_against`: the fields whose change since the page was drawn makes it stale.
    `reason_required`: False for a transition whose note is optional (a resolution's note to
    the customer): the list and the words may both be left empty. `asks_reason`: False for
    one that takes no reason at all (sending a quote): the page states the effect and asks
    only "Yes".
    """

    reasons: Sequence[tuple[str, str | Promise]]
    effect: Callable[[Any], list[str]]
    bulk_label: str | Promise
    confirmed_against: tuple[str, ...] = ("state",)
    reason_required: bool = True
    asks_reason: bool = True
    details_label: str | Promise | None = None
    # A transition that can be undone (a resolved case reopens) but tells the customer: the
    # page does not say it cannot be undone.
    reversible: bool = False

    def token(self, obj: Model) -> str:
        """What `obj` is confirmed against, as the page carries it."""
        values = []
        for name in self.confirmed_against:
            value = getattr(obj, name)
            shown = value.isoformat() if isinstance(value, datetime) else str(value)
            values.append(f"{name}={shown}")
        return ";".join(values)

    def reason_text(self, code: str, details: str, language: str) -> str:
        """The reason as stored and told: the chosen label in `language` (the company's),
        with the details after it; the details alone for "other" or no choice."""
        if code in (OTHER, "", None):
            return details or ""
        with translation.override(language):
            label = str(dict(self.reasons)[code])
        return f"{label}: {details}" if details else label


class ConfirmationForm(forms.Form):
    """The reason: one of the action's list, or "other" with the text written; plain text of a
    bounded length (core.reasons), refused with the rule it breaks, never cleaned silently."""

    reason = forms.ChoiceField(label=_("Reason"), widget=forms.RadioSelect)
    details = forms.CharField(
        label=_("In your words"),
        required=False,
        strip=True,
        widget=forms.TextInput(attrs={"size": 60, "maxlength": REASON_MAX_LENGTH}),
    )

    def __init__(self, *args: Any, confirmation: Confirmation, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.confirmation = confirmation
        if not confirmation.asks_reason:
            del self.fields["reason"], self.fields["details"]
            return
        if confirmation.reason_required:
            self.fields["reason"].choices = [*confirmation.reasons, (OTHER, _("Other"))]
            # Formatted here, in the language of the request (not the one active at import).
            self.fields["details"].help_text = _(
                "Required for “Other”; optional otherwise. Plain text, at most %(max)d characters."
            ) % {"max": REASON_MAX_LENGTH}
        else:
            # Optional: no choice at all is a choice, and words alone are "other".
            self.fields["reason"].required = False
            self.fields["reason"].choices = [*confirmation.reasons]
            self.fields["details"].help_text = _(
                "Optional. Plain text, at most %(max)d characters."
            ) % {"max": REASON_MAX_LENGTH}
        if confirmation.details_label is not None:
            self.fields["details"].label = confirmation.details_label

    def clean_details(self) -> str:
        details = reason_normalized(self.cleaned_data.get("details", ""))
        problem = reason_problem(details)
        if problem == "reason_too_long":
            raise forms.ValidationError(
                _("The reason is too long: at most %(max)d characters, it has %(length)d."),
                code=problem,
                params={"max": REASON_MAX_LENGTH, "length": len(details)},
            )
        if problem == "reason_markup":
            raise forms.ValidationError(
                _(
                    "Write the reason as plain text: no HTML tags or codes such as &amp; "
                    "(the customer may read it)."
                ),
                code=problem,
            )
        if problem is not None:
            raise forms.ValidationError(
                _("The reason has characters that cannot be sent."), code=problem
            )
        return details

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if not self.confirmation.asks_reason:
            return {"reason": "", "details": ""}
        code, details = data.get("reason"), data.get("details")
        if code == OTHER and not details and "details" not in self.errors:
            self.add_error("details", _("With “Other”, write the reason in your words."))
        elif code and code != OTHER and details is not None:
            longest = len(self.confirmation.reason_text(code, details, translation.get_language()))
            if longest > REASON_MAX_LENGTH:
                self.add_error(
                    "details",
                    _("With the reason chosen it is too long: at most %(max)d characters.")
                    % {"max": REASON_MAX_LENGTH},
                )
        return data


@dataclass
class _Record:
    obj: Model
    url: str
    effect: list[str]
    token: str
    why_not: str = ""


class ConfirmedTransitionsAdmin:
    """The confirmation page of ServiceTransitionsAdmin's transitions named in
    `fsm_confirmations` (name -> Confirmation): their button opens it instead of acting, and
    each becomes a list action with the same page for the selected records."""

    fsm_confirmations: ClassVar[dict[str, Confirmation]] = {}
    # A transition the model allows from more states than staff may take it from here (a
    # quote's expiry: the sweep lapses drafts, but staff withdraw only a quote the customer
    # has): name -> the states its button shows on. Not named: every state the model allows.
    fsm_offered_from: ClassVar[dict[str, tuple[str, ...]]] = {}

    def offered_from(self, state: str, name: str) -> bool:
        """Whether staff are offered transition `name` from `state`."""
        states = self.fsm_offered_from.get(name)
        return states is None or state in states

    def can_offer(self, obj: Model, name: str) -> bool:
        """Whether transition `name` can apply to `obj` now and is staff's to take from here."""
        return can_proceed(getattr(obj, name)) and self.offered_from(obj.state, name)

    def confirmed(self, name: str | None) -> Confirmation | None:
        if name in self.fsm_services:
            return self.fsm_confirmations.get(name)
        return None

    # The button: the change form posts it, the page opens --------------------------------------

    def confirmation_redirect(self, obj: Model, name: str) -> HttpResponse:
        """Where the button of a confirmed transition leads: its confirmation page."""
        opts = self.model._meta
        return redirect(
            f"admin:{opts.app_label}_{opts.model_name}_transition",
            object_id=obj.pk,
            transition_name=name,
        )

    def confirmation_view(
        self, request: HttpRequest, object_id: str, transition_name: str
    ) -> HttpResponse:
        """The confirmation page of one record (the transition's URL), and its "Yes"."""
        confirmation = self.fsm_confirmations[transition_name]
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            return self.change_view(request, object_id)  # Django's answer to a missing object
        if not self.has_view_permission(request, obj):
            raise PermissionDenied
        change_url = self._change_url(obj)
        if self.settled(obj):
            self.refuse_settled(request, obj)
            return HttpResponseRedirect(change_url)
        transition = self.fsm_transition(obj, transition_name)
        if not self.has_change_permission(request, obj) or not transition.has_perm(
            obj, user=request.user
        ):
            raise PermissionDenied
        if not self.can_offer(obj, transition_name):
            self.message_user(request, self._not_now(obj, transition_name), messages.ERROR)
            return HttpResponseRedirect(change_url)
        posted = request.method == "POST"
        form = ConfirmationForm(request.POST if posted else None, confirmation=confirmation)
        record = self._record(obj, confirmation, transition_name)
        # The page it was opened from (the team's calendar), where "Yes" and "No" lead back.
        back_url = _next_url(request) or change_url
        if posted:
            record.token = request.POST.get(self._token_name(obj), "")
            if form.is_valid():
                self._apply_confirmed(request, record, transition_name, form)
                return HttpResponseRedirect(back_url)
        return self._confirmation_page(
            request,
            transition_name,
            form,
            records=[record],
            back_url=back_url,
            hidden=[(self._token_name(obj), record.token)],
        )

    # The list action: the same page for the records selected -----------------------------------

    def get_actions(self, request: HttpRequest) -> dict:
        actions = super().get_actions(request)
        if IS_POPUP_VAR in request.GET or not self.has_change_permission(request):
            return actions
        for name, confirmation in self.fsm_confirmations.items():
            if self.confirmed(name) is None:
                continue
            action_name = f"confirm_{name}"
            action = self._scoped_action(self._bulk_action(name))
            actions[action_name] = (action, action_name, confirmation.bulk_label)
        return actions

    def _bulk_action(self, name: str) -> Callable:
        def bulk(modeladmin: Any, request: HttpRequest, queryset: QuerySet) -> Any:
            return modeladmin.confirmation_bulk_view(request, queryset, name)

        bulk.__name__ = f"confirm_{name}"
        bulk.allowed_permissions = ("change",)
        return bulk

    def confirmation_bulk_view(
        self, request: HttpRequest, queryset: QuerySet, name: str
    ) -> HttpResponse | None:
        """First the page for the records selected (those the action does not apply to are
        listed apart, left as they are); then, posted from it, each record confirmed."""
        confirmation = self.fsm_confirmations[name]
        if queryset.count() > BULK_LIMIT:
            self.message_user(
                request,
                _("Choose at most %(limit)d records at a time: each is listed to be read.")
                % {"limit": BULK_LIMIT},
                messages.ERROR,
            )
            return None
        records, skipped = [], []
        for obj in queryset.order_by("pk"):
            record = self._record(obj, confirmation, name)
            record.why_not = self._why_not(request, obj, name)
            (skipped if record.why_not else records).append(record)
        submitted = "post" in request.POST
        form = ConfirmationForm(request.POST if submitted else None, confirmation=confirmation)
        if submitted:
            for record in records + skipped:
                record.token = request.POST.get(self._token_name(record.obj), "")
            if form.is_valid():
                self._apply_all(request, records + skipped, name, form)
                return None  # Django's answer to an action: the list again, with the messages
        if not records:
            self.message_user(
                request,
                _("None of the selected records can be changed that way now."),
                messages.WARNING,
            )
            return None
        hidden = [(helpers.ACTION_CHECKBOX_NAME, str(r.obj.pk)) for r in records]
        hidden += [(self._token_name(r.obj), r.token) for r in records]
        hidden += [("action", f"confirm_{name}"), ("post", "yes")]
        opts = self.model._meta
        return self._confirmation_page(
            request,
            name,
            form,
            records=records,
            skipped=skipped,
            back_url=reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
            hidden=hidden,
        )

    def _apply_all(
        self, request: HttpRequest, records: list[_Record], name: str, form: ConfirmationForm
    ) -> None:
        done = 0
        for record in records:
            done += self._apply_confirmed(request, record, name, form, one_of_many=True)
        if done:
            label = self.get_fsm_label(self.fsm_transition(records[0].obj, name))
            self.message_user(
                request,
                ngettext(
                    "%(action)s: %(count)d record done.",
                    "%(action)s: %(count)d records done.",
                    done,
                )
                % {"action": label, "count": done},
                messages.SUCCESS,
            )

    # Applying one confirmed record ---------------------------------------------------------------

    def _apply_confirmed(
        self,
        request: HttpRequest,
        record: _Record,
        name: str,
        form: ConfirmationForm,
        one_of_many: bool = False,
    ) -> bool:
        """Apply the transition to one record through its service, with the reason, if it is
        still as it was confirmed (checked under its row lock, in the service's transaction);
        otherwise, or on the service's refusal, say why and do nothing. Whether it was done."""
        confirmation = self.fsm_confirmations[name]
        obj = record.obj
        prefix = f"{obj}: " if one_of_many else ""
        if one_of_many and record.why_not:
            self.message_user(request, prefix + record.why_not, messages.ERROR)
            return False
        reason = confirmation.reason_text(
            form.cleaned_data.get("reason", ""),
            form.cleaned_data.get("details", ""),
            obj.company.language,
        )
        try:
            with transaction.atomic():
                current = type(obj)._default_manager.select_for_update().get(pk=obj.pk)
                if confirmation.token(current) != record.token:
                    self.message_user(request, prefix + self._stale(current), messages.ERROR)
                    return False
                service = self.fsm_services[name]
                if confirmation.asks_reason:
                    done = service(obj, request.user, reason=reason)
                else:
                    done = service(obj, request.user)
        except GaranteError as refusal:
            self.message_user(request, prefix + str(refusal.user_message), messages.ERROR)
            return False
        if not one_of_many:
            self.message_user(request, self.fsm_done_message(done), messages.SUCCESS)
        self.fsm_confirmed_done(request, done, name)
        return True

    def fsm_confirmed_done(self, request: HttpRequest, done: Model, name: str) -> None:
        """After a confirmed transition went through: what else staff are told (whether the
        customer's message could be sent, say). Nothing by default."""

    # What the page shows --------------------------------------------------------------------------

    def _record(self, obj: Model, confirmation: Confirmation, name: str) -> _Record:
        return _Record(
            obj=obj,
            url=self._change_url(obj),
            effect=confirmation.effect(obj),
            token=confirmation.token(obj),
        )

    def _why_not(self, request: HttpRequest, obj: Model, name: str) -> str:
        if not self.has_change_permission(request, obj):
            if self.settled(obj):
                return self.settled_message(obj)
            return str(_("Your role does not allow this here."))
        transition = self.fsm_transition(obj, name)
        if not transition.has_perm(obj, user=request.user):
            return str(_("Your role does not allow this here."))
        if not self.can_offer(obj, name):
            return self._not_now(obj, name)
        return ""

    def _not_now(self, obj: Model, name: str) -> str:
        return _("%(object)s is %(state)s: “%(action)s” cannot be applied to it now.") % {
            "object": obj,
            "state": obj.get_state_display(),
            "action": self.get_fsm_label(self.fsm_transition(obj, name)),
        }

    @staticmethod
    def _stale(current: Model) -> str:
        return _(
            "%(object)s changed while the confirmation page was open (it is now %(state)s): "
            "nothing was done and nothing was sent. Look at it again before you act."
        ) % {"object": current, "state": current.get_state_display()}

    @staticmethod
    def _token_name(obj: Model) -> str:
        return f"confirmed_against_{obj.pk}"

    def _change_url(self, obj: Model) -> str:
        opts = self.model._meta
        return reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])

    def _confirmation_page(
        self,
        request: HttpRequest,
        name: str,
        form: ConfirmationForm,
        *,
        records: list[_Record],
        back_url: str,
        hidden: list[tuple[str, str]],
        skipped: list[_Record] | None = None,
    ) -> HttpResponse:
        opts = self.model._meta
        label = self.get_fsm_label(self.fsm_transition(records[0].obj, name))
        if len(records) == 1:
            title = _("%(action)s: %(object)s") % {"action": label, "object": records[0].obj}
        else:
            title = _("%(action)s: %(count)d %(objects)s") % {
                "action": label,
                "count": len(records),
                "objects": opts.verbose_name_plural,
            }
        context = {
            **self.admin_site.each_context(request),
            "opts": opts,
            "title": title,
            "action_label": label,
            "records": records,
            "skipped": skipped or [],
            "form": form,
            "hidden": hidden,
            "back_url": back_url,
            "single": records[0].obj if len(records) == 1 and not skipped else None,
            "asks_reason": self.fsm_confirmations[name].asks_reason,
            "reason_required": self.fsm_confirmations[name].reason_required,
            "reversible": self.fsm_confirmations[name].reversible,
        }
        return TemplateResponse(request, CONFIRM_TEMPLATE, context)


def _next_url(request: HttpRequest) -> str:
    """The `?next=` address, if it is one of this site's (never another host's)."""
    asked = request.GET.get("next", "")
    if asked and url_has_allowed_host_and_scheme(
        asked, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return asked
    return ""


# The sentences every domain's effects share ------------------------------------------------------


def customer_told(name: str, channel: str) -> str:
    """That the customer `name` is told, by `channel` ("sms" or "email"), with the reason."""
    if channel == "sms":
        return _("%(name)s will receive an SMS with the reason.") % {"name": name}
    return _("%(name)s will receive an email with the reason.") % {"name": name}


def nothing_sent(name: str, why: str = "") -> str:
    """That nothing reaches the customer `name`; `why` is "opted out" or "no phone or email"
    when a message was due but cannot go, empty when the action sends none."""
    if why == "opted out":
        return _("Nothing is sent to %(name)s: they asked not to receive messages.") % {
            "name": name
        }
    if why:
        return _("Nothing is sent to %(name)s: they have no phone or email on file.") % {
            "name": name
        }
    return _("Nothing is sent to %(name)s.") % {"name": name}
