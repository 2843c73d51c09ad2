"""The Terraform path as documented (issue 28, item 6): the example does not collide with the demo's
tenants, the install step works from a checkout (the package is not on PyPI), and what the walk-throughs
write into a checkout (focus.csv, Terraform state) is ignored by git."""

from __future__ import annotations

import re

from infra.gitops.git import Git
from tenants.management.commands.demo import DEMO_TENANTS
from tests.support.services import REPO


def test_the_examples_tenant_is_not_one_of_the_demos() -> None:
    main = (REPO / "examples" / "terraform" / "main.tf").read_text()
    default = re.search(r'variable "slug" \{.*?default\s*=\s*"([^"]+)"', main, re.S)
    assert default, "examples/terraform/main.tf: no default slug"
    assert default.group(1) not in {row[0] for row in DEMO_TENANTS}


def test_install_step_does_not_send_people_to_pypi() -> None:
    doc = (REPO / "docs" / "terraform.md").read_text()
    told = doc.replace("`pip install gpufleet` finds nothing", "")  # the one place that says it does not work
    assert "pip install gpufleet" not in told, "gpufleet is not on PyPI"
    assert "pip install ." in doc and "pip wheel --no-deps -w dist ." in doc


def test_generated_files_are_ignored_by_git() -> None:
    paths = ["focus.csv", "examples/terraform/terraform.tfstate", "examples/terraform/terraform.tfstate.backup",
             "examples/terraform/.terraform/providers/x"]
    ignored = Git(REPO).run("check-ignore", *paths, check=False)
    assert set(ignored.split()) == set(paths), ignored
