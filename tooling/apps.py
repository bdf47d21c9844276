from importlib import import_module

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules
from django.utils.translation import gettext_lazy as _


class ToolingConfig(AppConfig):
    name = "tooling"
    verbose_name = _("Tool API")

    def ready(self) -> None:
        from core.step_up_choices import confirm_choices_from, step_up_choices_from

        # Each installed app declares its tools in tools.py; importing registers them. The
        # identity tools are the platform's own, declared in tooling.identity_tools.
        import_module("tooling.identity_tools")
        autodiscover_modules("tools")
        step_up_choices_from(tools_taking_step_up)
        confirm_choices_from(tools_taking_confirmation)


def tools_taking_step_up() -> list[str]:
    """The actions a step-up policy may name (core.step_up_choices): those the tools declare on
    `@tool`, which the platform asks a code for."""
    from tooling.registry import registry

    return sorted(registry.step_up_actions())


def tools_taking_confirmation() -> list[str]:
    """The actions a policy may have the customer confirm (core.step_up_choices): the tools
    declared `confirmation=True`, which ask it before they act."""
    from tooling.registry import registry

    return sorted(registry.confirm_actions())
