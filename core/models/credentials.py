"""The bearer tokens the agent platform's Gateway authenticates with."""

import hashlib
import secrets

from django.db import models
from django.utils.translation import gettext_lazy as _

from core.models.tenancy import Company


class GatewayCredential(models.Model):
    """A bearer token the agent platform's Gateway uses for one company.

    The token is shown once at creation; only its SHA-256 is stored (tokens are 256-bit random,
    so a fast hash is enough and lets the lookup be an index probe).
    """

    company = models.ForeignKey(
        Company,
        on_delete=models.CASCADE,
        related_name="gateway_credentials",
        verbose_name=_("company"),
    )
    name = models.CharField(_("name"), max_length=100)
    token_prefix = models.CharField(_("token prefix"), max_length=12, editable=False)
    token_hash = models.CharField(
        max_length=64, unique=True, editable=False, verbose_name=_("token hash")
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)

    TOKEN_PREFIX = "gt_"

    class Meta:
        verbose_name = _("gateway credential")
        verbose_name_plural = _("gateway credentials")

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
