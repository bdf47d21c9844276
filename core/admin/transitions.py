"""The admin's state transitions, wired once for every model with them.

The buttons are offered only when the state allows them now and applied by the domain
service, never the model method; the history shows the changes made, read-only.
"""

from collections.abc import Callable
from typing import Any, ClassVar

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Model
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.utils.translation import gettext_lazy as _
from django_fsm import FSMFieldMixin, Transition
from django_fsm.admin import FSMAdminMixin, FSMTransitionContext
from django_fsm_log.admin import StateLogInline
from django_fsm_log.models import StateLog

from core.admin.confirmation import ConfirmedTransitionsAdmin
from core.errors import GaranteError
from core.l10n import datetime_shown
from core.states import state_in_sentence


class ServiceRefusalsAdmin:
    """A service's refusal while the change form saves (a rule it checks under its row lock,
    that the form's own checks passed a moment before: a colleague acting at that instant)
    undoes the whole save and says why, on the form's page again.

    Django's change form saves in one transaction, so letting the GaranteError out of
    save_model or save_related rolls back every row the form wrote, its history entry too;
    the page then shows the refusal and never "changed successfully" beside it. What the
    staff member typed is shown as it is now stored. Place before the ModelAdmin base."""

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except GaranteError as refusal:
            if request.method != "POST":
                raise
            self.message_user(request, str(refusal.user_message), level=messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())


class RecordRulesAdmin:
    """What a record lets staff do, the same on every admin: a record that must not change
    (`read_only_records`: traces, security events, sent codes) and a record whose state no
    transition leaves (`settled`) are shown with neither Save nor Delete, and the bulk delete
    action refuses them (Django asks `has_delete_permission` of each selected row; read-only
    records' lists do not offer it at all). Place before the ModelAdmin base."""

    read_only_records: ClassVar[bool] = False

    def settled(self, obj: Any) -> bool:
        """Whether `obj` may no longer change (its state is terminal)."""
        return self.read_only_records

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # The list (obj None) stays actionable: revoking codes is an action, not an edit.
        if obj is not None and self.settled(obj):
            return False
        return super().has_change_permission(request, obj)

    def deletable(self, obj: Any) -> bool:
        """Whether `obj` may be deleted at all (its role may still forbid it)."""
        return not self.settled(obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if self.read_only_records or (obj is not None and not self.deletable(obj)):
            return False
        return super().has_delete_permission(request, obj)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        if self.read_only_records:
            return False
        return super().has_add_permission(request, *args)

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        # A page opened before the record settled (another tab, a colleague) posts to a record
        # that no longer changes: say so on its page rather than answer "forbidden".
        if request.method == "POST" and object_id is not None and not self.read_only_records:
            obj = self.get_object(request, object_id)
            if obj is not None and self.has_view_permission(request, obj) and self.settled(obj):
                self.refuse_settled(request, obj)
                return HttpResponseRedirect(request.path)
        return super().changeform_view(request, object_id, form_url, extra_context)

    def refuse_settled(self, request: HttpRequest, obj: Any) -> None:
        self.message_user(request, self.settled_message(obj), level=messages.ERROR)

    def settled_message(self, obj: Any) -> str:
        state = getattr(obj, "get_state_display", None)
        if state is None:
            return _("%(object)s is a record: it cannot be changed.") % {"object": obj}
        return _("%(object)s is %(state)s: it can no longer change.") % {
            "object": obj,
            "state": state(),
        }


class ServiceTransitionsAdmin(ConfirmedTransitionsAdmin, RecordRulesAdmin, FSMAdminMixin):
    """django-fsm-2's buttons and transition forms, each applied by a service.

    `fsm_services` maps a transition name to `service(obj, user, **form_data) -> obj`; a
    transition without one is neither offered nor applied. The service locks the row, checks
    the transition is allowed at that instant and logs who made it; a refusal it raises is
    shown to the staff member. A record whose state no such transition leaves is settled
    (RecordRulesAdmin): read-only, without Save or Delete. Place before the ModelAdmin base.

    A transition named in `fsm_confirmations` (one that cannot be undone or that tells the
    customer) is never applied on one click: its button opens its confirmation page, with a
    reason passed to its service as `reason=` (core.admin.confirmation), and it is a list
    action too.
    """

    fsm_fields: ClassVar[list[str]] = ["state"]
    fsm_services: ClassVar[dict[str, Callable[..., Any]]] = {}
    # Its button says what it does ("Cambiar fecha"), never a bare "Apply".
    fsm_transition_form_template = "admin/garante/transition_form.html"

    def refuse_settled(self, request: HttpRequest, obj: Any) -> None:
        # A stale transition button: its service refuses it, in its own words. A confirmed
        # one is never applied from the change form, not even to be refused.
        name = request.POST.get(self.fsm_post_param)
        if self.confirmed(name) is not None:
            super().refuse_settled(request, obj)
            return
        if name in self.fsm_services and super(RecordRulesAdmin, self).has_change_permission(
            request, obj
        ):
            self.apply_transition(request, obj, name)
            return
        super().refuse_settled(request, obj)

    def settled(self, obj: Any) -> bool:
        if super().settled(obj):
            return True
        for name in self.fsm_fields:
            state = getattr(obj, name)
            field = type(obj)._meta.get_field(name)
            leaving = [
                t
                for t in field.get_all_transitions(type(obj))
                if t.name in self.fsm_services
                and t.source in (state, "*", "+")
                and self.offered_from(state, t.name)
            ]
            if leaving:
                return False
        return True

    def fsm_done_message(self, obj: Any) -> str:
        """What the staff member is told after a transition went through."""
        return _("%(object)s is now %(state)s.") % {
            "object": obj,
            "state": state_in_sentence(obj.get_state_display()),
        }

    # django-fsm-2's extension points -----------------------------------------------------------

    def is_fsm_transition_visible(self, transition: Transition) -> bool:
        # django-fsm-2 asks once per (source, name): a source staff are not offered it from
        # shows no button.
        return (
            transition.name in self.fsm_services
            and (
                transition.source in ("*", "+")
                or self.offered_from(transition.source, transition.name)
            )
            and super().is_fsm_transition_visible(transition)
        )

    @staticmethod
    def get_fsm_block_label(fsm_field_name: str) -> str:
        return _("Change the state")

    def get_help_text(self, transition: Transition) -> str:
        return transition.custom.get("help_text") or ""  # not the tooltip "None"

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        obj = self.get_object(request, unquote(object_id))
        if obj is not None and not self.has_change_permission(request, obj):
            # Staff who may not change the object see no buttons: the admin's own page,
            # without django-fsm-2's part of it.
            return super(FSMAdminMixin, self).change_view(
                request, object_id, form_url, extra_context
            )
        return super().change_view(request, object_id, form_url, extra_context)

    def response_change(self, request: HttpRequest, obj: Model) -> HttpResponse:
        name = request.POST.get(self.fsm_post_param)
        if not name:
            return super().response_change(request, obj)
        if self.confirmed(name) is not None:
            return self.confirmation_redirect(obj, name)
        transition = self.fsm_transition(obj, name)
        if transition is None:
            self.message_user(request, _("Unknown transition."), level=messages.ERROR)
        elif self.get_fsm_transition_form(transition):
            opts = self.model._meta
            return redirect(
                f"admin:{opts.app_label}_{opts.model_name}_transition",
                object_id=obj.pk,
                transition_name=name,
            )
        else:
            self.apply_transition(request, obj, name)
        return HttpResponseRedirect(request.get_full_path())

    def fsm_transition_view(
        self, request: HttpRequest, object_id: str, transition_name: str, **kwargs: Any
    ) -> HttpResponse:
        """The transition-form view (reschedule, reject with a reason, ...): django-fsm-2 checks
        only the transition's own permission; it also needs the change permission here. A valid
        form is applied by the service; a form with errors, or refused, is shown again. A
        confirmed transition's URL is its confirmation page."""
        if self.confirmed(transition_name) is not None:
            return self.confirmation_view(request, object_id, transition_name)
        obj = self.get_object(request, object_id)
        if obj is not None and not self.has_change_permission(request, obj):
            raise PermissionDenied
        transition = None if obj is None else self.fsm_transition(obj, transition_name)
        opts = self.model._meta
        if obj is not None and transition is None:
            self.message_user(request, _("Unknown transition."), level=messages.ERROR)
            return redirect(f"admin:{opts.app_label}_{opts.model_name}_change", object_id=obj.pk)
        form_class = None if transition is None else self.get_fsm_transition_form(transition)
        if obj is not None and form_class is None:
            # A transition without a form of its own (a URL typed or kept): its button is on the
            # record's page, where it is applied (or confirmed) as always.
            self.message_user(
                request, _("This action is taken with its button on the record."), messages.INFO
            )
            return redirect(f"admin:{opts.app_label}_{opts.model_name}_change", object_id=obj.pk)
        if (
            request.method == "POST"
            and form_class is not None
            and transition.has_perm(obj, user=request.user)
        ):
            if issubclass(form_class, ModelForm):
                form = form_class(data=request.POST, instance=obj)
            else:
                form = form_class(data=request.POST)
            if form.is_valid() and self.apply_transition(
                request, obj, transition_name, form.cleaned_data
            ):
                change = f"admin:{opts.app_label}_{opts.model_name}_change"
                return redirect(change, object_id=obj.pk)
            return self.transition_form_page(request, obj, transition, form)
        # Anything else (the form's first showing, a missing object or permission) is
        # django-fsm-2's, which applies nothing on it.
        return super().fsm_transition_view(request, object_id, transition_name, **kwargs)

    def transition_form_page(
        self, request: HttpRequest, obj: Model, transition: Transition, form: Any
    ) -> HttpResponse:
        """A transition's form page, as django-fsm-2 draws it (with the form's errors, or the
        service's refusal above it)."""
        return TemplateResponse(
            request,
            self.fsm_transition_form_template,
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "original": obj,
                "transition": FSMTransitionContext(
                    name=transition.name,
                    label=self.get_fsm_label(transition),
                    help_text=self.get_help_text(transition),
                ),
                "transition_form": form,
            },
        )

    def fsm_transition(self, obj: Model, name: str) -> Transition | None:
        """The transition `name` of `obj`, if a service applies it here."""
        if name not in self.fsm_services:
            return None
        for field_name in self.fsm_fields:
            field = type(obj)._meta.get_field(field_name)
            for transition in field.get_all_transitions(type(obj)):
                if transition.name == name:
                    return transition
        return None

    def apply_transition(
        self, request: HttpRequest, obj: Any, name: str, form_data: dict[str, Any] | None = None
    ) -> bool:
        """Apply a transition, from a button or a form, by its service instead of the bare
        model method; the staff member is told the outcome. Whether it went through."""
        service = self.fsm_services.get(name)
        if service is None or self.confirmed(name) is not None:
            # A confirmed transition is applied by its confirmation page only.
            self.message_user(request, _("Unknown transition."), level=messages.ERROR)
            return False
        try:
            done = service(obj, request.user, **(form_data or {}))
        except GaranteError as error:
            self.message_user(request, str(error.user_message), level=messages.ERROR)
            return False
        self.message_user(request, self.fsm_done_message(done), level=messages.SUCCESS)
        return True


class TransitionHistoryInline(StateLogInline):
    """django-fsm-log's history of an object, in the staff's language: which button, from
    which state to which, who, when. Read-only, newest first."""

    fields = ["when", "transition_shown", "from_state", "to_state", "by_shown", "note"]
    # Without the log line a StateLog reads as ("2026-12-07 12:07:28.754994+00:00 - ...").
    template = "admin/garante/tabular_records.html"
    verbose_name = _("state change")
    verbose_name_plural = _("state history")

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> list[str]:
        return self.fields

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return True  # whoever may see the object may see its history

    @admin.display(description=_("when"))
    def when(self, log: StateLog) -> str:
        return datetime_shown(log.timestamp)

    @admin.display(description=_("note"))
    def note(self, log: StateLog) -> str:
        return log.description or "—"

    @admin.display(description=_("action"))
    def transition_shown(self, log: StateLog) -> str:
        model = log.content_type.model_class()
        for field in model._meta.fields if model is not None else ():
            if isinstance(field, FSMFieldMixin):
                for transition in field.get_all_transitions(model):
                    if transition.name == log.transition and transition.custom.get("label"):
                        return str(transition.custom["label"])
        return log.transition

    @admin.display(description=_("from"))
    def from_state(self, log: StateLog) -> str:
        return log.get_source_state_display() or "—"

    @admin.display(description=_("to"))
    def to_state(self, log: StateLog) -> str:
        return log.get_state_display()

    @admin.display(description=_("by"))
    def by_shown(self, log: StateLog) -> str:
        if log.by is None:
            return _("the conversational agent or the system")
        return f"{log.by.get_full_name() or log.by.get_username()} ({log.by.get_username()})"
