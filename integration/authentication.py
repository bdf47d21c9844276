"""Who calls the integration API: a company system with a bearer token, or a logged-in staff
member (browsable API). Either way the request carries one `IntegrationAccess`: the company
every query is scoped to, and whether it may write."""

import logging
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.core.cache import caches
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import (
    BaseAuthentication,
    SessionAuthentication,
    get_authorization_header,
)
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from core.errors import PermissionRefused
from core.models import Company, StaffMembership
from core.roles import staff_company_ids
from integration.models import IntegrationCredential
from integration.selectors import integration_credential_authenticate

logger = logging.getLogger("garante.integration")

COMPANY_HEADER = "X-Garante-Company"
COMPANY_PARAMETER = "company"


@dataclass(frozen=True)
class IntegrationAccess:
    """What an authenticated request may reach: one company; `can_write` is a credential's
    scope (a staff member's writes are decided per action by their role, HasCompanyAccess)."""

    company: Company
    can_write: bool
    credential: IntegrationCredential | None = None
    staff_user: AbstractBaseUser | None = None

    @property
    def actor(self) -> AbstractBaseUser | None:
        """Who to record in the transition history (`by=`): the staff user, if any."""
        return self.staff_user

    @property
    def throttle_key(self) -> str:
        if self.credential is not None:
            return f"credential:{self.credential.pk}"
        return f"staff:{getattr(self.staff_user, 'pk', '')}"


class IntegrationClient:
    """The `request.user` of a token request: a system, not a person (no staff rights)."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    pk = None

    def __init__(self, credential: IntegrationCredential) -> None:
        self.credential = credential

    def __str__(self) -> str:
        return self.credential.name

    def get_username(self) -> str:
        return self.credential.name


class IntegrationTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer <token>` of an active IntegrationCredential."""

    def authenticate(self, request: Request) -> tuple[Any, IntegrationAccess] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != b"bearer":
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed(_("Credenciales no válidas."))
        try:
            token = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed(_("Credenciales no válidas.")) from None
        credential = integration_credential_authenticate(token)
        if credential is None:
            raise exceptions.AuthenticationFailed(_("Credenciales no válidas."))
        access = IntegrationAccess(
            company=credential.company, can_write=credential.can_write, credential=credential
        )
        return IntegrationClient(credential), access

    def authenticate_header(self, request: Request) -> str:
        # Its presence makes DRF answer 401 (not 403) to unauthenticated requests.
        return "Bearer"


def _staff_company(request: Request, user: AbstractBaseUser) -> Company:
    """The company a staff member works on: their only one, or the one they name (by slug in
    the X-Garante-Company header or the `company` query parameter) among theirs."""
    chosen = request.headers.get(COMPANY_HEADER) or request.GET.get(COMPANY_PARAMETER)
    companies = Company.objects.all()
    if not user.is_superuser:
        companies = companies.filter(
            pk__in=StaffMembership.objects.filter(user=user).values("company_id")
        )
    if chosen:
        companies = companies.filter(slug=chosen[:50])
    found = list(companies.order_by("pk")[:2])
    if len(found) == 1:
        return found[0]
    if not found and chosen:
        raise PermissionRefused(_("No trabaja para esa empresa."), code="company_not_yours")
    if not found:
        raise PermissionRefused(_("Su usuario no pertenece a ninguna empresa."), code="no_company")
    raise PermissionRefused(
        _("Indique la empresa con el parámetro company o la cabecera X-Garante-Company."),
        code="company_required",
    )


class StaffSessionAuthentication(SessionAuthentication):
    """A logged-in staff member (the browsable API), scoped to a company of theirs.

    Writes need the CSRF token like any session form (DRF enforces it here).
    """

    def authenticate(self, request: Request) -> tuple[Any, IntegrationAccess] | None:
        result = super().authenticate(request)
        if result is None:
            return None
        user = result[0]
        if not user.is_staff:
            return None
        company = _staff_company(request, user)
        # What they may change there depends on the action: HasCompanyAccess asks their role.
        return user, IntegrationAccess(company=company, can_write=False, staff_user=user)


class HasCompanyAccess(BasePermission):
    """Authenticated for a company, and allowed this action there (403 PERMISSION).

    A credential writes only with a read-write scope. A staff member may do what their role
    in the chosen company grants on the view's model (`view.company_permission()`), exactly
    as the admin decides it (core.roles.staff_company_ids): Django's permissions are global,
    so the group alone would let an agent here act as the admin they are elsewhere.
    """

    def has_permission(self, request: Request, view: Any) -> bool:
        access = request.auth
        if not isinstance(access, IntegrationAccess):
            raise exceptions.NotAuthenticated(_("Faltan las credenciales."))
        if access.staff_user is not None:
            return _staff_may(request, view, access)
        if request.method in SAFE_METHODS or access.can_write:
            return True
        raise PermissionRefused(
            _("Esta credencial es de solo lectura y no puede hacer cambios."),
            code="read_only_credential",
        )


def _staff_may(request: Request, view: Any, access: IntegrationAccess) -> bool:
    company_permission = getattr(view, "company_permission", None)
    if company_permission is None:  # the API root: an index, GET only
        return True
    allowed = staff_company_ids(request, company_permission())
    if allowed is None or access.company.pk in allowed:
        return True
    raise PermissionRefused(
        _("Su rol en esta empresa no le permite hacer eso."), code="role_not_allowed"
    )


class CredentialRateThrottle(SimpleRateThrottle):
    """A courtesy limit per credential (DEFAULT_THROTTLE_RATES["integration"]).

    Counted in fixed windows of the rate's period in the "shared" cache: Redis with
    GARANTE_REDIS_URL, so every web node and process counts the same caller once
    (docs/scaling.md); process memory without it. Each request adds one to its window's
    counter atomically (no read-then-write that concurrent requests could both pass), and is
    refused once the counter exceeds the rate, until the window ends. A cache that cannot be
    reached lets the request through: a guard against runaway clients, not a security
    control, must not turn a Redis outage into an API outage.
    """

    scope = "integration"

    def get_rate(self) -> str | None:
        # Read at request time (DRF binds THROTTLE_RATES at import), so settings can change.
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        access = request.auth
        if not isinstance(access, IntegrationAccess):
            return None
        return self.cache_format % {"scope": self.scope, "ident": access.throttle_key}

    def allow_request(self, request: Request, view: Any) -> bool:
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        now = self.timer()
        window = int(now // self.duration)
        self._retry_after = (window + 1) * self.duration - now
        counter = f"{key}:{window}"
        store = caches["shared"]
        try:
            # The window's counter expires with the window (and a second's margin).
            store.add(counter, 0, timeout=self.duration + 1)
            try:
                count = store.incr(counter)
            except ValueError:  # expired between the two statements: a new counter
                store.add(counter, 1, timeout=self.duration + 1)
                count = 1
        except Exception:
            logger.warning("integration throttle: the shared cache is unreachable; not counted")
            return True
        return count <= self.num_requests

    def wait(self) -> float | None:
        return getattr(self, "_retry_after", None)
