"""Fetch the upstream reference bundle (GPUFLEET_REFERENCE_DIR) at the pinned commits and verify every byte.

gpufleet validates each rendered object against upstream CRD schemas and the vCluster chart's values schema
(infra/schemas.py). Those files are upstream data we do not commit; `reference-manifest.json` beside this
module says, for each one, which repository, commit and path it comes from and the sha256 it must have. This
module downloads them from `<base>/<repo>/<commit>/<path>` (raw.githubusercontent.com by default; any base
URL, `file://` included, for mirrors and tests), checks every sha256, writes `crds/index.json` from the
manifest's CRD entries (checked too), and only then moves the complete directory into place. Any mismatch
or failed download deletes everything fetched so far and leaves the destination as it was.

Standard library only, so it runs on a build host without gpufleet installed and in the Dockerfile's
`reference-fetch` stage:

    python3 -m infra.reference fetch --dest var/reference          # what the image needs (`runtime`)
    python3 -m infra.reference fetch --dest var/reference --all    # every fetchable file (test data too)
    python3 -m infra.reference check /work/shared/reference --all  # verify an existing copy

Files the manifest lists as `not_fetchable` (the collector's notes, SYNTHETIC fixtures, composed examples)
exist only in the collector's bundle; the running image reads none of them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

MANIFEST = Path(__file__).with_name("reference-manifest.json")
SUMS = "SHA256SUMS"
TIMEOUT_SECONDS = 60.0
INDEX = "crds/index.json"

Opener = Callable[[str], bytes]


class ReferenceError(Exception):
    """A download failed or a file is not what the manifest says; the message names file, URL and digests."""


def load_manifest(path: Path = MANIFEST) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def selected(manifest: dict[str, Any], *, everything: bool) -> list[dict[str, Any]]:
    return [entry for entry in manifest["files"] if everything or entry["runtime"]]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def url_for(base_url: str, entry: dict[str, Any]) -> str:
    return f"{base_url.rstrip('/')}/{entry['repo']}/{entry['commit']}/{entry['upstream']}"


def download(url: str, timeout: float = TIMEOUT_SECONDS) -> bytes:
    if not url.startswith(("https://", "http://", "file://")):
        raise ReferenceError(f"{url}: only https, http and file URLs are fetched")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - scheme checked above
            return response.read()  # type: ignore[no-any-return]
    except urllib.error.HTTPError as exc:
        raise ReferenceError(f"{url}: HTTP {exc.code} {exc.reason} (is the commit or path in the manifest "
                             "right, and the repository public?)") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ReferenceError(f"{url}: not reachable ({reason})") from exc


def split_document(text: bytes, name: str) -> bytes:
    """The YAML document whose metadata.name is `name`, byte for byte, from a multi-document file: the lines
    between two `---` separator lines (separators excluded), as the collector cut the VictoriaMetrics CRDs."""
    for document in re.split(rb"(?m)^---\n", text):
        found = re.search(rb"(?m)^metadata:\n(?:  .*\n)*?  name: (\S+)$", document)
        if found and found.group(1).decode() == name:
            return document
    raise ReferenceError(f"no document named {name!r} in the upstream file")


def crd_index(entries: Iterable[dict[str, Any]]) -> bytes:
    """crds/index.json as the collector wrote it: one object per CRD file, sorted by path."""
    index = [{"file": e["path"], **e["crd"]} for e in sorted(entries, key=lambda e: e["path"]) if "crd" in e]
    return (json.dumps(index, indent=1) + "\n").encode()


def _verified(entry: dict[str, Any], data: bytes, url: str) -> bytes:
    got = sha256(data)
    if got != entry["sha256"]:
        raise ReferenceError(
            f"{entry['path']}: sha256 mismatch, refusing it (expected {entry['sha256']}, got {got}; from {url}). "
            "Upstream changed or the download was tampered with; nothing was written.")
    return data


def contents(entries: list[dict[str, Any]], base_url: str, opener: Opener) -> dict[str, bytes]:
    """Every selected file's verified bytes, by local path. An upstream file shared by several entries (the
    VictoriaMetrics CRDs, cut from one multi-document file) is downloaded once."""
    cache: dict[str, bytes] = {}
    out: dict[str, bytes] = {}
    for entry in entries:
        if "generated" in entry:
            continue
        url = url_for(base_url, entry)
        if url not in cache:
            cache[url] = opener(url)
        data = cache[url]
        if "document" in entry:
            got = sha256(data)
            if got != entry["upstream_sha256"]:
                raise ReferenceError(f"{entry['upstream']}: sha256 mismatch, refusing it (expected "
                                     f"{entry['upstream_sha256']}, got {got}; from {url}); nothing was written.")
            data = split_document(data, entry["document"])
        out[entry["path"]] = _verified(entry, data, url)
    for entry in entries:
        if entry.get("generated"):
            out[entry["path"]] = _verified(entry, crd_index(entries), "generated from the manifest")
    return out


def check(directory: Path, manifest: dict[str, Any] | None = None, *, everything: bool = False) -> list[str]:
    """Problems with an existing copy (missing files, wrong digests); empty when it is complete and intact."""
    manifest = manifest or load_manifest()
    problems = []
    for entry in selected(manifest, everything=everything):
        path = directory / entry["path"]
        if not path.is_file():
            problems.append(f"{entry['path']}: missing")
        elif (got := sha256(path.read_bytes())) != entry["sha256"]:
            problems.append(f"{entry['path']}: sha256 {got}, expected {entry['sha256']}")
    return problems


def fetch(dest: Path, *, base_url: str | None = None, everything: bool = False, force: bool = False,
          manifest: dict[str, Any] | None = None, opener: Opener = download) -> str:
    """Fetch into `dest` (created or replaced whole); returns what was done, raises ReferenceError."""
    manifest = manifest or load_manifest()
    dest = dest.resolve()
    if dest.exists() and not force and not check(dest, manifest, everything=everything):
        return f"{dest}: already complete and verified ({len(selected(manifest, everything=everything))} files)"
    if dest.exists() and any(dest.iterdir()) and not (dest / SUMS).is_file():
        raise ReferenceError(f"{dest} exists and is not a reference directory (no {SUMS}); "
                             "give a new or empty directory")
    entries = selected(manifest, everything=everything)
    files = contents(entries, base_url or manifest["base_url"], opener)  # all verified before any write
    dest.parent.mkdir(parents=True, exist_ok=True)
    # Staged beside the destination (same filesystem), so the final renames are atomic.
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
    try:
        for path, data in files.items():
            (staging / path).parent.mkdir(parents=True, exist_ok=True)
            (staging / path).write_bytes(data)
        (staging / SUMS).write_text("".join(f"{sha256(files[p])}  {p}\n" for p in sorted(files)), encoding="utf-8")
        staging.chmod(0o755)
        if dest.exists():
            dest.rename(old)
        staging.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return f"{dest}: {len(files)} files fetched and verified"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m infra.reference", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    get = commands.add_parser("fetch", help="download the pinned files into a directory and verify them")
    get.add_argument("--dest", type=Path, default=Path("var/reference"),
                     help="directory to create or replace (default var/reference)")
    get.add_argument("--base-url", help="mirror of raw.githubusercontent.com (<base>/<repo>/<commit>/<path>); "
                                         "file:// URLs work")
    get.add_argument("--force", action="store_true", help="download even if the directory already verifies")
    verify = commands.add_parser("check", help="verify an existing directory against the manifest")
    verify.add_argument("directory", type=Path)
    for sub in (get, verify):
        sub.add_argument("--all", action="store_true", dest="everything",
                         help="every fetchable file (tests' data too), not only what the image reads")
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            problems = check(args.directory, everything=args.everything)
            for problem in problems:
                print(f"{args.directory}/{problem}", file=sys.stderr)
            if not problems:
                print(f"{args.directory}: verified")
            return 1 if problems else 0
        print(fetch(args.dest, base_url=args.base_url, everything=args.everything, force=args.force))
        return 0
    except ReferenceError as exc:
        print(f"reference: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
