"""Issue 26, F6: an endpoint may serve a gated Hugging Face model (needs the tenant's token from OpenBao)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0010_batch_tier_wake_window")]

    operations = [
        migrations.AddField(
            model_name="inferenceendpoint",
            name="gated",
            field=models.BooleanField(default=False, db_default=False, help_text="the model is gated: serving needs the tenant's "
                                                               "Hugging Face token from OpenBao"),
        ),
    ]
