"""Integration API records: the company systems' credentials, and public references for the
entities that have none of their own (contacts, services, professionals)."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from agenda.models import Professional, Service
from core.models import BearerCredential, Company, Contact


class IntegrationCredential(BearerCredential):
    """A bearer token one of the company's own systems (website, ERP, call centre) uses. A
    read-only credential cannot write."""

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

    TOKEN_PREFIX = "gi_"
    ISSUE_FIELDS = ("scope",)

    class Meta:
        verbose_name = _("integration credential")
        verbose_name_plural = _("integration credentials")
        ordering = ["company", "name"]

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
