"""Issue 16 §1: the chart's GitOps push settings cannot render a publish that fails on every round."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

from infra.gitops.git import Git
from tests.support.services import need_binary

from .chart import PRODUCTION_VALUES, containers, helm, render


def with_push(**push: object) -> dict:
    values = copy.deepcopy(PRODUCTION_VALUES)
    values["gitops"]["push"] = {"enabled": True, **push}
    return values


@pytest.mark.parametrize(
    ("push", "message"),
    [
        ({"url": "ssh://git@git.example.com/platform/desired-state.git"}, "gitops.push.sshSecret is required"),
        ({"url": "git@git.example.com:platform/desired-state.git"}, "gitops.push.sshSecret is required"),
        ({"url": "https://git.example.com/platform/desired-state.git"}, "gitops.push.httpsSecret is required"),
        ({"url": "http://git.example.com/platform/desired-state.git", "httpsSecret": "x"}, "url"),
    ],
)
def test_push_without_a_credential_for_its_url_is_refused(push: dict, message: str) -> None:
    with pytest.raises(helm().HelmError) as caught:
        render(with_push(**push))
    assert message in str(caught.value)


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def test_worker_knows_the_remote_and_has_its_credential() -> None:
    """The worker initialises a lost working copy from the remote: it needs the url and the key too."""
    rendered = render(PRODUCTION_VALUES)
    config = rendered.get("ConfigMap", "gpufleet")["data"]
    assert config["GPUFLEET_GITOPS_REMOTE"] == "ssh://git@git.example.com/platform/desired-state.git"
    assert config["GPUFLEET_GITOPS_PUSH"] == "true" and config["GPUFLEET_GITOPS_REMOTE_BRANCH"] == "main"
    worker = {c["name"]: c for c in containers(rendered.get("Deployment", "gpufleet-worker"))}
    for name in ("worker", "gitops-push"):
        assert "StrictHostKeyChecking=yes" in env_of(worker[name])["GIT_SSH_COMMAND"]["value"]
        ssh = {"name": "git-ssh", "mountPath": "/etc/gpufleet/git-ssh", "readOnly": True}
        assert ssh in worker[name]["volumeMounts"]
    # The sidecar never writes the repository; it records each round on a volume the worker reads.
    state = next(m for m in worker["gitops-push"]["volumeMounts"] if m["name"] == "state")
    assert state["readOnly"] is True
    status_dir = config["GPUFLEET_GITOPS_PUSH_STATUS_DIR"]
    assert env_of(worker["gitops-push"])["GPUFLEET_PUSH_STATUS_DIR"]["value"] == status_dir
    for name in ("worker", "gitops-push"):
        assert {"name": "push-status", "mountPath": status_dir} in worker[name]["volumeMounts"]
    assert "GPUFLEET_GITOPS_REMOTE" not in render().get("ConfigMap", "gpufleet")["data"]


def test_https_token_reaches_git_through_a_credential_helper(tmp_path: Path) -> None:
    """The rendered helper, run by real git (`git credential fill`), answers with the Secret's values."""
    need_binary("git")
    rendered = render(with_push(url="https://git.example.com/platform/desired-state.git", httpsSecret="gpufleet-git"))
    worker = {c["name"]: c for c in containers(rendered.get("Deployment", "gpufleet-worker"))}
    for name in ("worker", "gitops-push"):
        env = env_of(worker[name])
        assert env["GPUFLEET_GIT_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "gpufleet-git", "key": "password"}
        assert "GIT_SSH_COMMAND" not in env
    plain = {k: v["value"] for k, v in env_of(worker["gitops-push"]).items() if "value" in v}
    process_env = {
        "PATH": os.environ["PATH"], "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
        **{k: v for k, v in plain.items() if k.startswith("GIT_CONFIG")},
        "GPUFLEET_GIT_USERNAME": "robot", "GPUFLEET_GIT_PASSWORD": "t0ken",
    }
    out = Git(tmp_path).run("credential", "fill", input_="protocol=https\nhost=git.example.com\n\n", env=process_env)
    assert "username=robot" in out and "password=t0ken" in out
