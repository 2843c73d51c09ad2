"""The seeded `batch` tier scaled to zero with nothing that could wake it (issue 26): give it the nightly
window of scheduling.defaults, unless a platform admin has already changed those fields."""

from django.db import migrations

WINDOW = {"prewarm_start": "0 0 * * *", "prewarm_end": "0 6 * * *"}  # scheduling.defaults.SLA_TIERS["batch"]


def forwards(apps, schema_editor):
    SlaTier = apps.get_model("scheduling", "SlaTier")
    SlaTier.objects.filter(name="batch", min_replicas=0, prewarm_start="", prewarm_end="").update(**WINDOW)


def backwards(apps, schema_editor):
    SlaTier = apps.get_model("scheduling", "SlaTier")
    SlaTier.objects.filter(name="batch", **WINDOW).update(prewarm_start="", prewarm_end="")


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0009_catalog_revision")]

    operations = [migrations.RunPython(forwards, backwards)]
