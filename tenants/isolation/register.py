"""Wire isolation into the tenants app (imported from TenantsConfig.ready)."""

from __future__ import annotations

from .. import reconcile, render, syncer_gates
from . import config, impact, kyverno, network, nodes, vcluster  # noqa: F401 - importing registers render sections


def register() -> None:
    if config.settings_extras not in render.CONTEXT_EXTRAS:
        render.CONTEXT_EXTRAS.append(config.settings_extras)
    if config.tenant_extras not in reconcile.VIEW_EXTRAS:
        reconcile.VIEW_EXTRAS.append(config.tenant_extras)
    if impact.gpu_modes_condition not in reconcile.CONDITION_PROVIDERS:
        reconcile.CONDITION_PROVIDERS.append(impact.gpu_modes_condition)
    reconcile.CONDITION_PROVIDERS_MANY[impact.gpu_modes_condition] = impact.gpu_modes_conditions_many
    if syncer_gates.gpu_workloads_condition not in reconcile.CONDITION_PROVIDERS:  # issue 26, B3
        reconcile.CONDITION_PROVIDERS.append(syncer_gates.gpu_workloads_condition)
    many = syncer_gates.gpu_workloads_conditions_many
    reconcile.CONDITION_PROVIDERS_MANY[syncer_gates.gpu_workloads_condition] = many
    if kyverno.hami_webhook_scope not in render.NAMESPACE_LABEL_HOOKS:
        render.NAMESPACE_LABEL_HOOKS.append(kyverno.hami_webhook_scope)
    if vcluster.extend_values not in render.VCLUSTER_VALUES_HOOKS:
        render.VCLUSTER_VALUES_HOOKS.append(vcluster.extend_values)
    from django.conf import settings

    if "django.contrib.admin" in settings.INSTALLED_APPS:
        from .admin import register_admin

        register_admin()
