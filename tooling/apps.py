from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules
from django.utils.translation import gettext_lazy as _


class ToolingConfig(AppConfig):
    name = "tooling"
    verbose_name = _("Tool API")

    def ready(self) -> None:
        # Each installed app declares its tools in tools.py; importing registers them.
        autodiscover_modules("tools")
