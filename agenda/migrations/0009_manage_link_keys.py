from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agenda", "0008_calendar_feeds"),
    ]

    operations = [
        migrations.AddField(
            model_name="appointmentmessage",
            name="manage_key",
            field=models.CharField(
                blank=True,
                editable=False,
                max_length=32,
                null=True,
                unique=True,
                verbose_name="manage link key",
            ),
        ),
    ]
