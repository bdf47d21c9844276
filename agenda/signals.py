"""Receivers of the agenda app, connected in AgendaConfig.ready()."""

from typing import Any

from django.db.models.signals import m2m_changed, post_delete, post_save
from django.dispatch import receiver

from agenda.models import Professional, Service, lock_schedules
from agenda.selectors import catalogue


@receiver(post_save, sender=Service, dispatch_uid="agenda.service_saved_forget_catalogue")
@receiver(post_delete, sender=Service, dispatch_uid="agenda.service_deleted_forget_catalogue")
def service_changed(sender: type, instance: Service, **kwargs: Any) -> None:
    """A new, renamed or withdrawn service shows in the catalogue at once in this process."""
    catalogue.forget_changed(tag=instance.company_id)


@receiver(
    m2m_changed, sender=Professional.services.through, dispatch_uid="agenda.services_given_lock"
)
def services_given_changing(
    sender: type,
    instance: Professional | Service,
    action: str,
    reverse: bool,
    pk_set: set[int] | None,
    using: str,
    **kwargs: Any,
) -> None:
    """Who gives which service is part of a professional's schedule: a change locks the
    professionals it touches before it writes (`lock_schedules`; Django runs the change and
    these signals in one transaction)."""
    if not action.startswith("pre_"):
        return
    if not reverse:
        lock_schedules([instance.pk], using=using)
    elif pk_set is not None:
        lock_schedules(pk_set, using=using)
    else:  # a service's professionals cleared
        lock_schedules(
            instance.professionals.using(using).values_list("pk", flat=True), using=using
        )
