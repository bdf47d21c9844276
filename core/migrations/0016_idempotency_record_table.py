"""IdempotencyRecord's table takes core's name (core_idempotencyrecord, Django's default for the
model) instead of the one it kept from the tool API, tooling_idempotencyrecord, since the model
moved to core (0006). A rename: the rows, the constraint and the indexes go with the table."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0015_credential_base"),
    ]

    operations = [
        migrations.AlterModelTable(
            name="idempotencyrecord",
            table=None,
        ),
    ]
