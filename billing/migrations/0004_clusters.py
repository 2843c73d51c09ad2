"""Billing across host clusters (issue 9): usage per tenant x flavor x cluster x hour (existing rows are the
`default` cluster's, through the column's database default -- no row is rewritten), prices per cluster
(null = every cluster) and the cluster and region of an invoice line (null/blank on lines drafted before;
adding columns fires no trigger, so finalized invoices stay untouched). The usage table's references lose
their per-row FK triggers: its writer locks the referenced rows once per batch (see UsageRecord)."""

import django.db.models.deletion
import scheduling.clusters.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0003_usage_without_redundant_fk_indexes'),
        ('scheduling', '0008_clusters_and_placements'),
        ('tenants', '0003_seed_allocation_policy'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='price',
            options={'ordering': ['flavor__name', 'cluster__name', 'currency', 'effective_from']},
        ),
        migrations.AlterModelOptions(
            name='usagerecord',
            options={'ordering': ['hour', 'tenant_id', 'flavor_id', 'cluster_id']},
        ),
        migrations.RemoveConstraint(
            model_name='price',
            name='price_unique_start',
        ),
        migrations.RemoveConstraint(
            model_name='usagerecord',
            name='usage_tenant_flavor_hour',
        ),
        migrations.AddField(
            model_name='invoiceline',
            name='availability_zone',
            field=models.CharField(blank=True, db_default='', default='', help_text='FOCUS AvailabilityZone, when the cluster has exactly one', max_length=63),
        ),
        migrations.AddField(
            model_name='invoiceline',
            name='cluster',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='scheduling.cluster'),
        ),
        migrations.AddField(
            model_name='invoiceline',
            name='cluster_name',
            field=models.CharField(blank=True, db_default='', default='', max_length=63),
        ),
        migrations.AddField(
            model_name='invoiceline',
            name='region',
            field=models.CharField(blank=True, db_default='', default='', help_text='FOCUS RegionId', max_length=63),
        ),
        migrations.AddField(
            model_name='invoiceline',
            name='region_name',
            field=models.CharField(blank=True, db_default='', default='', help_text='FOCUS RegionName', max_length=200),
        ),
        migrations.AddField(
            model_name='price',
            name='cluster',
            field=models.ForeignKey(blank=True, help_text="null: every cluster; a cluster's own price wins over it", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='prices', to='scheduling.cluster'),
        ),
        migrations.AddField(
            model_name='usagerecord',
            name='cluster',
            field=models.ForeignKey(db_constraint=False, db_default=1, db_index=False, default=scheduling.clusters.models.default_cluster_id, on_delete=django.db.models.deletion.PROTECT, related_name='usage_records', to='scheduling.cluster'),
        ),
        migrations.AlterField(
            model_name='usagerecord',
            name='flavor',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='usage_records', to='scheduling.flavor'),
        ),
        migrations.AlterField(
            model_name='usagerecord',
            name='tenant',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='usage_records', to='tenants.tenant'),
        ),
        migrations.AddConstraint(
            model_name='price',
            constraint=models.UniqueConstraint(condition=models.Q(('cluster__isnull', True)), fields=('flavor', 'currency', 'effective_from'), name='price_unique_start'),
        ),
        migrations.AddConstraint(
            model_name='price',
            constraint=models.UniqueConstraint(condition=models.Q(('cluster__isnull', False)), fields=('flavor', 'cluster', 'currency', 'effective_from'), name='price_unique_start_cluster'),
        ),
        migrations.AddConstraint(
            model_name='usagerecord',
            constraint=models.UniqueConstraint(fields=('tenant', 'flavor', 'cluster', 'hour'), name='usage_tenant_flavor_cluster_hour'),
        ),
    ]
