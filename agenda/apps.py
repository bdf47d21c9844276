from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AgendaConfig(AppConfig):
    name = "agenda"
    verbose_name = _("Agenda")

    def ready(self) -> None:
        from agenda import signals  # noqa: F401  (connects the receivers)
