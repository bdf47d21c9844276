from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules
from django.utils.translation import gettext_lazy as _


class ToolingConfig(AppConfig):
    name = "tooling"
    verbose_name = _("Tool API")

    def ready(self) -> None:
        from core.step_up import step_up_actions_from

        # Each installed app declares its tools in tools.py; importing registers them.
        autodiscover_modules("tools")
        step_up_actions_from(tools_taking_step_up)


def tools_taking_step_up() -> list[str]:
    """The tools a step-up policy may name (core.step_up): those that can ask for a code."""
    from tooling.registry import registry

    return [t.name for t in registry.all() if t.takes_step_up]
