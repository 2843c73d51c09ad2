"""Every git invocation in the project's Python -- product, tests, benchmarks -- goes through
`infra.gitops.git.Git` (docs/adr/0005): one place that sets git's environment (no user or system config, no
prompts), maps its failures to the platform's error types and knows the index's background update. A test
that ran git by hand would see a different git than the product does (the user's config, hooks, signing)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("billing", "benchmarks", "infra", "platform", "scheduling", "tenants", "tests", "manage.py")
ALLOWED = {"infra/gitops/git.py"}  # the class itself
RUNNERS = {"run", "Popen", "call", "check_call", "check_output", "system", "popen", "spawnlp", "execlp", "execvp"}


def _python_files() -> Iterator[Path]:
    for root in ROOTS:
        path = REPO / root
        if path.is_file():
            yield path
        else:
            yield from (p for p in path.rglob("*.py") if "node_modules" not in p.parts)


def _is_git(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and (
        node.value == "git" or node.value.endswith("/git") or node.value.startswith("git "))


def direct_git_calls(source: str) -> list[int]:
    """Line numbers where `source` runs git itself: an argv whose program is git (`["git", ...]`), a
    command string starting with `git ` given to a process runner, or the `sh` package's `sh.git`."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.List | ast.Tuple) and node.elts and _is_git(node.elts[0]):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and node.args and _is_git(node.args[0]):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in RUNNERS:
                lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "git" and getattr(node.value, "id", "") == "sh":
            lines.append(node.lineno)
    return sorted(lines)


def test_the_scan_finds_each_form_of_running_git() -> None:
    source = '''
import subprocess, os, sh
subprocess.run(["git", "-C", "x", "status"])
subprocess.check_output(("/usr/bin/git", "log"))
os.system("git status")
subprocess.run("git status", shell=True)
sh.git("status")
args = ["git", "log"]
'''
    assert direct_git_calls(source) == [3, 4, 5, 6, 7, 8]
    assert direct_git_calls('need_binary("git")\nGit(path).run("status")\nprint("git")\n') == []


def test_no_git_invocation_outside_the_git_class() -> None:
    found = []
    for path in _python_files():
        relative = path.relative_to(REPO).as_posix()
        if relative in ALLOWED:
            continue
        found += [f"{relative}:{line}" for line in direct_git_calls(path.read_text(encoding="utf-8"))]
    assert not found, f"run git through infra.gitops.git.Git, not directly: {found}"
