"""Issue 16 §5: the repository's Dockerfile builds the image the chart runs.

No docker engine runs here, so the file is checked instead of built: it uses only files of this
repository (plus the named `reference` build context), runs as the chart's UID, installs the package
whose entry points the chart's containers call, and keeps the optional CLIs optional.
"""

from __future__ import annotations

import re
import shlex
import tomllib

from tests.support.services import REPO

from .chart import PRODUCTION_VALUES, render

DOCKERFILE = REPO / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def test_copies_only_files_of_the_repository_or_named_stages() -> None:
    stages = {m[1] for k, rest in instructions() if k == "FROM" and (m := re.search(r"\bAS (\S+)", rest))}
    for keyword, rest in instructions():
        if keyword not in ("COPY", "ADD"):
            continue
        assert keyword == "COPY", "ADD fetches or unpacks implicitly; use COPY"
        words = shlex.split(rest)
        origin = next((w.split("=", 1)[1] for w in words if w.startswith("--from=")), None)
        sources = [w for w in words if not w.startswith("--")][:-1]
        if origin is not None:
            assert origin in stages | {"reference"}, origin
            continue
        for source in sources:
            assert ".." not in source and not source.startswith("/")
            assert (REPO / source).exists(), f"COPY {source}: not in the repository"


def test_runs_as_the_charts_non_root_uid_with_a_read_only_friendly_layout() -> None:
    values = render(PRODUCTION_VALUES).get("Deployment", "gpufleet-web")["spec"]["template"]["spec"]
    uid = values["securityContext"]["runAsUser"]
    users = [rest for k, rest in instructions() if k == "USER"]
    assert users[-1] == f"{uid}:{uid}" == "10001:10001"
    env = " ".join(rest for k, rest in instructions() if k == "ENV")
    assert "HOME=/tmp" in env and "PYTHONDONTWRITEBYTECODE=1" in env
    assert "GPUFLEET_REFERENCE_DIR=/opt/gpufleet/reference" in env
    assert "compileall" in DOCKERFILE.read_text()  # no bytecode written at run time on a read-only root


def test_optional_clis_default_to_off() -> None:
    args = dict(rest.partition("=")[::2] for k, rest in instructions() if k == "ARG")
    for name in ("CILIUM_CLI_VERSION", "HUBBLE_VERSION", "CILIUM_CLI_SHA256", "HUBBLE_SHA256"):
        assert args.get(name) == '""', name
    assert "sha256sum -c" in DOCKERFILE.read_text()  # a given version is verified, never trusted blindly


def test_every_command_the_chart_runs_is_in_the_image() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = " ".join(project["dependencies"])
    provided = {"python", "sh", "sleep"} | set(project["scripts"])  # base image + our entry points
    provided |= {name for name in ("gunicorn", "celery") if name in deps}
    text = DOCKERFILE.read_text()
    provided |= {"git"} if re.search(r"apt-get install[^\n]*\bgit\b", text) else set()
    assert "pip install ." in text  # the package (and so its scripts and dependencies) is installed
    rendered = render({**PRODUCTION_VALUES, "metrics": {"serviceMonitor": {"enabled": False}}})
    commands = set()
    for obj in rendered.objects:
        if obj["kind"] in ("Deployment", "Job", "Pod"):
            spec = obj["spec"]["template"]["spec"] if obj["kind"] != "Pod" else obj["spec"]
            for container in spec["containers"]:
                commands.add(container["command"][0])
                for probe in ("livenessProbe", "readinessProbe"):
                    if "exec" in container.get(probe, {}):
                        commands.add(container[probe]["exec"]["command"][0])
                pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("exec")
                if pre_stop:
                    commands.add(pre_stop["command"][0])
    assert commands and commands <= provided, commands - provided
    assert "git" in DOCKERFILE.read_text()  # the push sidecar's script runs git
