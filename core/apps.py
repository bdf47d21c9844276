from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules
from django.utils.translation import gettext_lazy as _


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = _("Customers and company")

    def ready(self) -> None:
        from core import signals  # noqa: F401  (connects the receivers)
        from core.idempotency import admin  # noqa: F401  (not core.admin's: it imports that)

        # Each app declares its own staff grants (`roles`, core.roles), landing-page panels
        # (`dashboard`, core.dashboard) and sections of the customer's file (`contact_file`,
        # core.contact_file), found the way the admin finds `admin` modules.
        autodiscover_modules("roles", "dashboard", "contact_file")

        # A customer's confirmation of an action is answered by its one-tap link too
        # (core.verification.confirmation); the step-up's answer is check.py's own.
        from core.models import VerificationChallenge
        from core.verification.check import link_answer_register
        from core.verification.confirmation import CONFIRMATION_LINK_ANSWER

        link_answer_register(VerificationChallenge.Purpose.CONFIRMATION, CONFIRMATION_LINK_ANSWER)
