"""Host clusters (issue 9): Cluster, ClusterFlavor, Placement, PlacementChangeRequest, and the cluster of node
pools, quotas and quota requests. An existing single-cluster installation becomes the cluster `default`: every
node pool, quota and quota request points at it, every flavor is offered there with its whole capacity, and every
tenant gets its home placement there -- so nothing rendered changes content."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import scheduling.clusters.models

# Frozen: a migration must not change meaning when the code's constant does.
DEFAULT = "default"
# The first row of the new table: the database default of the per-cluster foreign keys added below (existing
# node pools, quotas and quota requests get it as they gain the column).
DEFAULT_ID = 1


def to_default_cluster(apps, schema_editor):
    Cluster = apps.get_model("scheduling", "Cluster")
    default, _ = Cluster.objects.get_or_create(name=DEFAULT, defaults={"purpose": "general"})
    if default.pk != DEFAULT_ID:
        raise RuntimeError(f"the cluster 'default' got id {default.pk}, expected {DEFAULT_ID} (a new table's first row)")
    ClusterFlavor = apps.get_model("scheduling", "ClusterFlavor")
    for flavor in apps.get_model("scheduling", "Flavor").objects.all():
        ClusterFlavor.objects.get_or_create(cluster=default, flavor=flavor, defaults={"capacity": flavor.capacity})
    Placement = apps.get_model("scheduling", "Placement")
    homed = set(Placement.objects.filter(home=True).values_list("tenant_id", flat=True))
    Placement.objects.bulk_create(
        Placement(tenant_id=pk, cluster=default, home=True)
        for pk in apps.get_model("tenants", "Tenant").objects.exclude(pk__in=homed).values_list("pk", flat=True)
    )
    # The FK checks of the rows just written are deferred; the ALTER TABLEs that follow in this
    # transaction refuse to run with pending trigger events, so fire them now.
    schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def from_default_cluster(apps, schema_editor):
    # The reverse drops the tables and columns; nothing to undo row by row.
    pass


class Migration(migrations.Migration):

    dependencies = [
        ("scheduling", "0007_sync_run_repository"),
        ("tenants", "0003_seed_allocation_policy"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Cluster",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(help_text="Kubernetes DNS label", max_length=63, unique=True)),
                ("purpose", models.CharField(choices=[("training", "Training"), ("inference", "Inference"), ("dev", "Dev"), ("general", "General")], default="general", max_length=20)),
                ("region", models.CharField(blank=True, help_text="region id, e.g. eu-west-1", max_length=63)),
                ("region_name", models.CharField(blank=True, help_text="human name of the region", max_length=200)),
                ("zones", models.JSONField(blank=True, default=list, help_text="availability zones, may be empty")),
                ("trust_levels", models.JSONField(blank=True, default=list)),
                ("gitops_path", models.CharField(blank=True, max_length=200)),
                ("kube_api", models.CharField(blank=True, max_length=300)),
                ("kubeconfig_secret", models.CharField(blank=True, max_length=300)),
                ("metrics_url", models.CharField(blank=True, max_length=300)),
                ("metrics_label", models.CharField(blank=True, max_length=63)),
                ("reachable", models.BooleanField(blank=True, null=True)),
                ("last_sync_at", models.DateTimeField(blank=True, null=True)),
                ("drift", models.PositiveIntegerField(default=0)),
                ("status_message", models.TextField(blank=True)),
                ("created", models.DateTimeField(auto_now_add=True)),
            ],
            options={"ordering": ["name"]},
        ),
        migrations.CreateModel(
            name="ClusterFlavor",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("capacity", models.PositiveIntegerField(default=0)),
                ("cluster", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="flavors", to="scheduling.cluster")),
                ("flavor", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="cluster_offers", to="scheduling.flavor")),
            ],
            options={
                "ordering": ["cluster__name", "flavor__name"],
                "constraints": [models.UniqueConstraint(fields=("cluster", "flavor"), name="clusterflavor_unique")],
            },
        ),
        migrations.CreateModel(
            name="Placement",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("home", models.BooleanField(default=False)),
                ("conditions", models.JSONField(blank=True, default=list)),
                ("last_reconciled_at", models.DateTimeField(blank=True, null=True)),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("cluster", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="placements", to="scheduling.cluster")),
                ("tenant", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="placements", to="tenants.tenant")),
            ],
            options={
                "ordering": ["tenant__slug", "-home", "cluster__name"],
                "constraints": [
                    models.UniqueConstraint(fields=("tenant", "cluster"), name="placement_unique_tenant_cluster"),
                    models.UniqueConstraint(condition=models.Q(("home", True)), fields=("tenant",), name="placement_one_home"),
                ],
            },
        ),
        migrations.CreateModel(
            name="PlacementChangeRequest",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("action", models.CharField(choices=[("add", "Add"), ("remove", "Remove"), ("set-home", "Set Home")], max_length=10)),
                ("reason", models.TextField(blank=True)),
                ("state", models.CharField(choices=[("pending", "Pending"), ("approved", "Approved"), ("rejected", "Rejected")], db_index=True, default="pending", max_length=10)),
                ("review_comment", models.TextField(blank=True)),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("reviewed_at", models.DateTimeField(blank=True, null=True)),
                ("cluster", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="scheduling.cluster")),
                ("proposed_by", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to=settings.AUTH_USER_MODEL)),
                ("reviewed_by", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to=settings.AUTH_USER_MODEL)),
                ("tenant", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="placement_requests", to="tenants.tenant")),
            ],
            options={"ordering": ["-created", "-id"]},
        ),
        migrations.RunPython(to_default_cluster, from_default_cluster),
        # `default` is the first row of the new table, so id 1 is the database default: the previous release's
        # code, still serving during the migrate hook, inserts node pools and quotas without a cluster.
        migrations.AddField(
            model_name="gpunodepool",
            name="trust_levels",
            field=models.JSONField(blank=True, db_default=[], default=list),
        ),
        migrations.AddField(
            model_name="gpunodepool",
            name="cluster",
            field=models.ForeignKey(db_default=1, default=scheduling.clusters.models.default_cluster_id, on_delete=django.db.models.deletion.PROTECT, related_name="node_pools", to="scheduling.cluster"),
        ),
        migrations.AddField(
            model_name="quota",
            name="cluster",
            field=models.ForeignKey(db_default=1, default=scheduling.clusters.models.default_cluster_id, on_delete=django.db.models.deletion.PROTECT, related_name="quotas", to="scheduling.cluster"),
        ),
        migrations.AddField(
            model_name="quotachangerequest",
            name="cluster",
            field=models.ForeignKey(db_default=1, default=scheduling.clusters.models.default_cluster_id, on_delete=django.db.models.deletion.PROTECT, related_name="+", to="scheduling.cluster"),
        ),
        migrations.RemoveConstraint(model_name="quota", name="quota_unique_tenant_flavor"),
        migrations.AddConstraint(
            model_name="quota",
            constraint=models.UniqueConstraint(fields=("tenant", "flavor", "cluster"), name="quota_unique_tenant_flavor_cluster"),
        ),
        migrations.AlterModelOptions(name="quota", options={"ordering": ["tenant__slug", "flavor__name", "cluster__name"]}),
    ]
