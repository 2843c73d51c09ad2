"""The README's CLI walk-through, run top to bottom as written, through the real `gpufleet` console script
on a fresh SQLite database (the demo profile), with a real VictoriaMetrics behind `billing collect`.

Also the newcomer's view of the script itself: `gpufleet --help` lists gpufleet's own commands one line
each, writes print only their result, and `billing collect` without a reachable TSDB says in one line
what to configure.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.services import REFERENCE_DIR, REPO, free_port
from tests.support.victoriametrics import VictoriaMetrics

README = REPO / "README.md"


def readme_cli_lines() -> list[str]:
    """The `gpufleet ...` lines of the ```sh block under the README's "## CLI" heading."""
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## CLI\n", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README: no ```sh block under ## CLI"
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def script() -> str:
    """The installed console script (what a user types), next to the interpreter running the tests."""
    found = Path(sys.executable).parent / "gpufleet"
    if found.exists():
        return str(found)
    on_path = shutil.which("gpufleet")
    if on_path is None:
        pytest.fail("the gpufleet console script is not installed (pip install -e .)")
    return on_path


def env_for(var: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE",
                                                             "CELERY_BROKER_URL", "LOG_LEVEL"}}
    env.update(GPUFLEET_VAR_DIR=str(var), GPUFLEET_REFERENCE_DIR=str(REFERENCE_DIR), **extra)
    return env


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_readme_walkthrough_runs_top_to_bottom(tmp_path: Path) -> None:
    lines = readme_cli_lines()
    assert any("nodepool create" in line for line in lines)
    vm = VictoriaMetrics.start(tmp_path / "vm")
    try:
        env = env_for(tmp_path / "var", GPUFLEET_METRICS_URL=vm.url)
        for line in lines:
            argv = shlex.split(line, comments=True)
            assert argv[0] == "gpufleet", f"README line does not run the gpufleet script: {line}"
            result = run([script(), *argv[1:]], env, tmp_path)
            assert result.returncode == 0, f"{line}\n{result.stdout[-1500:]}\n{result.stderr[-3000:]}"
            # Writes print their result only: no broker warnings, no Celery task log lines.
            noise = result.stdout + result.stderr
            assert "No hostname was supplied" not in noise, line
            assert not re.search(r"Task \S+\[[0-9a-f-]+\] succeeded", noise), line
    finally:
        vm.stop()
    assert (tmp_path / "focus.csv").is_file()  # `billing export --out focus.csv` wrote where it was run


def test_help_lists_gpufleets_commands_one_line_each(tmp_path: Path) -> None:
    result = run([script(), "--help"], env_for(tmp_path / "var"), tmp_path)
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0]: line for line in result.stdout.splitlines() if line.startswith("  ")}
    for command in ("tenant", "flavor", "gpu-model", "quota", "nodepool", "billing", "price", "serve", "demo"):
        assert command in listed, result.stdout
        assert len(listed[command].split()) > 2, f"{command} has no help text"
    # Django's own commands are not in the list (they are one `gpufleet help --django` away). `migrate` is
    # gpufleet's own now (one run at a time per database, an advisory lock), so it is listed.
    for django_command in ("createsuperuser", "dbshell", "runserver", "spectacular"):
        assert django_command not in listed, result.stdout
    assert "advisory lock" in listed["migrate"]
    django = run([script(), "help", "--django"], env_for(tmp_path / "var"), tmp_path)
    assert django.returncode == 0 and "migrate" in django.stdout


def test_tenant_list_is_a_table_and_json_on_request(tmp_path: Path) -> None:
    env = env_for(tmp_path / "var")
    assert run([script(), "tenant", "create", "acme", "--trust-level", "standard", "--approve"],
               env, tmp_path).returncode == 0
    table = run([script(), "tenant", "list"], env, tmp_path).stdout.splitlines()
    assert table[0].split() == ["SLUG", "PHASE", "TRUST", "SYNCED", "NAME"]
    assert table[1].split()[:3] == ["acme", "ready", "standard"]
    [tenant] = json.loads(run([script(), "tenant", "list", "--json"], env, tmp_path).stdout)
    assert tenant["slug"] == "acme" and tenant["phase"] == "ready"


def test_billing_collect_without_a_tsdb_says_how_to_configure_it(tmp_path: Path) -> None:
    # A loopback port nobody listens on: refused at once, as an unreachable in-cluster address is.
    url = f"http://127.0.0.1:{free_port()}"
    result = run([script(), "billing", "collect", "--start", "2026-11-01T00:00:00Z", "--end",
                  "2026-11-02T00:00:00Z"], env_for(tmp_path / "var", GPUFLEET_METRICS_URL=url), tmp_path)
    assert result.returncode != 0
    message = result.stderr.strip().splitlines()
    assert len(message) == 1, result.stderr
    assert "GPUFLEET_METRICS_URL" in message[0] and url in message[0]
    assert "Retrying" not in result.stderr


@pytest.mark.django_db
def test_every_command_and_subcommand_has_help_text() -> None:
    """In-process: each gpufleet command's parser, and each of its subcommands, carries a help line."""
    import argparse

    from django.core.management import get_commands, load_command_class

    from gpufleet.cli import OWN_APPS, own_commands

    missing = [name for name, text in own_commands().items() if not text]
    for name, app in get_commands().items():
        if app.split(".")[0] not in OWN_APPS:
            continue
        parser = load_command_class(app, name).create_parser("gpufleet", name)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                # argparse lists a subcommand in _choices_actions only when it was given a help text.
                helped = {choice.dest for choice in action._choices_actions if choice.help}
                missing += [f"{name} {verb}" for verb in action.choices if verb not in helped]
    assert not missing, missing
