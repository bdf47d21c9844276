"""The browser's middleware, stepping aside for the machine API.

The Gateway's endpoints (`/mcp` and the REST tool mirror under `/api/`) authenticate every
request by its bearer token, answer in the company's language and never set a cookie, so
sessions, the browser's language, CSRF tokens, the logged-in user, flash messages and frame
options mean nothing to them. Django runs every middleware on every request, and those six
cost a cheap call about a fifth of its CPU (docs/performance.md). Each is wrapped
here: the same class, in the same place of `MIDDLEWARE`, that passes a request of the machine
API (`settings.GARANTE_MACHINE_API_PATHS`) straight on and serves every other request (the
admin, the integration API with its staff sessions, the API's documentation pages) exactly as
Django's own does.

What the machine API keeps: SecurityMiddleware (its headers, the HTTPS redirect) and
CommonMiddleware (the Host header checked against ALLOWED_HOSTS) are not wrapped. A thread
serves requests of both kinds one after the other, so for a machine request the site's
default language is activated in place of the one the browser middleware would have chosen:
what the API says before it knows the company (an unknown token) never depends on whoever the
thread served before.
"""

from collections.abc import Callable
from enum import Enum

from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware as _Authentication
from django.contrib.messages.middleware import MessageMiddleware as _Messages
from django.contrib.sessions.middleware import SessionMiddleware as _Sessions
from django.http import HttpRequest, HttpResponseBase
from django.middleware.clickjacking import XFrameOptionsMiddleware as _FrameOptions
from django.middleware.csrf import CsrfViewMiddleware as _Csrf
from django.middleware.locale import LocaleMiddleware as _Locale
from django.utils import translation


class Api(Enum):
    """The API a request path belongs to (`api_of`)."""

    # The Gateway's (settings.GARANTE_MACHINE_API_PATHS): no browser middleware, one deadline.
    MACHINE = "machine"
    # The rest of settings.GARANTE_API_PATHS: the integration API and the APIs' documents.
    OTHER = "other"


def api_of(path: str) -> Api | None:
    """The one "is this the API?" check: which API a request path belongs to, or None (the
    admin, the pages). Every API answers its errors in JSON (config.urls), whatever path was
    asked under it, even one no route can match; only the machine API skips the browser's
    middleware. A path belongs to a listed path equal to it, or ending with a slash and
    starting it."""
    if _listed(path, settings.GARANTE_MACHINE_API_PATHS):
        return Api.MACHINE
    if _listed(path, settings.GARANTE_API_PATHS):
        return Api.OTHER
    return None


def request_api(request: HttpRequest) -> Api | None:
    """`api_of` the request's path, decided once per request: the middleware that ask (the
    six browser ones, the machine API's errors) read the answer kept on the request."""
    api = getattr(request, "garante_api", _UNDECIDED)
    if api is _UNDECIDED:
        api = request.garante_api = api_of(request.path_info)
    return api


_UNDECIDED = object()


def _listed(path: str, listed: tuple[str, ...]) -> bool:
    return any(path == p or (p.endswith("/") and path.startswith(p)) for p in listed)


class _BrowserOnly:
    """Mixed in before a Django middleware class: the machine API's requests skip it."""

    get_response: Callable[[HttpRequest], HttpResponseBase]

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if request_api(request) is Api.MACHINE:
            self.step_aside(request)
            return self.get_response(request)
        return super().__call__(request)  # type: ignore[misc]

    def step_aside(self, request: HttpRequest) -> None:
        """What a machine request gets instead (nothing, unless a subclass says)."""


class SessionMiddleware(_BrowserOnly, _Sessions):
    pass


class LocaleMiddleware(_BrowserOnly, _Locale):
    def step_aside(self, request: HttpRequest) -> None:
        translation.activate(settings.LANGUAGE_CODE)


class CsrfViewMiddleware(_BrowserOnly, _Csrf):
    # Django calls process_view itself, for every request: the machine API's views are exempt
    # (`csrf_exempt`, as django-ninja marks its own), so it lets them through at once.
    pass


class AuthenticationMiddleware(_BrowserOnly, _Authentication):
    pass


class MessageMiddleware(_BrowserOnly, _Messages):
    pass


class XFrameOptionsMiddleware(_BrowserOnly, _FrameOptions):
    pass


class StaffLanguageMiddleware:
    """Staff read the admin in their company's language: a staff member whose companies all
    speak one language gets it, whatever their browser asks for; one who chose a language
    (Django's language cookie, `set_language`) keeps that choice; a superuser, or a member of
    companies of several languages, gets the browser's (LocaleMiddleware's choice). Placed
    after AuthenticationMiddleware; the machine API's requests never reach a staff user."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        language = self._company_language(request)
        if language is None or language == translation.get_language():
            return self.get_response(request)
        # For this request only: the thread's language is given back after it (whatever runs
        # next in the thread, a test or a task, starts from its own), and the response says
        # the one it was written in before LocaleMiddleware would say the browser's.
        with translation.override(language):
            request.LANGUAGE_CODE = language
            response = self.get_response(request)
            response.headers.setdefault("Content-Language", language)
        return response

    @staticmethod
    def _company_language(request: HttpRequest) -> str | None:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated or not user.is_staff:
            return None
        if request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME):
            return None
        if user.is_superuser:
            return None
        from core.models import StaffMembership

        memberships = StaffMembership.objects.filter(user=user)
        languages = set(memberships.values_list("company__language", flat=True).distinct())
        return languages.pop() if len(languages) == 1 else None
