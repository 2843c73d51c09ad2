"""Seed the default GPU allocation modes per trust level (DESIGN.md §3). Admins edit them afterwards."""

from django.db import migrations

# Frozen copy of tenants.isolation.policy.DEFAULT_MODES at the time of writing: a migration must not
# change meaning when the code's defaults change later.
DEFAULTS = {
    "untrusted": (["whole"], False),
    "standard": (["whole", "mig"], True),
    "trusted": (["whole", "mig", "hami"], True),
}


def seed(apps, schema_editor):
    AllocationPolicy = apps.get_model("tenants", "AllocationPolicy")
    for level, (modes, world_egress) in DEFAULTS.items():
        AllocationPolicy.objects.get_or_create(
            trust_level=level, defaults={"allowed_modes": modes, "world_egress": world_egress}
        )


def unseed(apps, schema_editor):
    apps.get_model("tenants", "AllocationPolicy").objects.filter(trust_level__in=DEFAULTS).delete()


class Migration(migrations.Migration):
    dependencies = [("tenants", "0002_gpu_allocation_policy")]
    operations = [migrations.RunPython(seed, unseed)]
