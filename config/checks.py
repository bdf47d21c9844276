"""Django's deployment checks W002 and W003 in the form this project's MIDDLEWARE takes.

Django looks for its own CSRF and frame-options middleware by their exact dotted paths, and
MIDDLEWARE holds core.middleware's subclasses of them (which step aside for the machine API),
so `check --deploy` would warn that both protections are missing while they are on, and skips
the checks that apply only with them (W016: the CSRF cookie not Secure; W019: frames allowed).
The settings silence W002 and W003; these checks, registered by config.admin_site, warn the
same when no subclass of Django's class is in MIDDLEWARE either, and make the skipped ones.
"""

from typing import Any

from django.conf import settings
from django.core.checks import Tags, Warning, register
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.csrf import CsrfViewMiddleware
from django.utils.module_loading import import_string

REPLACED = {
    "security.W002": (XFrameOptionsMiddleware, "no X-Frame-Options header: clickjacking"),
    "security.W003": (CsrfViewMiddleware, "no CSRF protection"),
}


def _has(django_class: type) -> bool:
    classes = [import_string(path) for path in settings.MIDDLEWARE]
    return any(issubclass(cls, django_class) for cls in classes if isinstance(cls, type))


@register(Tags.security, deploy=True)
def protective_middleware_present(**kwargs: Any) -> list[Warning]:
    warnings = [
        Warning(
            f"no {django_class.__name__} (nor a subclass) in MIDDLEWARE: {consequence}",
            id=f"garante.{check_id}",
        )
        for check_id, (django_class, consequence) in REPLACED.items()
        if not _has(django_class)
    ]
    if (
        _has(CsrfViewMiddleware)
        and not settings.CSRF_USE_SESSIONS
        and settings.CSRF_COOKIE_SECURE is not True
    ):
        warnings.append(
            Warning("CSRF_COOKIE_SECURE is not True (DJANGO_SECURE_COOKIES)", id="garante.W016")
        )
    if _has(XFrameOptionsMiddleware) and settings.X_FRAME_OPTIONS != "DENY":
        warnings.append(Warning("X_FRAME_OPTIONS is not 'DENY'", id="garante.W019"))
    return warnings
