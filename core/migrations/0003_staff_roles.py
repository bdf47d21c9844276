"""Create the staff role groups agent, supervisor and admin with their permissions (core.roles).

Permissions are normally created after all migrations (post_migrate); create them here first
for the models that exist at this point, so the groups are complete on a fresh database.
"""

from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions
from django.db import migrations


def create_role_groups(apps, schema_editor):
    from core.roles import role_groups_sync

    alias = schema_editor.connection.alias
    for app_config in global_apps.get_app_configs():
        create_permissions(app_config, verbosity=0, using=alias, apps=apps)
    role_groups_sync(apps=apps, using=alias)


def remove_role_groups(apps, schema_editor):
    from core.roles import ROLES

    apps.get_model("auth", "Group").objects.using(schema_editor.connection.alias).filter(
        name__in=ROLES
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0002_identity_verification"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("tooling", "0004_tool_call"),
        ("agenda", "0002_professionals_schedules_appointments"),
        ("sales", "0001_initial"),
        ("support", "0001_initial"),
        ("integration", "0001_initial"),
        ("django_fsm_log", "0004_auto_20190131_0341"),
    ]

    operations = [migrations.RunPython(create_role_groups, remove_role_groups)]
