"""Staff roles: the Django groups agent, sales, supervisor and admin, and keeping users in them.

A staff member's role lives on their StaffMembership (one per company); the permissions come
from the group of the same name. The groups' permissions are declared in code, each app
granting its own models in its `roles` module (`staff_grants`; core's are below): a data
migration creates the groups and every `migrate` re-applies them (post_migrate), so models
added later get their permissions without another migration. Edits made to these groups in
the admin are overwritten on the next migrate; make another group for a custom set.

Django's permissions are global to a user, so someone who is an admin in one company and an
agent in another holds both groups. `staff_company_ids(request, permission)` applies them
per company, for the admin (core.admin.CompanyScopedAdmin) and the integration API's staff
sessions alike: in each company they may do what their role there grants, and see nothing of
companies they are not in.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from django.apps import apps as global_apps
from django.apps.registry import Apps
from django.contrib.auth import get_user_model
from django.contrib.auth.management import create_permissions
from django.contrib.auth.models import AbstractBaseUser, Group, Permission
from django.db import DEFAULT_DB_ALIAS, transaction
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from core.models import Company, StaffMembership

ROLES = tuple(StaffMembership.Role.values)  # ("agent", "sales", "supervisor", "admin")


@dataclass(frozen=True)
class StaffGrants:
    """What each role may do with one app's models (model names in lower case).

    Agents serve customers at the front desk; salespeople are agents who also run quotes and
    the pipeline (`sales_*`); supervisors hold both and `supervisor_*`. `records` are the
    audit trail (tool calls, security events...): viewable as the tiers say, but on the menu
    only of supervisors and admins, who oversee the work; agents and salespeople reach them
    through the links of the pages they work in."""

    app_label: str
    agent_view: tuple[str, ...] = ()
    agent_add: tuple[str, ...] = ()
    agent_change: tuple[str, ...] = ()
    sales_view: tuple[str, ...] = ()
    sales_add: tuple[str, ...] = ()
    sales_change: tuple[str, ...] = ()
    records: tuple[str, ...] = ()
    supervisor_view: tuple[str, ...] = ()
    supervisor_add: tuple[str, ...] = ()
    supervisor_change: tuple[str, ...] = ()
    supervisor_delete: tuple[str, ...] = ()


# Filled by each app's roles module (found by autodiscovery, core.apps): the apps whose
# permissions roles hand out, and what agents and supervisors get of each.
_GRANTS: dict[str, StaffGrants] = {}


def staff_grants(app_label: str, **grants: Iterable[str]) -> None:
    """Declare an app's models to the staff roles: agents get `agent_*`, salespeople that and
    `sales_*`, supervisors all of those and `supervisor_*`, admins every permission of every
    app declared here (even with no grants) except creating and deleting companies. `records`
    keeps models off the menu of agents and salespeople (StaffGrants)."""
    _GRANTS[app_label] = StaffGrants(
        app_label, **{name: tuple(models) for name, models in grants.items()}
    )


def staff_apps() -> tuple[str, ...]:
    """The apps whose permissions roles hand out."""
    return tuple(_GRANTS)


# Admins hold every permission of the staff apps (credentials, memberships, policies) except
# creating and deleting companies: tenants are the platform operator's (a superuser's) call.
_ADMIN_EXCLUDED = {("core", "add_company"), ("core", "delete_company")}


def _codenames(tier: str) -> set[tuple[str, str]]:
    found = set()
    for grants in _GRANTS.values():
        for action in ("view", "add", "change", "delete"):
            for model in getattr(grants, f"{tier}_{action}", ()):
                found.add((grants.app_label, f"{action}_{model}"))
    return found


def role_permission_keys(role: str) -> set[tuple[str, str]] | None:
    """(app_label, codename) pairs a role grants; None for admin, meaning "all but a few"."""
    if role == StaffMembership.Role.AGENT:
        return _codenames("agent")
    if role == StaffMembership.Role.SALES:
        return _codenames("agent") | _codenames("sales")
    if role == StaffMembership.Role.SUPERVISOR:
        return _codenames("agent") | _codenames("sales") | _codenames("supervisor")
    if role == StaffMembership.Role.ADMIN:
        return None
    raise ValueError(f"unknown role {role!r}")


# The roles that oversee the work: the audit records are on their menu.
_OVERSEEING = {StaffMembership.Role.SUPERVISOR, StaffMembership.Role.ADMIN}


def role_off_menu(role: str) -> set[tuple[str, str]]:
    """(app_label, model_name) pairs a role may open but that stay off its menu: the
    records, for the roles that do not oversee the work."""
    if role in _OVERSEEING:
        return set()
    return {(grants.app_label, model) for grants in _GRANTS.values() for model in grants.records}


def roles_granting(permission: str) -> list[str]:
    """The roles whose group holds `permission` ("app_label.codename"), as declared in code:
    whom a company's work of a kind is for (its sales staff: the roles that run the pipeline)."""
    app_label, _, codename = permission.partition(".")
    found = []
    for role in ROLES:
        keys = role_permission_keys(role)
        if keys is None:
            granted = app_label in staff_apps() and (app_label, codename) not in _ADMIN_EXCLUDED
        else:
            granted = (app_label, codename) in keys
        if granted:
            found.append(role)
    return found


def staff_with_permission(*, permission: str, company_ids: Iterable[int] | None) -> QuerySet:
    """The active staff users who may do `permission` ("app_label.codename") in one of
    `company_ids` (None: any company), by the rule of `staff_company_ids`: their role in
    that company grants it, or they hold it themselves or through a custom group. Whom a
    company's work of a kind is for (its sales staff: those who may change opportunities)."""
    app_label, _, codename = permission.partition(".")
    memberships = StaffMembership.objects.all()
    if company_ids is not None:
        memberships = memberships.filter(company_id__in=list(company_ids))
    User = get_user_model()
    held = Permission.objects.filter(content_type__app_label=app_label, codename=codename)
    custom_groups = Group.objects.filter(permissions__in=held).exclude(name__in=ROLES)
    return User.objects.filter(is_active=True, pk__in=memberships.values("user_id")).filter(
        Q(pk__in=memberships.filter(role__in=roles_granting(permission)).values("user_id"))
        | Q(
            pk__in=User.user_permissions.through.objects.filter(permission__in=held).values(
                "user_id"
            )
        )
        | Q(pk__in=User.groups.through.objects.filter(group__in=custom_groups).values("user_id"))
    )


def role_groups_sync(*, apps: Apps = global_apps, using: str = DEFAULT_DB_ALIAS) -> None:
    """Create the role groups and give each exactly its permissions.

    Takes an app registry so the data migration can run it on the historical models; with
    the historical registry only the models that exist at that point get permissions.
    """
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    staff_permissions = Permission.objects.using(using).filter(
        content_type__app_label__in=staff_apps()
    )
    for role in ROLES:
        group, _ = Group.objects.using(using).get_or_create(name=role)
        keys = role_permission_keys(role)
        if keys is None:
            excluded = Q()
            for app_label, codename in _ADMIN_EXCLUDED:
                excluded |= Q(content_type__app_label=app_label, codename=codename)
            permissions = staff_permissions.exclude(excluded)
        else:
            wanted = Q(pk__in=[])
            for app_label, codename in keys:
                wanted |= Q(content_type__app_label=app_label, codename=codename)
            permissions = staff_permissions.filter(wanted)
        group.permissions.set(list(permissions))


def role_groups_sync_after_migrate(sender, using: str = DEFAULT_DB_ALIAS, **kwargs) -> None:
    """post_migrate receiver (also after a test flush): re-apply the roles once per run, when
    the last staff app's signal comes. Receivers run in connection order and this one may
    come before auth's, so the staff apps' permissions are created first (idempotent)."""
    if getattr(sender, "label", None) != _last_staff_app_label():
        return
    apps = kwargs.get("apps") or global_apps
    for app_config in global_apps.get_app_configs():
        if app_config.label in staff_apps():
            create_permissions(app_config, verbosity=0, using=using, apps=apps)
    role_groups_sync(apps=apps, using=using)


def _last_staff_app_label() -> str:
    installed = [c.label for c in global_apps.get_app_configs() if c.label in staff_apps()]
    return installed[-1]


@transaction.atomic
def staff_roles_sync(*, user: AbstractBaseUser) -> None:
    """Put the user in exactly the role groups of their memberships, and mark them staff.

    Call after any change to the user's memberships. A user with no membership left keeps
    their account but leaves every role group (and so the admin, unless a superuser).
    """
    roles = set(StaffMembership.objects.filter(user=user).values_list("role", flat=True))
    groups = {g.name: g for g in Group.objects.filter(name__in=ROLES)}
    user.groups.remove(*[g for name, g in groups.items() if name not in roles])
    user.groups.add(*[g for name, g in groups.items() if name in roles])
    if roles and not user.is_staff:
        user.is_staff = True
        user.save(update_fields=["is_staff"])


@transaction.atomic
def staff_membership_set(*, user: AbstractBaseUser, company: Company, role: str) -> StaffMembership:
    """Give a user a role in a company (creating the membership or changing its role)."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}")
    membership, _ = StaffMembership.objects.update_or_create(
        user=user, company=company, defaults={"role": role}
    )
    staff_roles_sync(user=user)
    return membership


@transaction.atomic
def staff_membership_remove(*, memberships: Iterable[StaffMembership]) -> int:
    """Remove memberships and take their users out of the roles they no longer hold."""
    memberships = list(memberships)
    users = {m.user_id: m.user for m in memberships}
    removed = StaffMembership.objects.filter(pk__in=[m.pk for m in memberships]).delete()[0]
    for user in users.values():
        staff_roles_sync(user=user)
    return removed


@dataclass(frozen=True)
class _StaffAccess:
    """A staff user's roles by company, what each role grants, and what they hold besides
    (permissions of their own or of a custom group, which count in every company of theirs)."""

    roles: dict[int, str]
    role_permissions: dict[str, frozenset[str]]
    other_permissions: frozenset[str]

    def companies(self, permission: str | None) -> list[int]:
        if permission is None or permission in self.other_permissions:
            return list(self.roles)
        return [
            company_id
            for company_id, role in self.roles.items()
            if permission in self.role_permissions.get(role, ())
        ]


def _staff_access(request: HttpRequest) -> _StaffAccess:
    cached = getattr(request, "_garante_staff_access", None)
    if cached is not None:
        return cached
    user = request.user
    roles = dict(StaffMembership.objects.filter(user=user).values_list("company_id", "role"))
    granted: dict[str, set[str]] = {}
    for role, app_label, codename in Permission.objects.filter(
        group__name__in=set(roles.values())
    ).values_list("group__name", "content_type__app_label", "codename"):
        granted.setdefault(role, set()).add(f"{app_label}.{codename}")
    other = Permission.objects.filter(
        Q(user=user) | Q(group__in=user.groups.exclude(name__in=ROLES))
    ).values_list("content_type__app_label", "codename")
    access = _StaffAccess(
        roles=roles,
        role_permissions={role: frozenset(perms) for role, perms in granted.items()},
        other_permissions=frozenset(f"{app_label}.{codename}" for app_label, codename in other),
    )
    request._garante_staff_access = access  # type: ignore[attr-defined]
    return access


def staff_off_menu(request: HttpRequest) -> set[tuple[str, str]]:
    """(app_label, model_name) pairs off a staff member's admin menu: those every role of
    theirs keeps off (role_off_menu; a supervisor in one company and an agent in another sees
    the records), unless they were given permissions of their own or a custom group, whose
    entries they see as Django shows them."""
    if not request.user.is_authenticated or request.user.is_superuser:
        return set()
    access = _staff_access(request)
    roles = set(access.roles.values())
    if not roles or access.other_permissions:
        return set()
    return set.intersection(*(role_off_menu(role) for role in roles))


def staff_company_ids(request: HttpRequest, permission: str | None = None) -> list[int] | None:
    """The companies a staff user may see; None means all (superusers). With `permission`
    ("app_label.codename"), only those where it is granted: by the user's role in that company
    (a role is a group of the same name, core.roles), or by a permission of their own or of a
    custom group, which counts in each of their companies. Django's permissions are global,
    so without this an admin of one company would act as an admin in every other company of
    theirs, where they may be an agent."""
    if request.user.is_superuser:
        return None
    return _staff_access(request).companies(permission)


# Agents serve customers: they see the companies, contacts and conversations (and what a
# sandbox company would have sent its customers, its outbox), and keep contacts up to date.
# Supervisors also see who is on the team and its policies, and send verification codes, and
# see the idempotency records of every API's writes. The transition log
# (django_fsm_log) of the apps' state machines is everyone's to see. Security events,
# verification codes and the outbox are records: agents open them from a contact or a
# conversation, supervisors also from the menu.
staff_grants(
    "core",
    agent_view=[
        "company",
        "contact",
        "conversation",
        "securityevent",
        "verificationchallenge",
        "outboxmessage",
    ],
    agent_add=["contact"],
    agent_change=["contact"],
    records=["securityevent", "verificationchallenge", "outboxmessage"],
    supervisor_view=["staffmembership", "stepuppolicy", "idempotencyrecord"],
    supervisor_add=["verificationchallenge"],
    supervisor_change=["verificationchallenge"],
)
staff_grants("django_fsm_log", agent_view=["statelog"])
