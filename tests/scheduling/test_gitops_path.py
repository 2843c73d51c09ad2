"""One gitops_path validator for every write path (issue 27, item 5): the API's POST and PATCH, the CLI, and
Terraform (through the API) refuse a folder the GitOps backend cannot write -- `.git` and `.git/hooks` were
accepted by PATCH and then failed every reconcile of the cluster."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from scheduling.clusters.models import Cluster

pytestmark = pytest.mark.django_db
CLUSTERS = "/api/v1/clusters/"
BAD = [".git", ".git/hooks", "clusters/.git", "clusters/.hidden", "../etc", "a/../b", "a//b", "/abs", "trailing/",
       ".", "tenants/x", "platform", "clusters/west space", "clusters/wést"]


@pytest.mark.parametrize("path", BAD)
def test_patch_and_post_refuse_the_same_folders(admin_api: APIClient, path: str) -> None:
    assert admin_api.post(CLUSTERS, {"name": "west"}, format="json").status_code == 201
    etag = admin_api.get(f"{CLUSTERS}west/")["ETag"]
    patched = admin_api.patch(f"{CLUSTERS}west/", {"gitops_path": path}, format="json", HTTP_IF_MATCH=etag)
    assert patched.status_code == 400, (path, patched.content)
    assert "gitops_path" in patched.json()["fields"]
    posted = admin_api.post(CLUSTERS, {"name": "east", "gitops_path": path}, format="json")
    assert posted.status_code == 400 and "gitops_path" in posted.json()["fields"], path
    assert Cluster.objects.get(name="west").gitops_path == ""
    assert not Cluster.objects.filter(name="east").exists()


def test_a_good_folder_is_accepted_everywhere(admin_api: APIClient) -> None:
    assert admin_api.post(CLUSTERS, {"name": "west", "gitops_path": "fleet/west-1"}, format="json").status_code == 201
    assert admin_api.patch(f"{CLUSTERS}west/", {"gitops_path": "clusters/west_v2.1"}, format="json").status_code == 200
    assert Cluster.objects.get(name="west").gitops_path == "clusters/west_v2.1"
    assert admin_api.patch(f"{CLUSTERS}west/", {"gitops_path": ""}, format="json").status_code == 200


@pytest.mark.parametrize("path", [".git", ".git/hooks"])
def test_the_cli_refuses_them_too(db, path: str) -> None:
    with pytest.raises(CommandError, match="gitops_path"):
        call_command("cluster", "add", "west", "--gitops-path", path, stdout=StringIO(), stderr=StringIO())
    assert not Cluster.objects.filter(name="west").exists()

