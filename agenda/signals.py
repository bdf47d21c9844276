"""Receivers of the agenda app, connected in AgendaConfig.ready()."""

from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from agenda.models import Service
from agenda.selectors import catalogue


@receiver(post_save, sender=Service, dispatch_uid="agenda.service_saved_forget_catalogue")
@receiver(post_delete, sender=Service, dispatch_uid="agenda.service_deleted_forget_catalogue")
def service_changed(sender: type, instance: Service, **kwargs: Any) -> None:
    """A new, renamed or withdrawn service shows in the catalogue at once in this process."""
    catalogue.forget_changed(tag=instance.company_id)
