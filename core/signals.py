"""Receivers of the core app, connected in CoreConfig.ready()."""

from typing import Any

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from core.identity.step_up import step_up_policies
from core.models import Company, GatewayCredential, StepUpPolicy
from core.selectors import authentications


@receiver(post_save, sender=Company, dispatch_uid="core.company_saved_forget_authentications")
@receiver(post_delete, sender=Company, dispatch_uid="core.company_deleted_forget_authentications")
def company_changed(sender: type, instance: Company, **kwargs: Any) -> None:
    """A renamed, re-languaged or deleted company is served as it now is, at once here."""
    authentications.forget_changed(tag=instance.pk)


@receiver(
    post_save, sender=GatewayCredential, dispatch_uid="core.credential_saved_forget_authentications"
)
@receiver(
    post_delete,
    sender=GatewayCredential,
    dispatch_uid="core.credential_deleted_forget_authentications",
)
def gateway_credential_changed(sender: type, instance: GatewayCredential, **kwargs: Any) -> None:
    """A revoked or deleted credential stops working at once in this process."""
    authentications.forget_changed(tag=instance.company_id)


@receiver(post_save, sender=StepUpPolicy, dispatch_uid="core.step_up_policy_saved_forget")
@receiver(post_delete, sender=StepUpPolicy, dispatch_uid="core.step_up_policy_deleted_forget")
def step_up_policy_changed(sender: type, instance: StepUpPolicy, **kwargs: Any) -> None:
    """A tool added to or removed from step-up is treated so at once in this process."""
    step_up_policies.forget_changed(tag=instance.company_id)
