"""The compiled schema check only ever answers "valid": its verdicts must equal jsonschema's on what
the platform renders, and anything it rejects must still get jsonschema's own message."""

from __future__ import annotations

import copy

import pytest

from infra import schemas
from infra.gitops.git import blob_sha, tree_sha
from scheduling.models import Quota
from tenants.backends import get_schema_registry
from tenants.models import Phase
from tenants.reconcile import desired_manifests
from tests.support import factories
from tests.support.services import need_binary, need_reference

from .helpers import git
from .test_fleet import catalog  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def _verdicts(registry, manifests, monkeypatch, fast: bool):  # type: ignore[no-untyped-def]
    if not fast:
        monkeypatch.setattr(schemas.SchemaRegistry, "_fast_valid", lambda self, validator, instance: False)
    verdicts = [registry.validate_one(m) for m in manifests]
    monkeypatch.undo()
    return verdicts


def test_fast_and_pure_python_verdicts_agree(catalog, monkeypatch) -> None:  # noqa: F811
    need_reference()
    registry = get_schema_registry()
    manifests = []
    for level in ("untrusted", "standard", "trusted"):
        tenant = factories.tenant(f"fast-{level}", level, phase=Phase.READY)
        Quota.objects.create(tenant=tenant, flavor=catalog["mig"], nominal=2, borrowing_limit=1, lending_limit=0)
        manifests += desired_manifests(tenant)
    broken = []
    for manifest in manifests:
        extra = copy.deepcopy(manifest)
        extra.setdefault("spec", {})["misspelled"] = True  # strict schemas: an unknown field
        wrong_type = copy.deepcopy(manifest)
        wrong_type["metadata"]["labels"] = {"a": 1}  # labels are strings
        broken += [extra, wrong_type]
    fast_used = []
    original = schemas.FastCheck.valid
    monkeypatch.setattr(schemas.FastCheck, "valid", lambda self, i: fast_used.append(1) or original(self, i))
    fast = [registry.validate_one(m) for m in manifests + broken]
    monkeypatch.undo()
    slow = _verdicts(registry, manifests + broken, monkeypatch, fast=False)
    assert fast == slow
    assert all(v == [] for v in fast[: len(manifests)])
    # Strict schemas reject most of them (free-form fields such as Helm values take anything).
    assert sum(1 for v in fast[len(manifests):] if v) > len(manifests), "broken objects get jsonschema's messages"
    assert fast_used, "the compiled check ran"


def test_tree_ids_computed_in_python_are_gits(tmp_path) -> None:
    need_binary("git")
    files = {"b.yaml": b"kind: B\n", "a.yaml": b"kind: A\n", "c_x.yaml": b""}
    git(tmp_path, "init", "-q")
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        assert git(tmp_path, "hash-object", name).strip() == blob_sha(data)
    git(tmp_path, "add", ".")
    assert git(tmp_path, "write-tree").strip() == tree_sha(files)


def test_a_commit_whose_reindex_died_is_reindexed_by_the_next_write(tmp_path, monkeypatch) -> None:
    from infra.errors import PermanentError
    from infra.gitops import GitOpsBackend
    from infra.gitops.git import Git

    from .helpers import config_map, status

    need_binary("git")
    backend = GitOpsBackend(tmp_path / "repo")
    backend.apply("tenant:acme", [config_map("tenant:acme", "a", gpus="1")])
    start = Git._start

    def dies_before_reindexing(self, args, stdin):  # type: ignore[no-untyped-def]
        if args[0] == "update-index":  # runs alongside fast-import: this one fails without touching the index
            args = ["update-index", "--no-such-option"]
        return start(self, args, stdin)

    monkeypatch.setattr(Git, "_start", dies_before_reindexing)
    with pytest.raises(PermanentError):
        backend.apply("tenant:acme", [config_map("tenant:acme", "a", gpus="2")])
    monkeypatch.undo()
    assert status(backend.path) != ""  # committed, but the index still holds the old bytes
    # Nothing left to commit for this owner (HEAD and disk agree), yet the next write repairs the index.
    GitOpsBackend(backend.path).apply("tenant:other", [config_map("tenant:other", "b", gpus="1")])
    assert status(backend.path) == ""


def test_superseded_shared_index_files_go_after_an_hour_not_two_weeks(tmp_path) -> None:
    """A split index leaves its old shared index file behind each time it is rewritten (a cold pass of
    10,000 tenants: ~14 files of up to 26 MB); the backend has git remove those unused for an hour."""
    import os
    import time

    from infra.gitops import GitOpsBackend

    from .helpers import config_map, status

    need_binary("git")
    backend = GitOpsBackend(tmp_path / "repo")
    for gpus in "123":  # each write rewrites the shared index (maxPercentChange=0): three generations
        backend.apply("tenant:acme", [config_map("tenant:acme", "a", gpus=gpus)])
        git(backend.path, "-c", "splitIndex.maxPercentChange=0", "update-index", "--split-index")
    before = set((backend.path / ".git").glob("sharedindex.*"))
    assert len(before) >= 3
    stale = time.time() - 2 * 3600
    for path in before:  # as if last used two hours ago (git freshens the one in use when it reads it)
        os.utime(path, (stale, stale))
    git(backend.path, "-c", "splitIndex.maxPercentChange=0", "update-index", "--split-index")
    after = set((backend.path / ".git").glob("sharedindex.*"))
    assert len(before & after) == 1, "only the shared index in use until this rewrite is kept"
    assert status(backend.path) == ""
    # A repository configured by an older version (split index, no expiry) gets the setting it lacks.
    git(backend.path, "config", "--unset", "splitIndex.sharedIndexExpire")
    GitOpsBackend(backend.path).apply("tenant:acme", [config_map("tenant:acme", "a", gpus="4")])
    assert git(backend.path, "config", "splitIndex.sharedIndexExpire").strip() == "1.hour.ago"
