"""Integration API records: the company systems' credentials, and public references for the
entities that have none of their own (contacts, services, professionals)."""

import hashlib
import secrets

from django.db import models
from django.utils.translation import gettext_lazy as _

from agenda.models import Professional, Service
from core.models import Company, Contact


class IntegrationCredential(models.Model):
    """A bearer token one of the company's own systems (website, ERP, call centre) uses.

    Shown once at creation; only its SHA-256 is stored (256-bit random tokens, so a fast hash
    is enough and the lookup is an index probe). A read-only credential cannot write.
    """

    class Scope(models.TextChoices):
        READ = "read", _("Read only")
        READ_WRITE = "read_write", _("Read and write")

    company = models.ForeignKey(
        Company,
        on_delete=models.CASCADE,
        related_name="integration_credentials",
        verbose_name=_("company"),
    )
    name = models.CharField(_("name"), max_length=100, help_text=_("Which system uses it."))
    scope = models.CharField(_("scope"), max_length=16, choices=Scope.choices, default=Scope.READ)
    token_prefix = models.CharField(_("token prefix"), max_length=12, editable=False)
    token_hash = models.CharField(
        max_length=64, unique=True, editable=False, verbose_name=_("token hash")
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True, editable=False)

    TOKEN_PREFIX = "gi_"

    class Meta:
        verbose_name = _("integration credential")
        verbose_name_plural = _("integration credentials")
        ordering = ["company", "name"]

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

    @property
    def can_write(self) -> bool:
        return self.scope == self.Scope.READ_WRITE


class PublicReference(models.Model):
    """A short public code (e.g. CT-7K2F9Q) given to an entity the first time the integration
    API shows it, so URLs and bodies never carry primary keys."""

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="+", verbose_name=_("company")
    )
    reference = models.CharField(_("reference"), max_length=16)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return self.reference


class ContactReference(PublicReference):
    contact = models.OneToOneField(
        Contact,
        on_delete=models.CASCADE,
        related_name="integration_reference",
        verbose_name=_("contact"),
    )

    class Meta:
        verbose_name = _("contact reference")
        verbose_name_plural = _("contact references")
        constraints = [
            models.UniqueConstraint(
                fields=["company", "reference"], name="unique_contact_public_reference"
            ),
        ]


class ServiceReference(PublicReference):
    service = models.OneToOneField(
        Service,
        on_delete=models.CASCADE,
        related_name="integration_reference",
        verbose_name=_("service"),
    )

    class Meta:
        verbose_name = _("service reference")
        verbose_name_plural = _("service references")
        constraints = [
            models.UniqueConstraint(
                fields=["company", "reference"], name="unique_service_public_reference"
            ),
        ]


class ProfessionalReference(PublicReference):
    professional = models.OneToOneField(
        Professional,
        on_delete=models.CASCADE,
        related_name="integration_reference",
        verbose_name=_("professional"),
    )

    class Meta:
        verbose_name = _("professional reference")
        verbose_name_plural = _("professional references")
        constraints = [
            models.UniqueConstraint(
                fields=["company", "reference"], name="unique_professional_public_reference"
            ),
        ]
