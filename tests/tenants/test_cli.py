"""The `gpufleet` CLI commands our acceptance checks use."""

from __future__ import annotations

import json
from io import StringIO

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from tenants.models import Phase, Tenant

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_approve_render_reconcile(gitops_repo, eager_tasks):
    created = json.loads(run("tenant", "create", "acme", "--trust-level", "standard", "--approve"))
    assert created["slug"] == "acme"
    assert created["phase"] == Phase.READY  # the in-process worker ran on commit
    assert (gitops_repo / "clusters/default/tenants" / "acme" / "namespace.core_tenant-acme.yaml").is_file()
    assert (gitops_repo / "clusters/default/platform").is_dir()

    stream = run("render", "--tenant", "acme")
    docs = [d for d in yaml.safe_load_all(stream) if d]
    assert docs[0]["kind"] == "Namespace"
    assert stream == run("render", "--tenant", "acme")
    platform = [d for d in yaml.safe_load_all(run("render", "--platform")) if d]
    assert {d["kind"] for d in platform} >= {"HelmRepository"}

    assert "acme: ready" in run("reconcile", "--tenant", "acme")
    assert "platform:" in run("reconcile", "--all")


def test_create_with_bad_input_names_the_field():
    with pytest.raises(CommandError) as err:
        run("tenant", "create", "Bad_Slug", "--trust-level", "root")
    assert "slug: must be lowercase" in str(err.value)
    assert "trust_level: must be one of" in str(err.value)
    assert not Tenant.objects.exists()


def test_demo_is_idempotent(eager_tasks):
    run("demo")
    counts = (Tenant.objects.count(), Tenant.objects.filter(phase=Phase.READY).count())
    run("demo")
    assert (Tenant.objects.count(), Tenant.objects.filter(phase=Phase.READY).count()) == counts
    assert counts[1] >= 3
