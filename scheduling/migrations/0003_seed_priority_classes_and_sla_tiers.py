from django.db import migrations


def seed(apps, schema_editor):
    from scheduling.defaults import PRIORITY_CLASSES, SLA_TIERS

    PriorityClass = apps.get_model("scheduling", "PriorityClass")
    SlaTier = apps.get_model("scheduling", "SlaTier")
    for name, value, description in PRIORITY_CLASSES:
        PriorityClass.objects.get_or_create(name=name, defaults={"value": value, "description": description})
    for name, fields in SLA_TIERS.items():
        SlaTier.objects.get_or_create(name=name, defaults=fields)


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0002_quotas_cohorts_endpoints_node_pools")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
