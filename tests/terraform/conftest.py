"""A real gpufleet (live server on PostgreSQL, eager tasks, GitOps backend) with a catalog and tokens."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpufleet.accounts.models import ApiToken
from scheduling import actions as sched
from tests.support import factories


@dataclass
class Platform:
    url: str
    admin_token: str
    owner_token: str
    admin: Any
    owner: Any


def make_token(user: Any, name: str) -> str:
    plaintext, prefix, digest = ApiToken.generate()
    ApiToken.objects.create(user=user, name=name, prefix=prefix, digest=digest)
    return plaintext


@pytest.fixture
def platform(live_server, eager_tasks, gitops_repo: Path, settings) -> Platform:
    settings.GPUFLEET_VCLUSTER_OIDC_ISSUER = "https://sso.example.test"  # kubeconfigs need an issuer
    model = sched.create_gpu_model("a100-80gb", "NVIDIA A100-SXM4-80GB", 81920)
    sched.create_flavor("a100", gpu_model=model.name, mode="whole", capacity=8)
    sched.create_flavor("a100-3g", gpu_model=model.name, mode="mig", mig_profile="3g.40gb", capacity=8)
    admin = factories.user("platform-team", roles={"platform-admin"})
    owner = factories.user("lead")
    factories.user("bob")
    return Platform(live_server.url, make_token(admin, "terraform"), make_token(owner, "lead-cli"), admin, owner)
