from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sales", "0005_leads"),
    ]

    operations = [
        migrations.AddField(
            model_name="quote",
            name="page_key",
            field=models.CharField(
                blank=True,
                editable=False,
                max_length=32,
                null=True,
                unique=True,
                verbose_name="page link key",
            ),
        ),
    ]
