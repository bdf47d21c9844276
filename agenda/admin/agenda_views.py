"""The agenda pages' views, on the professionals' admin: one professional's day or week, or a
company's day, with the free slots (agenda.agenda_page computes them)."""

from datetime import date, timedelta
from zoneinfo import ZoneInfo

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from agenda import agenda_page, clock
from agenda.admin.common import local_shown
from agenda.models import (
    Appointment,
    Professional,
    Service,
)
from core.l10n import day_shown
from core.models import Company


class AgendaPagesMixin:
    """The agenda pages, under the professionals' admin URLs. Place before the ModelAdmin base."""

    def get_urls(self) -> list:
        return [
            path(
                "<int:professional_id>/day/",
                self.admin_site.admin_view(self.day_view),
                name="agenda_professional_day",
            ),
            path(
                "agenda/",
                self.admin_site.admin_view(self.company_day_view),
                name="agenda_company_day",
            ),
            *super().get_urls(),
        ]

    def day_view(self, request: HttpRequest, professional_id: int) -> HttpResponse:
        """One professional's day (or week, `?view=week`): hours, appointments, free slots."""
        professional = get_object_or_404(self.get_queryset(request), pk=professional_id)
        if not self.has_view_permission(request, professional):
            return HttpResponse(status=403)
        company = professional.company
        day = _day_asked(request, company)
        week = request.GET.get("view") == "week"
        days = [day + timedelta(days=n) for n in range(agenda_page.WEEK_DAYS if week else 1)]
        service = agenda_page.service_for(company, professional, request.GET.get("service", ""))
        grid = agenda_page.columns(company, [professional], days, service)
        step = timedelta(days=agenda_page.WEEK_DAYS if week else 1)
        title = _("%(name)s — %(day)s") % {
            "name": professional.display_name,
            "day": describe_instant_day(day, company.tz),
        }
        return self._agenda_response(
            request,
            company,
            title=title,
            day=day,
            step=step,
            grid=grid,
            service=service,
            services=agenda_page.services_offered(company, professional),
            professional=professional,
            week=week,
            extra={"intervals": grid[0]["intervals"], "appointments": grid[0]["appointments"]},
        )

    def company_day_view(self, request: HttpRequest) -> HttpResponse:
        """Every active professional of a company side by side for one day."""
        if not self.has_view_permission(request):
            return HttpResponse(status=403)
        companies = Company.objects.order_by("name")
        ids = self.allowed_company_ids(request, "view", "change")
        if ids is not None:
            companies = companies.filter(pk__in=ids)
        moving = self._moving(request)
        chosen = request.GET.get("company", "")
        if moving is not None:
            company = moving.company
        else:
            company = (
                companies.filter(pk=int(chosen)).first() if chosen.isdigit() else None
            ) or companies.first()
        if company is None:
            return HttpResponse(status=403)
        day = _day_asked(request, company)
        professionals = list(
            Professional.objects.filter(company=company, active=True).order_by("display_name")
        )
        if moving is not None:
            service = moving.service  # the slots it can move to are its own service's
        else:
            service = agenda_page.service_for(company, None, request.GET.get("service", ""))
        grid = (
            agenda_page.columns(company, professionals, [day], service, moving=moving)
            if professionals
            else []
        )
        title = _("Agenda of %(company)s — %(day)s") % {
            "company": company.name,
            "day": describe_instant_day(day, company.tz),
        }
        return self._agenda_response(
            request,
            company,
            title=title,
            day=day,
            step=timedelta(days=1),
            grid=grid,
            service=service,
            services=[] if moving is not None else agenda_page.services_offered(company, None),
            companies=list(companies) if len(companies) > 1 and moving is None else [],
            extra={"moving": self._moving_shown(moving, request)} if moving is not None else None,
        )

    def _moving(self, request: HttpRequest) -> Appointment | None:
        """The appointment `?move=` names, if the staff member may move it now: one of their
        companies' scheduled appointments (else the page says why and shows the plain day)."""
        asked = request.GET.get("move", "")
        if not asked:
            return None
        appointments = self.admin_site.get_model_admin(Appointment)
        found = (
            appointments.get_queryset(request)
            .select_related("company", "contact", "service", "professional")
            .filter(pk=int(asked) if asked.isdigit() else None)
            .first()
        )
        if found is None or not appointments.has_change_permission(request, found):
            self.message_user(request, _("That appointment cannot be moved."), messages.ERROR)
            return None
        return found

    @staticmethod
    def _moving_shown(moving: Appointment, request: HttpRequest) -> dict[str, str]:
        company = moving.company
        query = request.GET.copy()
        del query["move"]
        query["company"] = company.pk
        return {
            "reference": moving.reference,
            "contact": str(moving.contact),
            "service": moving.service.name,
            "professional": moving.professional.display_name,
            "when": local_shown(moving.starts_at, company),
            "stop_query": query.urlencode(),
        }

    def _agenda_response(
        self,
        request: HttpRequest,
        company: Company,
        *,
        title: str,
        day: date,
        step: timedelta,
        grid: list,
        service: Service | None,
        services: list,
        professional: Professional | None = None,
        week: bool = False,
        companies: list | None = None,
        extra: dict | None = None,
    ) -> HttpResponse:
        def moved(to: date) -> str:
            query = request.GET.copy()
            query["date"] = to.isoformat()
            return query.urlencode()

        appointments = self.admin_site.get_model_admin(Appointment)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": title,
            "company": company,
            "professional": professional,
            "day": day,
            "week": week,
            "previous_query": moved(day - step),
            "next_query": moved(day + step),
            "grid": grid,
            "service": service,
            "services": services,
            "companies": companies or [],
            "may_book": appointments.has_add_permission(request),
            # Moving is the reschedule transition: the change permission on appointments.
            "may_move": appointments.has_change_permission(request),
            **(extra or {}),
        }
        with timezone.override(company.tz):
            response = TemplateResponse(request, "admin/agenda/agenda_page.html", context)
            return response.render()


def _day_asked(request: HttpRequest, company: Company) -> date:
    try:
        return date.fromisoformat(request.GET.get("date", ""))
    except ValueError:
        return clock.now().astimezone(company.tz).date()


def describe_instant_day(day: date, tz: ZoneInfo) -> str:
    return day_shown(day)  # core.l10n: "lunes 07/12/2026"
