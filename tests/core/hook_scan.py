"""Finds module-level mutable collections of callables (hook lists) in product code: the registry
(gpufleet.core.registry) replaced them, and none may come back."""

from __future__ import annotations

import ast
from pathlib import Path

PRODUCT = ("tenants", "scheduling", "billing", "infra", "platform/gpufleet")
# Names the old hook points had; a new mutable collection so named is one again, whatever it holds.
HOOK_SUFFIXES = ("_HOOKS", "_EXTRAS", "_EXTRAS_MANY", "_PROVIDERS", "_PROVIDERS_MANY", "_SCOPES", "_CHECKS",
                 "SEEDERS", "ON_REQUEST", "_SECTIONS")
MUTABLE_CALLS = {"list", "dict", "set", "defaultdict", "OrderedDict", "deque"}


def _is_mutable(value: ast.expr | None) -> bool:
    if isinstance(value, ast.List | ast.Dict | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name in MUTABLE_CALLS
    return False


def _elements(value: ast.expr) -> list[ast.expr]:
    if isinstance(value, ast.List | ast.Set):
        return list(value.elts)
    if isinstance(value, ast.Dict):
        return [v for v in (*value.keys, *value.values) if v is not None]
    return []


def hook_collections(source: str) -> list[str]:
    """`name:line` of each module-level mutable collection that holds callables (or is typed or named to)."""
    tree = ast.parse(source)
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, annotation, value = node.targets, None, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, annotation, value = [node.target], node.annotation, node.value
        else:
            continue
        if not _is_mutable(value):
            continue
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        typed = annotation is not None and "Callable" in ast.unparse(annotation)
        named = any(name.endswith(HOOK_SUFFIXES) for name in names)
        holds = any(isinstance(e, ast.Lambda) or (isinstance(e, ast.Name) and e.id in functions)
                    for e in _elements(value))  # type: ignore[arg-type]
        if typed or named or holds:
            found.extend(f"{name}:{node.lineno}" for name in names)
    return found


def scan(root: Path) -> dict[str, list[str]]:
    out = {}
    for package in PRODUCT:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            hits = hook_collections(path.read_text())
            if hits:
                out[str(path.relative_to(root))] = hits
    return out


def ready_appends(root: Path) -> list[str]:
    """`.append(...)` calls inside any AppConfig.ready: registrations by mutation."""
    found = []
    for package in PRODUCT:
        for path in sorted((root / package).rglob("apps.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef) and node.name == "ready":
                    found += [f"{path.relative_to(root)}:{call.lineno}" for call in ast.walk(node)
                              if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                              and call.func.attr in ("append", "extend", "insert")]
    return found
