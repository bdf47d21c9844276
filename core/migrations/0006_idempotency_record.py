"""IdempotencyRecord moves from the tool API (tooling) to the kernel, below both APIs: in
Django's state only. The table, its rows, constraint and indexes stay as they are
(Meta.db_table keeps the name); tooling's 0006 removes the model from tooling's state. The
model's content type moves with it, so the permissions already granted (and the admin's log
entries) follow the model instead of pointing at a model tooling no longer has."""

import django.db.models.deletion
from django.db import migrations, models


def content_type_move(apps, schema_editor, *, source: str, target: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    types = ContentType.objects.using(schema_editor.connection.alias)
    if not types.filter(app_label=target, model="idempotencyrecord").exists():
        types.filter(app_label=source, model="idempotencyrecord").update(app_label=target)


def to_core(apps, schema_editor) -> None:
    content_type_move(apps, schema_editor, source="tooling", target="core")


def to_tooling(apps, schema_editor) -> None:
    content_type_move(apps, schema_editor, source="core", target="tooling")


class Migration(migrations.Migration):
    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("core", "0005_identification_limits"),
        # The table is created, and last altered, by tooling's migrations.
        ("tooling", "0005_exposed_reference_kinds"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="IdempotencyRecord",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("key", models.CharField(max_length=255, verbose_name="key")),
                        ("operation", models.CharField(max_length=200, verbose_name="operation")),
                        (
                            "fingerprint",
                            models.CharField(max_length=64, verbose_name="fingerprint"),
                        ),
                        (
                            "response",
                            models.TextField(blank=True, null=True, verbose_name="response"),
                        ),
                        (
                            "status_code",
                            models.PositiveSmallIntegerField(
                                default=200, verbose_name="status code"
                            ),
                        ),
                        ("created_at", models.DateTimeField(verbose_name="created")),
                        ("replay_until", models.DateTimeField(verbose_name="replayable until")),
                        (
                            "expires_at",
                            models.DateTimeField(db_index=True, verbose_name="forgotten at"),
                        ),
                        (
                            "replay_count",
                            models.PositiveIntegerField(default=0, verbose_name="replays"),
                        ),
                        (
                            "last_replayed_at",
                            models.DateTimeField(
                                blank=True, null=True, verbose_name="last replayed"
                            ),
                        ),
                        (
                            "company",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="core.company",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "idempotency record",
                        "verbose_name_plural": "idempotency records",
                        "db_table": "tooling_idempotencyrecord",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("company", "key"), name="unique_idempotency_key"
                            )
                        ],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(to_core, to_tooling, elidable=True),
    ]
