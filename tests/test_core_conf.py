"""gpufleet.core.conf: one declaration per GPUFLEET_* setting, read nowhere else, documented in docs/."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from gpufleet.core import conf

REPO = Path(__file__).resolve().parent.parent
# The code that may name a setting: the settings modules map the environment to Django settings, and the core
# module declares and reads every setting.
READERS = (REPO / "platform" / "gpufleet" / "settings", REPO / "platform" / "gpufleet" / "core" / "conf.py")
# The Terraform provider is a separate program on the operator's machine (no Django: pyproject.toml's contract);
# GPUFLEET_ENDPOINT and GPUFLEET_TOKEN are its own environment variables, not the platform's settings.
NOT_PLATFORM = {
    "GPUFLEET_ENDPOINT": REPO / "platform" / "gpufleet" / "terraform",
    "GPUFLEET_TOKEN": REPO / "platform" / "gpufleet" / "terraform",
    # The test suite's own switches (tests/support/services.py, tests/e2e/conftest.py).
    "GPUFLEET_REQUIRE_SERVICES": REPO / "tests",
    "GPUFLEET_E2E_KUBECONFIG": REPO / "tests",
}
PACKAGES = ("tenants", "scheduling", "billing", "infra", "platform/gpufleet")
NAME = re.compile(r"GPUFLEET_[A-Z0-9_]+")
TABLE = re.compile(r"<!-- settings-table:start -->\n(.*?)<!-- settings-table:end -->", re.S)


def _sources() -> list[Path]:
    out = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if any(path == reader or reader in path.parents for reader in READERS):
                continue
            if REPO / "platform" / "gpufleet" / "terraform" in path.parents:
                continue
            out.append(path)
    return out


def _conf_calls(tree: ast.AST) -> set[int]:
    """ids of the name arguments of conf.get(...) / conf.environment(...): the reads the module offers."""
    return {id(node.args[0]) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "conf"
            and node.func.attr in {"get", "environment"} and node.args}


def test_no_setting_is_read_outside_the_core_module() -> None:
    found = []
    for path in _sources():
        tree = ast.parse(path.read_text(), str(path))
        allowed = _conf_calls(tree)
        for node in ast.walk(tree):
            where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', '?')}"
            # settings.GPUFLEET_X, django_settings.GPUFLEET_X ...
            if isinstance(node, ast.Attribute) and node.attr.startswith("GPUFLEET_"):
                found.append(f"{where} .{node.attr}")
            # getattr(settings, "GPUFLEET_X"), os.environ.get("GPUFLEET_X"), environ["GPUFLEET_X"] ...: a string that
            # is a setting's name and nothing more is a lookup (messages that mention one carry other words).
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.fullmatch(node.value)
                  and id(node) not in allowed):
                found.append(f"{where} {node.value!r}")
    assert found == [], "read these through gpufleet.core.conf:\n" + "\n".join(found)


def test_every_setting_the_code_reads_is_declared() -> None:
    unknown = []
    for path in _sources():
        tree = ast.parse(path.read_text(), str(path))
        allowed = _conf_calls(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "conf"
                    and node.attr.isupper() and "GPUFLEET_" + node.attr not in {s.name for s in conf.declared()}):
                unknown.append(f"{path.relative_to(REPO)}:{node.lineno} conf.{node.attr}")
            if isinstance(node, ast.Constant) and id(node) in allowed:
                try:
                    conf.setting(node.value)
                except conf.UnknownSetting:
                    unknown.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value}")
    assert unknown == []


def _documented() -> set[str]:
    return {name for path in (REPO / "docs").rglob("*") if path.is_file() and path.suffix in {".md", ".json", ".yaml"}
            for name in NAME.findall(path.read_text(errors="replace"))}


def test_every_name_in_the_docs_is_declared() -> None:
    declared = {s.name for s in conf.declared()}
    assert _documented() - declared - set(NOT_PLATFORM) == set()


def test_every_declared_setting_is_documented() -> None:
    assert {s.name for s in conf.declared()} - _documented() == set()


def test_the_operator_guides_table_is_the_generated_one() -> None:
    """The table in docs/operator-guide.md is `python -m gpufleet.core.conf`'s output, so it never drifts."""
    guide = (REPO / "docs" / "operator-guide.md").read_text()
    match = TABLE.search(guide)
    assert match, "docs/operator-guide.md lost its settings-table markers"
    assert match.group(1) == conf.markdown_table(), "regenerate it: python -m gpufleet.core.conf"
    printed = subprocess.run([sys.executable, "-m", "gpufleet.core.conf"], capture_output=True, text=True, check=True)
    assert printed.stdout == conf.markdown_table()


def test_the_names_outside_the_platform_are_read_where_they_say() -> None:
    for name, where in NOT_PLATFORM.items():
        assert any(name in path.read_text() for path in where.rglob("*.py")), name


def test_an_unknown_setting_is_an_error() -> None:
    with pytest.raises(conf.UnknownSetting, match="GPUFLEET_NO_SUCH"):
        conf.get("GPUFLEET_NO_SUCH")
    with pytest.raises(AttributeError, match="NO_SUCH"):
        conf.NO_SUCH
    assert not hasattr(conf, "NO_SUCH")


def test_values_are_read_when_used_with_their_types(settings, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.GPUFLEET_RECONCILE_WORKERS = 3
    assert conf.RECONCILE_WORKERS == 3
    settings.GPUFLEET_RECONCILE_WORKERS = "5"  # a value a test or a profile gives as text is still an int
    assert conf.get("GPUFLEET_RECONCILE_WORKERS") == 5
    settings.GPUFLEET_TOPOLOGY_LEVELS = ["a", "b"]
    assert conf.TOPOLOGY_LEVELS == ("a", "b")
    assert conf.SETTINGS.TOPOLOGY_LEVELS == ("a", "b")  # the typed form (Settings' descriptors)
    settings.GPUFLEET_PROMETHEUS_OPERATOR = "on"
    assert conf.PROMETHEUS_OPERATOR is True
    del settings.GPUFLEET_PROMETHEUS_OPERATOR
    monkeypatch.setenv("GPUFLEET_PROMETHEUS_OPERATOR", "true")  # a Django setting: the environment is not read
    assert conf.PROMETHEUS_OPERATOR is False


def test_billing_settings_are_the_django_setting_else_the_environment(settings, monkeypatch) -> None:
    monkeypatch.delenv("GPUFLEET_RECONCILE_TOLERANCE", raising=False)
    if hasattr(settings, "GPUFLEET_RECONCILE_TOLERANCE"):
        del settings.GPUFLEET_RECONCILE_TOLERANCE
    assert conf.RECONCILE_TOLERANCE == Decimal("0.05")
    monkeypatch.setenv("GPUFLEET_RECONCILE_TOLERANCE", "0.1")
    assert conf.RECONCILE_TOLERANCE == Decimal("0.1")
    settings.GPUFLEET_RECONCILE_TOLERANCE = "0.2"
    assert conf.RECONCILE_TOLERANCE == Decimal("0.2")
    monkeypatch.setenv("GPUFLEET_CURRENCIES", "USD, EUR,")
    assert conf.CURRENCIES == ("USD", "EUR")
    monkeypatch.setenv("GPUFLEET_BILLING_IDLE_SHARE", "yes")
    assert conf.BILLING_IDLE_SHARE is True


def test_environment_settings_and_the_environment_first_one(settings, monkeypatch) -> None:
    monkeypatch.delenv("GPUFLEET_WORKER_METRICS_PORT", raising=False)
    assert conf.WORKER_METRICS_PORT == 0
    monkeypatch.setenv("GPUFLEET_WORKER_METRICS_PORT", "9808")
    assert conf.WORKER_METRICS_PORT == 9808
    monkeypatch.delenv("GPUFLEET_DCGM_NODE_LABEL", raising=False)
    settings.GPUFLEET_DCGM_NODE_LABEL = "node"
    assert conf.DCGM_NODE_LABEL == "node"
    monkeypatch.setenv("GPUFLEET_DCGM_NODE_LABEL", "instance")
    assert conf.DCGM_NODE_LABEL == "instance"
    monkeypatch.delenv("GPUFLEET_DCGM_NODE_LABEL")
    settings.GPUFLEET_DCGM_NODE_LABEL = ""
    assert conf.DCGM_NODE_LABEL == "Hostname"
    # The one reader of the raw environment (node health's metrics URL) sees it, not the Django setting.
    monkeypatch.delenv("GPUFLEET_METRICS_URL", raising=False)
    assert conf.environment("GPUFLEET_METRICS_URL") is None
    monkeypatch.setenv("GPUFLEET_METRICS_URL", "http://vm:8428")
    assert conf.environment("GPUFLEET_METRICS_URL") == "http://vm:8428"
    assert conf.METRICS_URL == settings.GPUFLEET_METRICS_URL
