from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agenda", "0009_manage_link_keys"),
    ]

    operations = [
        migrations.AddField(
            model_name="appointmentmessage",
            name="reason",
            field=models.CharField(blank=True, max_length=300, verbose_name="reason"),
        ),
    ]
