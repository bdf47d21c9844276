"""IdempotencyRecord now belongs to core (core's 0006, which takes it over in Django's state):
removed from tooling's state only; the table and its rows stay, now core's."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("tooling", "0005_exposed_reference_kinds"),
        ("core", "0006_idempotency_record"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="IdempotencyRecord")],
            database_operations=[],
        ),
    ]
