"""Staff admin for calendar feeds (agenda.feeds): issue one for a professional or the whole
company and see its address once; regenerate it (a new address, the old one dead) or revoke it,
each after a confirmation page, since every calendar subscribed to the old address stops
updating at once."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from agenda.feeds import (
    calendar_feed_issue,
    calendar_feed_regenerate,
    calendar_feed_revoke,
    calendar_feed_url,
)
from agenda.models import CalendarFeed
from core.admin import CompanyScopedAdmin
from core.errors import GaranteError


class CalendarFeedForm(forms.ModelForm):
    class Meta:
        model = CalendarFeed
        fields = ["company", "professional", "name"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "name" in self.fields:
            # Left empty, the feed is named after its professional (or the whole company).
            self.fields["name"].required = False


@admin.register(CalendarFeed)
class CalendarFeedAdmin(CompanyScopedAdmin):
    form = CalendarFeedForm
    list_display = [
        "name",
        "company",
        "professional",
        "token_prefix",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["company"]
    search_fields = ["name", "professional__display_name"]
    autocomplete_fields = ["professional"]
    readonly_fields = ["token_prefix", "created_at", "last_used_at", "revoked_at", "link_actions"]

    def get_fields(self, request: HttpRequest, obj: CalendarFeed | None = None) -> list[str]:
        if obj is None:
            return ["company", "professional", "name"]
        return [
            "company",
            "professional",
            "name",
            "token_prefix",
            "created_at",
            "last_used_at",
            "revoked_at",
            "link_actions",
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: CalendarFeed | None = None) -> Any:
        readonly = list(super().get_readonly_fields(request, obj))
        if obj is not None:
            # Whose calendar a URL shows is fixed when it is issued: issue another for another.
            readonly += ["company", "professional"]
        return readonly

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Revoked, a URL answers "revoked" (410) to the calendars still polling it; deleted, it
        # would be a bare "not found". Revoking is the way to end one.
        return False

    @admin.display(description=_("Address"))
    def link_actions(self, obj: CalendarFeed) -> str:
        if obj.revoked_at is not None:
            return _("Revoked: this address no longer works. Add a new feed for a new one.")
        return format_html(
            '{} <a class="button" href="{}">{}</a> <a class="button" href="{}">{}</a>',
            _("Shown only when issued; lost, regenerate it."),
            reverse("admin:agenda_calendarfeed_regenerate", args=[obj.pk]),
            _("Regenerate address"),
            reverse("admin:agenda_calendarfeed_revoke", args=[obj.pk]),
            _("Revoke address"),
        )

    def save_model(self, request: HttpRequest, obj: CalendarFeed, form: Any, change: bool):
        if change:
            super().save_model(request, obj, form, change)
            return
        feed, token = calendar_feed_issue(
            company=obj.company, professional=obj.professional, name=obj.name
        )
        for field in ("pk", "name", "token_prefix", "token_hash", "created_at"):
            setattr(obj, field, getattr(feed, field))
        _show_address_once(request, feed, token)

    def get_urls(self) -> list:
        return [
            path(
                "<int:object_id>/regenerate/",
                self.admin_site.admin_view(self.regenerate_view),
                name="agenda_calendarfeed_regenerate",
            ),
            path(
                "<int:object_id>/revoke/",
                self.admin_site.admin_view(self.revoke_view),
                name="agenda_calendarfeed_revoke",
            ),
            *super().get_urls(),
        ]

    def regenerate_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        return self._confirmed(
            request,
            object_id,
            title=_("Regenerate the address of %(feed)s?"),
            warning=_(
                "A new address replaces the current one, which stops working at once: every "
                "calendar subscribed to it stops updating until it subscribes to the new one."
            ),
            button=_("Yes, regenerate it"),
            act=self._regenerate,
        )

    def revoke_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        return self._confirmed(
            request,
            object_id,
            title=_("Revoke the address of %(feed)s?"),
            warning=_(
                "The address stops working for good: calendars subscribed to it stop "
                "updating and are told it was revoked. This cannot be undone."
            ),
            button=_("Yes, revoke it"),
            act=self._revoke,
        )

    def _regenerate(self, request: HttpRequest, feed: CalendarFeed) -> CalendarFeed:
        replacement, token = calendar_feed_regenerate(feed=feed)
        _show_address_once(request, replacement, token)
        return replacement

    def _revoke(self, request: HttpRequest, feed: CalendarFeed) -> CalendarFeed:
        calendar_feed_revoke(feed=feed)
        self.message_user(request, _("The address of %(feed)s was revoked.") % {"feed": feed.name})
        return feed

    def _confirmed(self, request: HttpRequest, object_id: int, *, title, warning, button, act):
        """GET: the confirmation page (changes nothing); POST: act, then the resulting feed."""
        feed = self.get_object(request, str(object_id))
        if feed is None:
            raise Http404
        if not self.has_change_permission(request, feed):
            raise PermissionDenied
        if feed.revoked_at is not None:
            self.message_user(
                request, _("That address is already revoked; add a new feed."), messages.ERROR
            )
            return HttpResponseRedirect(reverse("admin:agenda_calendarfeed_change", args=[feed.pk]))
        if request.method == "POST":
            try:
                result = act(request, feed)
            except GaranteError as refusal:  # revoked by a colleague a moment ago
                self.message_user(request, str(refusal.user_message), messages.ERROR)
                result = feed
            return HttpResponseRedirect(
                reverse("admin:agenda_calendarfeed_change", args=[result.pk])
            )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "object": feed,
            "title": title % {"feed": feed.name},
            "warning": warning,
            "button": button,
            "cancel_url": reverse("admin:agenda_calendarfeed_change", args=[feed.pk]),
        }
        return TemplateResponse(request, "admin/agenda/calendarfeed/confirm.html", context)


def _show_address_once(request: HttpRequest, feed: CalendarFeed, token: str) -> None:
    messages.warning(
        request,
        _(
            "Calendar address of %(feed)s; copy it now, it will not be shown again (subscribe "
            "to it in Google Calendar, Apple Calendar or Outlook): %(url)s"
        )
        % {"feed": feed.name, "url": calendar_feed_url(token, request)},
    )
