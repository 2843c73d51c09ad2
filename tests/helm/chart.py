"""Render and lint helm/gpufleet with Helm v4's own Go SDK (PyPI `helm-python-sdk`, no helm binary).

`render` returns the chart's objects as dicts, in template-file order, with the template each came from.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.support.services import REPO, missing

CHART = REPO / "helm" / "gpufleet"
RELEASE = "gpufleet"
NAMESPACE = "gpufleet"

# What a production install looks like: an ingress, a real issuer, push to the GitOps remote.
PRODUCTION_VALUES: dict[str, Any] = {
    "image": {"repository": "registry.example.com/platform/gpufleet", "tag": "0.1.0"},
    "config": {
        "oidc": {"issuer": "https://login.example.com/realms/main", "clientId": "gpufleet"},
        "openbaoAddr": "https://openbao.example.com:8200",
        "extraEnv": {"GPUFLEET_VCLUSTER_URL_TEMPLATE": "https://{slug}.vcluster.example.com",
                     "GPUFLEET_RECONCILE_ALL_SECONDS": 300},
    },
    "secrets": {"existingSecret": "gpufleet-prod"},
    "web": {"replicas": 3},
    "worker": {"concurrency": 4},
    "gitops": {"push": {"enabled": True, "url": "ssh://git@git.example.com/platform/desired-state.git",
                        "sshSecret": "gpufleet-git-ssh"}},
    "ingress": {"enabled": True, "className": "nginx", "hosts": ["gpufleet.example.com"],
                "tls": [{"secretName": "gpufleet-tls", "hosts": ["gpufleet.example.com"]}]},
}


@dataclass(frozen=True)
class Rendered:
    objects: list[dict[str, Any]]
    sources: dict[str, str]  # template path -> raw rendered text

    def get(self, kind: str, name: str) -> dict[str, Any]:
        found = [o for o in self.objects if o["kind"] == kind and o["metadata"]["name"] == name]
        assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
        return found[0]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]


def helm() -> Any:
    try:
        import helm_python
    except ImportError:
        missing("PyPI `helm-python-sdk` (Helm v4 SDK) is not installed")
    return helm_python


# The chart requires an image reference with its registry (no implicit default): tests that do not care
# about the image get this one, merged under their values (`with_image`); None leaves it unset.
TEST_IMAGE = "registry.example.com/platform/gpufleet"


def with_image(values: dict[str, Any] | None) -> dict[str, Any]:
    merged = copy.deepcopy(values) if values else {}
    merged.setdefault("image", {}).setdefault("repository", TEST_IMAGE)
    return merged


def render(values: dict[str, Any] | None = None, *, upgrade: bool = False, revision: int = 1,
           image: bool = True) -> Rendered:
    h = helm()
    with h.Chart.load(str(CHART)) as chart:
        out = chart.render(
            with_image(values) if image else (copy.deepcopy(values) if values else None),
            name=RELEASE, namespace=NAMESPACE, revision=revision, is_install=not upgrade, is_upgrade=upgrade,
        )
    objects = []
    for path, text in sorted(out.items()):
        if not path.endswith((".yaml", ".yml")):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                objects.append(doc)
    return Rendered(objects, out)


def lint(values: dict[str, Any] | None = None) -> dict[str, Any]:
    return helm().lint(str(CHART), with_image(values), strict=True, namespace=NAMESPACE,
                       kube_version="v1.33.0")


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return obj["spec"]["template"]["spec"]["containers"]


def default_values() -> dict[str, Any]:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def chart_path() -> Path:
    return CHART


def guide_install_values() -> dict[str, Any]:
    """The values of the `helm upgrade --install` command in docs/operator-guide.md, parsed by Helm's own
    --set parser: the tests that run the containers use exactly what the guide tells an operator to type."""
    import shlex

    guide = (REPO / "docs" / "operator-guide.md").read_text()
    section = guide.split("## Deploying gpufleet with Helm", 1)[1].split("### Install", 1)[1]
    command = section.split("```sh", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    words = shlex.split(command)
    assert words[:3] == ["helm", "upgrade", "--install"], words[:3]
    sets = [words[i + 1] for i, word in enumerate(words) if word == "--set"]
    return dict(helm().parse_set_string(",".join(sets)))
