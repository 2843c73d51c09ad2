"""The Celery task with GPUFLEET_BACKEND=kubernetes from a kubeconfig: a 409 is retried, a 422 fails the tenant."""

from __future__ import annotations

import kmock
import pytest
import yaml

from tenants import actions, tasks
from tenants.models import Phase, Tenant
from tests.support import factories

from .emulator import EmulatorThread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def kube_settings(settings, tmp_path, kube: EmulatorThread):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kmock", "cluster": {"server": kube.url}}],
        "users": [{"name": "gpufleet", "user": {"token": "kmock-test-token"}}],
        "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "gpufleet"}}],
        "current-context": "kmock",
    }))
    settings.GPUFLEET_BACKEND = "kubernetes"
    settings.GPUFLEET_KUBECONFIG = str(kubeconfig)
    return settings


def approved(slug: str) -> Tenant:
    tenant = factories.tenant(slug, "standard")
    Tenant.objects.filter(pk=tenant.pk).update(phase=Phase.APPROVED)  # no enqueue: the test runs the task
    return tenant


def patches_to(kube: EmulatorThread, path: str) -> list:
    return [r for r in kube.emulator._requests if str(r.method).upper().endswith("PATCH") and r.url.path == path]


def test_conflict_is_retried_by_the_task_and_then_ready(kube: EmulatorThread, kube_settings) -> None:
    tenant = approved("retry")
    kube.call(lambda: kube.emulator["patch", kmock.resource("", "v1", "namespaces"), kmock.name("tenant-retry")][:1]
              << kmock.KubernetesError(status=409, reason="Conflict", message="the object has been modified"))

    tasks.reconcile_tenant.apply(args=[tenant.pk])  # eager: Celery runs the retry inline

    tenant.refresh_from_db()
    assert tenant.phase == Phase.READY, tenant.conditions
    assert len(patches_to(kube, "/api/v1/namespaces/tenant-retry")) == 2  # the 409, then the retry
    # The kubeconfig's credentials are what the server saw.
    assert all(r.headers.get("Authorization") == "Bearer kmock-test-token" for r in kube.emulator._requests)


def test_invalid_object_fails_the_tenant_with_the_api_message(kube: EmulatorThread, kube_settings) -> None:
    tenant = approved("broken")
    message = 'LimitRange "gpufleet-defaults" is invalid: spec.limits[0].max[cpu]: Invalid value'
    kube.call(lambda: kube.emulator["patch", kmock.resource("", "v1", "limitranges")]
              << kmock.KubernetesError(status=422, reason="Invalid", message=message))

    tasks.reconcile_tenant.apply(args=[tenant.pk])

    tenant.refresh_from_db()
    assert tenant.phase == Phase.FAILED
    ready = tenant.condition("Ready")
    assert ready["reason"] == "ApplyFailed"
    assert message in ready["message"] and "HTTP 422" in ready["message"]
    actions.delete(tenant)  # a failed tenant can still be torn down
    tasks.reconcile_tenant.apply(args=[tenant.pk])
    tenant.refresh_from_db()
    assert tenant.phase == Phase.DELETED  # the rejected object did not block the teardown
    assert "admission not stopped" in tenant.condition("Deprovisioning")["message"]
