"""Issue 28 §7: the upstream reference bundle is fetched at the pinned commits and verified, so the image
builds from the repository alone (infra/reference.py, infra/reference-manifest.json).

No network here: a mirror laid out like raw.githubusercontent.com (`<repo>/<commit>/<path>`) is built from
the collector's copy (GPUFLEET_REFERENCE_DIR) and served by a real HTTP server on a loopback port (and as
file://). The VictoriaMetrics CRDs come cut out of one multi-document upstream file; the mirror holds a
multi-document file made of the real CRD documents, and the test's manifest copy carries its digest.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra import reference
from infra.schemas import SchemaRegistry
from tests.support.services import REPO, need_reference


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def mirror(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """(mirror root, the manifest to use with it)."""
    source = need_reference()
    manifest = copy.deepcopy(reference.load_manifest())
    root = tmp_path / "mirror"
    combined: dict[Path, list[bytes]] = {}
    for entry in manifest["files"]:
        if "generated" in entry:
            continue
        target = root / entry["repo"] / entry["commit"] / entry["upstream"]
        data = (source / entry["path"]).read_bytes()
        if "document" in entry:
            combined.setdefault(target, [b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n"]).append(data)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    for target, documents in combined.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"---\n".join(documents))
        for entry in manifest["files"]:
            if "document" in entry and root / entry["repo"] / entry["commit"] / entry["upstream"] == target:
                entry["upstream_sha256"] = _sha(target.read_bytes())
    return root, manifest


@pytest.fixture
def served(mirror: tuple[Path, dict[str, Any]]) -> Iterator[tuple[str, Path, dict[str, Any]]]:
    root, manifest = mirror
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root, manifest
    finally:
        server.shutdown()
        server.server_close()


def test_manifest_agrees_with_the_collectors_checksums() -> None:
    """Every digest is the collector's, and every file of the bundle is either fetched or said not to be."""
    source = need_reference()
    sums = dict(reversed(line.split("  ", 1)) for line in (source / "SHA256SUMS").read_text().splitlines())
    manifest = reference.load_manifest()
    listed = {e["path"]: e["sha256"] for e in manifest["files"]}
    assert {p: sums[p] for p in listed} == listed
    assert set(sums) == set(listed) | {e["path"] for e in manifest["not_fetchable"]}
    assert all(e["why"] for e in manifest["not_fetchable"])
    for entry in manifest["files"]:
        if "generated" not in entry:
            assert len(entry["commit"]) == 40 and entry["repo"].count("/") == 1 and entry["tag"], entry
    # What the image reads (infra/schemas.py): the index, each CRD it names, the vCluster values schema.
    index = json.loads((source / reference.INDEX).read_text())
    runtime = {e["path"] for e in manifest["files"] if e["runtime"]}
    assert runtime == {e["file"] for e in index} | {reference.INDEX, "vcluster/values.schema.json"}


def test_fetch_over_http_verifies_everything_and_the_result_validates(served, tmp_path: Path) -> None:
    base, _, manifest = served
    dest = tmp_path / "out" / "reference"
    message = reference.fetch(dest, base_url=base, everything=True, manifest=manifest)
    assert "fetched and verified" in message
    assert reference.check(dest, manifest, everything=True) == []
    assert (dest / reference.INDEX).read_bytes() == (need_reference() / reference.INDEX).read_bytes()
    sums = (dest / reference.SUMS).read_text().splitlines()
    assert len(sums) == len(manifest["files"])
    for line in sums:
        digest, path = line.split("  ", 1)
        assert _sha((dest / path).read_bytes()) == digest
    registry = SchemaRegistry(dest)
    assert registry.available and registry.crd_validator("kueue.x-k8s.io/v1beta2", "ClusterQueue") is not None
    assert registry.crd_validator("operator.victoriametrics.com/v1beta1", "VMRule") is not None
    assert registry.vcluster_values_validator is not None
    assert [p.name for p in dest.parent.iterdir()] == ["reference"]  # no staging left behind
    # A second run finds it complete and downloads nothing.
    assert "already complete" in reference.fetch(dest, base_url="http://127.0.0.1:9/", everything=True,
                                                 manifest=manifest)


def test_the_image_set_over_file_urls_is_only_what_the_image_reads(mirror, tmp_path: Path) -> None:
    root, manifest = mirror
    dest = tmp_path / "reference"
    reference.fetch(dest, base_url=root.as_uri(), manifest=manifest)
    written = {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()}
    assert written == {e["path"] for e in manifest["files"] if e["runtime"]} | {reference.SUMS}
    registry = SchemaRegistry(dest)
    assert registry.available and registry.vcluster_values_validator is not None


def test_a_tampered_file_is_refused_and_nothing_is_written(served, tmp_path: Path, capsys) -> None:
    base, root, manifest = served
    dest = tmp_path / "reference"
    reference.fetch(dest, base_url=base, manifest=manifest)
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    entry = next(e for e in manifest["files"] if e["path"] == "crds/kueue/kueue.x-k8s.io_clusterqueues.yaml")
    upstream = root / entry["repo"] / entry["commit"] / entry["upstream"]
    upstream.write_bytes(upstream.read_bytes().replace(b"nominalQuota", b"nominalQuotaX", 1))

    with pytest.raises(reference.ReferenceError, match=re.escape("kueue.x-k8s.io_clusterqueues.yaml: sha256 mismatch")):
        reference.fetch(dest, base_url=base, manifest=manifest, force=True)
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before  # the old copy stands
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".reference")]

    fresh = tmp_path / "fresh"
    with pytest.raises(reference.ReferenceError, match="sha256 mismatch"):
        reference.fetch(fresh, base_url=base, manifest=manifest)
    assert not fresh.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".fresh")]


def test_the_command_line_names_the_problem(served, tmp_path: Path, capsys, monkeypatch) -> None:
    base, root, manifest = served
    monkeypatch.setattr(reference, "load_manifest", lambda path=None: manifest)
    upstream = root / "kubernetes-sigs" / "kueue"
    for path in upstream.rglob("kueue.x-k8s.io_workloads.yaml"):
        path.unlink()  # a 404 upstream
    assert reference.main(["fetch", "--dest", str(tmp_path / "ref"), "--base-url", base]) == 1
    err = capsys.readouterr().err
    assert "kueue.x-k8s.io_workloads.yaml: HTTP 404" in err and not (tmp_path / "ref").exists()
    assert reference.main(["check", str(need_reference()), "--all"]) == 0

    not_ours = tmp_path / "notes"
    not_ours.mkdir()
    (not_ours / "mine.txt").write_text("keep me")
    with pytest.raises(reference.ReferenceError, match="not a reference directory"):
        reference.fetch(not_ours, base_url=base, manifest=manifest)
    assert (not_ours / "mine.txt").read_text() == "keep me"


def test_the_dockerfile_and_makefile_fetch_with_it() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "python -m infra.reference fetch" in dockerfile
    assert "COPY infra/__init__.py infra/reference.py infra/reference-manifest.json" in dockerfile
    assert "infra.reference fetch" in (REPO / "Makefile").read_text()
