"""Bearer credentials: what every kind shares (BearerCredential), and the agent platform's
Gateway's kind. The integration API's kind is integration.models.IntegrationCredential; both
go through one lifecycle, core.credentials."""

import hashlib
import secrets
from typing import ClassVar

from django.db import models
from django.utils.translation import gettext_lazy as _

from core.models.tenancy import Company


class BearerCredential(models.Model):
    """A bearer token one company hands to a system that calls Garante for it.

    The token is shown once at creation; only its SHA-256 is stored (tokens are 256-bit random,
    so a fast hash is enough and lets the lookup be an index probe). Revocation is for good and
    goes through core.credentials, never through a form. A concrete kind adds its `company`
    foreign key (with its own related name), its TOKEN_PREFIX and, in ISSUE_FIELDS, what else
    a token is issued with and keeps for life.
    """

    name = models.CharField(_("name"), max_length=100)
    token_prefix = models.CharField(_("token prefix"), max_length=12, editable=False)
    token_hash = models.CharField(
        max_length=64, unique=True, editable=False, verbose_name=_("token hash")
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True, editable=False)

    # What the clear token starts with, so a leaked one says which kind it is.
    TOKEN_PREFIX: ClassVar[str]
    # Fields besides the company and the name that a token is issued with and keeps: a
    # rotation carries them over, the admin shows them read-only once issued.
    ISSUE_FIELDS: ClassVar[tuple[str, ...]] = ()

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.name} ({self.token_prefix}…)"

    @staticmethod
    def hash_token(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    @classmethod
    def new_token(cls) -> str:
        return cls.TOKEN_PREFIX + secrets.token_urlsafe(32)

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class GatewayCredential(BearerCredential):
    """A bearer token the agent platform's Gateway uses for one company."""

    company = models.ForeignKey(
        Company,
        on_delete=models.CASCADE,
        related_name="gateway_credentials",
        verbose_name=_("company"),
    )

    TOKEN_PREFIX = "gt_"

    class Meta:
        verbose_name = _("gateway credential")
        verbose_name_plural = _("gateway credentials")
