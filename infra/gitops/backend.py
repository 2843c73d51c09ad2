"""GitOps backend: desired state as one YAML file per object in a git repository.

Argo CD or Flux syncs the repository into the cluster. We commit only real changes, so `git log`
is the history of what gpufleet wanted and when.

Cost follows the change, not the fleet (benchmarks/reconcile.py, 10,000 tenants = 160,000 files):
- a commit is one `git fast-import` of the changed files on top of main plus an `update-index` of
  just those paths (`Git.commit_files`; for one tenant's change in the background, after the commit):
  `git add`/`git commit` read and rewrite the whole index;
- what HEAD holds for an owner is compared by tree id: the id of the folder's tree, computed in
  Python from the bytes (`tree_sha`), against HEAD's (one `ls-tree` of the parent folder serves a
  whole fleet pass, a `cat-file --batch-check` a single apply); only a folder that differs is listed;
- the fleet's no-op check (`token`/`token_in_sync`) reads no file at all: HEAD's tree id, one
  `git status` for hand edits in the work tree, and the drift record's stat.

Drift: for every owner we keep, outside the tracked tree (`.git/gpufleet/`), the SHA-256 of each
file as gpufleet last wrote it. A file that must be rewritten and whose bytes are not what we last
wrote (edited or deleted by hand, committed or not, or added by hand) is *drift*: the same apply
repairs it, counts it in `ApplyResult.drifted`, and says "repair drift" in the commit message.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..backend import ApplyResult
from ..errors import PermanentError
from ..manifests import Manifest, ObjectRef, Owner, ref, to_yaml
from . import health, publish
from .git import Git, blob_sha, tree_sha


def file_name(obj: ObjectRef) -> str:
    """One file per object; group in the name because kinds repeat across groups (Topology)."""
    group = obj.group or "core"
    if obj.namespace:
        return f"{obj.kind.lower()}.{group}_{obj.namespace}_{obj.name}.yaml"
    return f"{obj.kind.lower()}.{group}_{obj.name}.yaml"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_file(path: str, data: bytes) -> None:
    """Create or overwrite `path` with `data`: one open, write and close, no buffered-file wrapper."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def record_text(files: dict[str, bytes]) -> str:
    """The drift record of an owner whose files are `files` (see `GitOpsBackend.record_written`)."""
    return json.dumps({name: sha256(data) for name, data in sorted(files.items())})


# - a split index: a write touches a small delta file, not the whole index (~26 MB at 10,000 tenants);
# - the untracked cache: a status does not re-read every folder;
# - superseded shared index files removed an hour after their last use, not git's default two weeks: a
#   cold pass of 10,000 tenants rewrites the shared index ~14 times as the index grows (each rewrite a
#   new file of up to 26 MB), which left ~130 MB of dead files in .git. An hour, not "now": a git run of
#   another process that has read `.git/index` may still be about to open the shared file it names.
INDEX_CONFIG = {
    "core.splitIndex": "true",
    "core.untrackedCache": "true",
    "splitIndex.sharedIndexExpire": "1.hour.ago",
    # - the split part kept small: see git.BULK_SPLIT_PERCENT.
    "splitIndex.maxPercentChange": "2",
}

# Repository path -> the HEAD/main fingerprint whose main `health.repair_main` last found sound.
_VERIFIED: dict[str, tuple[object, ...]] = {}

# Drift records by (path, stat): the fleet's no-op check stats each record instead of reading it.
_RECORDS: dict[str, tuple[tuple[int, ...], bytes]] = {}

# After this many single-folder HEAD lookups under one parent in one HEAD, list the parent at once.
_LOOKUPS_BEFORE_LISTING = 8


@dataclass
class Plan:
    """What one owner's apply will do to its folder (computed under the lock, before any write)."""

    owner: Owner
    desired: dict[str, bytes]
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    drifted: list[str] = field(default_factory=list)
    # Files whose work-tree bytes are already right but are not what HEAD holds (a `git add` or
    # `git commit` failed after they were written): nothing to write, but a commit to make.
    uncommitted: list[str] = field(default_factory=list)
    index_stale: bool = False
    # Names whose bytes on disk were not HEAD's when planned -> HEAD's blob id (None: not in HEAD).
    head_blobs: dict[str, str | None] = field(default_factory=dict)
    # HEAD had no such folder when planned: its commit adds the whole folder (`Git.commit_files` new_folders).
    new_in_head: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.pruned or self.uncommitted)

    def summary(self) -> str:
        text = f"{len(self.created)} created, {len(self.updated)} updated, {len(self.pruned)} pruned"
        text += f", {len(self.uncommitted)} committed late" if self.uncommitted else ""
        return text + (f", {len(self.drifted)} drifted" if self.drifted else "")

    def result(self, revision: str | None) -> ApplyResult:
        base = self.owner.path
        return ApplyResult(
            created=[f"{base}/{n}" for n in self.created],
            updated=[f"{base}/{n}" for n in sorted(self.updated + self.uncommitted)],
            unchanged=[f"{base}/{n}" for n in self.unchanged],
            pruned=[f"{base}/{n}" for n in self.pruned],
            revision=revision,
            drifted=[f"{base}/{n}" for n in self.drifted],
        )


class GitOpsBackend:
    name = "gitops"

    def __init__(
        self,
        path: str | Path,
        author: str = "gpufleet <gpufleet@localhost>",
        *,
        remote: str = "",
        remote_branch: str = "main",
        push_enabled: bool = False,
        push_status_dir: str = "",
    ) -> None:
        self.path = Path(path)
        self.git = Git(self.path, author)
        # Where a lost working copy is cloned from (the repository the push sidecar publishes to).
        self.remote, self.remote_branch = remote, remote_branch
        # With push enabled a commit counts as applied only once the remote has it (`unpublished`).
        self.push_enabled = push_enabled and bool(remote)
        self.push_status_dir = push_status_dir  # where the sidecar records its rounds ("" -> .git/gpufleet)
        # Inside `batch()`: owner folders written but not yet committed, and their summaries.
        self._batch: dict[str, Plan] | None = None
        # One `git status` of the whole repository serves every plan and `in_sync` check until git's
        # committed state moves (HEAD, main: see `_fingerprint`); a failed write clears it. So a fleet
        # pass or a batch of 250 tenants costs one status, not one per tenant (benchmarks/reconcile.py).
        self._status_cache: tuple[tuple[object, ...], bool, frozenset[str]] | None = None
        self._dirty_folders: tuple[frozenset[str], frozenset[str]] | None = None  # (dirty paths, their folders)
        self._verified: tuple[object, ...] | None = None  # HEAD/main fingerprint last verified
        # HEAD's tree id of each folder, by parent folder, for one fingerprint (see `_head_tree`).
        self._trees: tuple[tuple[object, ...], dict[str, dict[str, str]], dict[str, int]] | None = None
        self._configured = False
        self._git_dir = str(self.git.git_dir())

    @contextmanager
    def locked(self) -> Iterator[None]:
        """One writer at a time: git's index is shared by every tenant's apply (and by proposals).

        The repository is repaired or reported first (`health.repair`), and a write the disk
        refuses becomes `RepositoryUnwritable` with the reason, never a stray OSError."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            lock_path = self.path.parent / f".{self.path.name}.lock"
            handle = open(lock_path, "a+")
        except OSError as exc:
            raise health.unwritable(exc, f"opening {self.path}") from exc
        with handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                self.git.ensure_repo(remote=self.remote, remote_branch=self.remote_branch)
                self._configure()
                health.repair_index_lock(self.git)
                # main is checked again only when it moved (remembered per repository across instances:
                # each task builds its own backend, and the event path should not pay a `rev-parse`).
                if self._fingerprint() not in (self._verified, _VERIFIED.get(str(self.path))):
                    health.repair_main(self.git)
                    self._verified = _VERIFIED[str(self.path)] = self._fingerprint()
                if self._batch is None:
                    self._commit_interrupted_batch()
                yield
            except OSError as exc:
                self._forget()
                raise health.unwritable(exc, "writing the desired state") from exc
            except PermanentError as exc:
                self._forget()
                classified = health.classify_git_failure(exc)
                if classified is exc:
                    raise
                raise classified from exc
            except BaseException:
                self._forget()  # a write may have happened without its commit: ask git again next time
                raise
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _configure(self) -> None:
        """Index settings that keep git's cost proportional to a change at 100,000s of files. Set once
        per repository (a repository from an older version gets the settings it lacks)."""
        if self._configured:
            return
        try:
            config = (self.git.git_dir() / "config").read_text().lower()
        except OSError:
            config = ""
        for key, value in INDEX_CONFIG.items():
            if f"{key.rpartition('.')[2].lower()} = {value}" not in config:
                self.git.run("config", key, value)
        self._configured = True

    # --- what is committed -------------------------------------------------------------------------

    def _head_tree(self, own: Owner, fingerprint: tuple[object, ...] | None = None) -> str | None:
        """HEAD's tree id for the owner's folder (None if HEAD has no such folder)."""
        parent, _, leaf = own.path.rpartition("/")
        fingerprint = fingerprint or self._fingerprint()
        if self._trees is None or self._trees[0] != fingerprint:
            self._trees = (fingerprint, {}, {})
        _, listings, lookups = self._trees
        if parent not in listings:
            lookups[parent] = lookups.get(parent, 0) + 1
            if lookups[parent] <= _LOOKUPS_BEFORE_LISTING:  # a single apply: one lookup, no listing
                return self._trees_at("HEAD", [own.path])[own.path]
            listings[parent] = {
                name: sha for name, (mode, sha) in self.git.ls_tree("HEAD", parent).items() if mode == "040000"
            }
        return listings[parent].get(leaf)

    def _trees_at(self, rev: str, paths: list[str]) -> dict[str, str | None]:
        """Tree ids of `paths` in `rev` with one `git cat-file --batch-check` (None: no such folder)."""
        out = self.git.run("cat-file", "--batch-check", input_="".join(f"{rev}:{p}\n" for p in paths))
        found: dict[str, str | None] = {}
        for path, line in zip(paths, out.splitlines(), strict=True):
            parts = line.split(" ")
            found[path] = parts[0] if len(parts) == 3 and parts[1] == "tree" else None
        return found

    def _committed_trees(self, paths: list[str]) -> dict[str, str | None]:
        """HEAD's tree id of each folder in `paths` (None: no such folder). A few folders: one `cat-file
        --batch-check`. Many (a fleet pass's chunk of 250 tenants): one `ls-tree` per parent folder, because
        `cat-file` resolves every `HEAD:<path>` from the root, re-reading the parent's tree each time -- at
        10,000 tenants a 10,000-entry tree read 250 times per chunk, most of the cold pass's git CPU after
        fast-import."""
        if len(paths) <= _LOOKUPS_BEFORE_LISTING:
            return self._trees_at("HEAD", paths)
        listings: dict[str, dict[str, str]] = {}
        found: dict[str, str | None] = {}
        for path in paths:
            parent, _, leaf = path.rpartition("/")
            if parent not in listings:
                listings[parent] = {
                    name: sha for name, (mode, sha) in self.git.ls_tree("HEAD", parent).items() if mode == "040000"
                }
            found[path] = listings[parent].get(leaf)
        return found

    def _head_uncommitted(self, own: Owner, on_disk: dict[str, bytes], head_tree: str | None) -> dict[str, str | None]:
        """Names in the owner's folder whose bytes on disk (`on_disk`: every file there) are not what
        HEAD holds (`head_tree`: its tree id of the folder, None if it has none), including files only one
        side has, with HEAD's blob id (None: not in HEAD). Equal tree ids settle it without a listing."""
        if head_tree is None:
            return dict.fromkeys(on_disk)
        if on_disk and tree_sha(on_disk) == head_tree:
            return {}
        committed = self.git.ls_tree("HEAD", own.path)
        return {
            name: committed[name][1] if name in committed else None
            for name in on_disk.keys() | committed.keys()
            if name not in on_disk or name not in committed or committed[name] != ("100644", blob_sha(on_disk[name]))
        }

    def _uncommitted(self, *pathspecs: str) -> set[str]:
        """Repo paths whose work tree or index differs from HEAD (edited, added, deleted, staged)."""
        args = ["--porcelain", "-z", "--untracked-files=all", "--no-renames"]
        out = self.git.status(*args, *(["--", *pathspecs] if pathspecs else []))
        return {entry[3:] for entry in out.split("\0") if len(entry) > 3}

    def _forget(self) -> None:
        self._status_cache = None
        self._verified = None
        _VERIFIED.pop(str(self.path), None)

    def _fingerprint(self) -> tuple[object, ...]:
        """What the committed state hangs on: HEAD, main (loose or packed), and a lock in progress.

        Not the index: `git status` itself rewrites it (stat cache, untracked cache). What the index could
        add -- something staged but not committed -- is either our own failed write (which clears the cache,
        `_forget`) or a hand edit whose bytes the plan compares anyway."""
        # stat, not read: a ref update is an atomic rename (new inode) or a rewrite (new mtime/size), and a
        # fleet check asks this once per tenant (10,000 times a pass).
        git_dir = self._git_dir  # a str: a pathlib join per call was a tenth of the fleet's no-op check

        def stamp(path: str) -> object:
            try:
                st = os.stat(path)
            except OSError:
                return None
            return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)

        return (stamp(f"{git_dir}/HEAD"), stamp(f"{git_dir}/refs/heads/main"), stamp(f"{git_dir}/packed-refs"),
                stamp(f"{git_dir}/index.lock"))

    def _repo_view(self, fingerprint: tuple[object, ...] | None = None) -> tuple[bool, frozenset[str]]:
        """(HEAD is a commit on main, paths that differ from HEAD), cached while `_fingerprint` holds
        (`fingerprint`: the caller's, taken just now)."""
        fingerprint = fingerprint or self._fingerprint()
        if fingerprint[0] is None:  # no .git/HEAD: not a repository (yet)
            return (False, frozenset())
        if self._status_cache is None or self._status_cache[0] != fingerprint:
            on_main = health.head_target(self.git) == "refs/heads/main"
            ok = on_main and self.git.ref_exists("refs/heads/main")
            self._status_cache = (fingerprint, ok, frozenset(self._uncommitted()))
        return self._status_cache[1], self._status_cache[2]

    def _dirty(self, own: Owner, dirty: frozenset[str]) -> bool:
        """Does `git status` (`dirty`, from `_repo_view`) list anything directly in the owner's folder?"""
        if self._dirty_folders is None or self._dirty_folders[0] is not dirty:
            self._dirty_folders = (dirty, frozenset(p.rpartition("/")[0] for p in dirty))
        return own.path in self._dirty_folders[1]

    def _verify_committed(self, plans: Sequence[Plan]) -> None:
        """After a commit: HEAD must hold exactly what is on disk in each folder, or the commit did not
        record gpufleet's writes."""
        trees = self._committed_trees([p.owner.path for p in plans])
        for plan in plans:
            on_disk = self._on_disk(plan)
            want = tree_sha(on_disk) if on_disk else None
            if trees[plan.owner.path] != want:
                raise health.RepositoryBroken(
                    f"after committing, {plan.owner.path} differs from HEAD: "
                    "the repository is not recording gpufleet's writes"
                )
        if self._status_cache is not None:
            # These folders now equal HEAD (a write that restored HEAD's bytes commits nothing and leaves
            # main where it was, so the cached status would still list them): drop them from it.
            fingerprint, ok, dirty = self._status_cache
            folders = {p.owner.path for p in plans}
            self._status_cache = (fingerprint, ok, frozenset(d for d in dirty if d.rpartition("/")[0] not in folders))

    def _on_disk(self, plan: Plan) -> dict[str, bytes]:
        """The files in the plan's folder now. Under the lock, right after `_write`, a folder whose names are
        exactly the desired ones holds the desired bytes (we wrote them; nothing else writes under the lock),
        so only a listing is needed -- a cold start verifies 160,000 files and reading each back was a tenth
        of its time. Any other name (a file that is not ours) and the folder is read as before."""
        folder = self.path / plan.owner.path
        try:
            names = {e.name for e in os.scandir(folder) if e.is_file(follow_symlinks=False)}
        except (FileNotFoundError, NotADirectoryError):
            names = set()
        if names == plan.desired.keys():
            return plan.desired
        return self._files(folder)

    def unpublished(self, owner: str) -> str | None:
        """With push enabled: why the commit holding `owner`'s current files is not on the remote
        yet (None once it is, or without push)."""
        if not self.push_enabled:
            return None
        own = Owner.parse(owner)
        if self._batch is not None and own.path in self._batch:
            return "the commit holding this owner's files is made when the current batch ends"
        commit = self.git.run("log", "-1", "--format=%H", "refs/heads/main", "--", own.path).strip()
        return publish.unpublished(self.git, commit, self.push_status_dir)

    def repository_status(self) -> dict[str, object]:
        """The repository's condition and the push sidecar's last result, for the fleet sync status."""
        push = publish.read_status(self.git, self.push_enabled, self.push_status_dir)
        return {**health.check(self.git).as_dict(), "push": push}

    # --- what is on disk, and what gpufleet last wrote -------------------------------------------

    def _files(self, folder: Path) -> dict[str, bytes]:
        """Every regular file directly in `folder`, by name."""
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return {}
        return {entry.name: Path(entry.path).read_bytes() for entry in entries if entry.is_file(follow_symlinks=False)}

    def _existing(self, folder: Path) -> dict[str, bytes]:
        return {name: data for name, data in self._files(folder).items() if name.endswith(".yaml")}

    def _index_path(self, own: Owner) -> Path:
        return self.git.git_dir() / "gpufleet" / "written" / (own.path.replace("/", "__") + ".json")

    def written(self, own: Owner) -> dict[str, str] | None:
        """File name -> SHA-256 of what gpufleet last wrote for this owner; None if never recorded."""
        try:
            return dict(json.loads(self._index_path(own).read_text()))
        except FileNotFoundError:
            return None

    def record_written(self, own: Owner, files: dict[str, bytes]) -> None:
        path = self._index_path(own)
        if not files:
            path.unlink(missing_ok=True)
            return
        tmp, data = f"{path}.tmp", record_text(files).encode()
        try:
            write_file(tmp, data)
        except FileNotFoundError:  # the first record of this repository (no mkdir per record: a stat each)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_file(tmp, data)
        os.replace(tmp, path)  # atomic: a crash never leaves half an index

    def _record_key(self, own: Owner) -> bytes | None:
        """BLAKE2 of the owner's drift record as stored (None if there is none), by its stat."""
        path = f"{self._git_dir}/gpufleet/written/{own.path.replace('/', '__')}.json"  # `_index_path`
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        stamp = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        known = _RECORDS.get(path)
        if known is None or known[0] != stamp:
            with open(path, "rb") as handle:
                known = (stamp, hashlib.blake2b(handle.read(), digest_size=16).digest())
            _RECORDS[path] = known
        return known[1]

    # --- planning and writing --------------------------------------------------------------------

    @staticmethod
    def desired_files(manifests: list[Manifest]) -> dict[str, bytes]:
        files: dict[str, bytes] = {}
        for manifest in manifests:
            name = file_name(ref(manifest))
            if name in files:
                raise PermanentError(f"two rendered objects share the identity {ref(manifest)}")
            files[name] = to_yaml(manifest).encode()
        return files

    def plan(self, own: Owner, desired: dict[str, bytes]) -> Plan:
        """Under the lock. Files on disk that differ from HEAD are `uncommitted`: the work tree alone
        never counts as applied."""
        on_disk = self._files(self.path / own.path)
        existing = {name: data for name, data in on_disk.items() if name.endswith(".yaml")}
        written = self.written(own)
        head_tree = self._head_tree(own)
        uncommitted = self._head_uncommitted(own, on_disk, head_tree)
        plan = Plan(own, desired, head_blobs=uncommitted, new_in_head=head_tree is None)
        for name in sorted(desired.keys() | existing.keys() | uncommitted.keys()):
            want, have = desired.get(name), existing.get(name)
            if have == want:  # right on disk (or absent and unwanted): is HEAD right too?
                if name in uncommitted:
                    plan.uncommitted.append(name)
                elif have is not None:
                    plan.unchanged.append(name)
                continue
            if have is None:
                plan.created.append(name)
            elif want is None:
                plan.pruned.append(name)
            else:
                plan.updated.append(name)
            # Needs a write. Drift if the bytes on disk are not what we last wrote. Without any record
            # (a repository from before drift tracking) nothing can be called drift.
            if written is not None:
                on_disk = sha256(have) if have is not None else None
                if on_disk != written.get(name):
                    plan.drifted.append(name)
        if written is None:
            plan.index_stale = bool(desired)
        else:
            plan.index_stale = written.keys() != desired.keys() or any(
                written[name] != sha256(data) for name, data in desired.items()
            )
        return plan

    def _write(self, plan: Plan) -> None:
        # Plain strings and os calls, not pathlib: a cold pass of 10,000 tenants writes 160,000 files here,
        # and pathlib's per-path parsing and buffered-file wrapper were a third of this function's CPU.
        folder = f"{self.path}/{plan.owner.path}"
        if plan.changed:
            os.makedirs(folder, exist_ok=True)
            for name in plan.created + plan.updated:
                write_file(f"{folder}/{name}", plan.desired[name])
            for name in plan.pruned:
                os.unlink(f"{folder}/{name}")
            if not plan.desired and os.path.isdir(folder) and not os.listdir(folder):
                os.rmdir(folder)
        if plan.changed or plan.index_stale:
            self.record_written(plan.owner, plan.desired)

    @staticmethod
    def _subject(message: str, plans: Sequence[Plan]) -> str:
        drifted = sum(len(p.drifted) for p in plans)
        return f"{message}: repair drift ({drifted} objects)" if drifted else message

    def apply(self, owner: str, manifests: list[Manifest], *, message: str = "") -> ApplyResult:
        return self.apply_files(owner, self.desired_files(manifests), message=message)

    def apply_files(self, owner: str, desired: dict[str, bytes], *, message: str = "") -> ApplyResult:
        """`apply` of manifests already serialised by `desired_files` (the cold pass serialises them in
        worker processes, tenants.prerender)."""
        own = Owner.parse(owner)
        with self.locked():
            plan = self.plan(own, desired)
            self._write(plan)
            revision = None
            if plan.changed and self._batch is not None:
                # Committed when the batch ends; recorded on disk so a crash cannot strand the files.
                self._batch[own.path] = plan
                self._pending_path().write_text("\n".join(sorted(self._batch)))
            elif plan.changed:
                subject = self._subject(message or owner, [plan])
                revision = self._commit([plan], f"{subject}\n\n{plan.summary()}")
            return plan.result(revision)

    def _commit(self, plans: Sequence[Plan], message: str) -> str | None:
        """One commit of every change the plans made (their folders' new bytes), verified against HEAD."""
        changes: dict[str, bytes | None] = {}
        restored: list[str] = []
        for plan in plans:
            folder = self.path / plan.owner.path
            for name in plan.created + plan.updated + plan.pruned + plan.uncommitted:
                if name in plan.desired:
                    data: bytes | None = plan.desired[name]
                else:  # pruned, or a file that is not ours and differs from HEAD: commit what is on disk
                    path = folder / name
                    data = path.read_bytes() if path.is_file() else None
                # On disk it differed from HEAD; the write may have restored HEAD's bytes: not a change.
                if name in plan.head_blobs and plan.head_blobs[name] == (None if data is None else blob_sha(data)):
                    # ... but the index may hold the bytes it replaced (a hand edit re-indexed before this
                    # repair): it learns the path again, or `git status` would list it for ever.
                    restored.append(f"{plan.owner.path}/{name}")
                    continue
                changes[f"{plan.owner.path}/{name}"] = data
        new_folders = [p.owner.path for p in plans if p.new_in_head]
        if restored:
            self.git.reindex_later(restored)
        revision = self.git.commit_files(changes, message, new_folders=new_folders)
        if revision is not None:  # main moved by our own hand, onto a commit: nothing to re-check
            self._verified = _VERIFIED[str(self.path)] = self._fingerprint()
        self._verify_committed(plans)
        return revision

    # --- many owners, one commit -----------------------------------------------------------------

    def _pending_path(self) -> Path:
        """This batch's list of written-but-uncommitted folders (one file per batch: batches in two
        processes never overwrite each other's list)."""
        path = self.git.git_dir() / "gpufleet" / f"pending-{os.getpid()}-{id(self)}"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _commit_interrupted_batch(self) -> None:
        """A batch that died between writing and committing left files that would look unchanged
        to every later apply (bytes equal the desired state) and so never reach git. Commit them.
        (A batch still running elsewhere only gets its commit split in two: harmless.)"""
        folder = self.git.git_dir() / "gpufleet"
        if not folder.is_dir():
            return
        for pending in sorted(folder.glob("pending-*")):
            paths = [p for p in pending.read_text().split() if p]
            if paths:
                self.git.commit_paths(paths, "gpufleet: commit the changes of an interrupted batch")
            pending.unlink(missing_ok=True)

    @contextmanager
    def batch(self, message: str) -> Iterator[None]:
        """Applies inside the block write files at once but commit together, in one commit, at the end.

        For fleet-wide passes (the cold start of a thousand tenants): one `git add`/`git commit`
        instead of one per tenant. Applies inside report `revision=None`; the batch's commit follows.
        """
        if self._batch is not None:
            raise RuntimeError("GitOpsBackend.batch() does not nest")
        self._batch = {}
        try:
            yield
        finally:
            # Commit what was written even if the block failed: each owner's apply was complete.
            try:
                with self.locked():
                    if self._batch:
                        plans = [self._batch[path] for path in sorted(self._batch)]
                        body = "\n".join(f"{p.owner}: {p.summary()}" for p in plans)
                        self._commit(plans, f"{self._subject(message, plans)}\n\n{body}")
                    self._pending_path().unlink(missing_ok=True)
            finally:
                self._batch = None

    def maintain(self) -> None:
        """At the end of a fleet pass (tenants.fleet): the repository upkeep kept off the event path --
        compact the split index after large commits, merge small packs (`Git.maintain`). A no-op pass with
        nothing due takes no lock."""
        if self.git.maintenance_due():
            with self.locked():
                self.git.maintain()

    def in_sync(self, owner: str, manifests: list[Manifest]) -> bool:
        """Read-only, lock-free check: would `apply` change nothing? See `token_in_sync`."""
        return self.token_in_sync(owner, self.token(manifests))

    @staticmethod
    def token(manifests: list[Manifest]) -> tuple[str, bytes]:
        """What `token_in_sync` compares, for these manifests: the tree id their files make and the
        digest of their drift record. A pure function of the manifests, so a caller may keep it for as
        long as the render inputs are the same (tenants.fleet does) and skip rendering altogether."""
        return GitOpsBackend.token_of_files(GitOpsBackend.desired_files(manifests))

    @staticmethod
    def token_of_files(files: dict[str, bytes]) -> tuple[str, bytes]:
        """`token` of the manifests whose `desired_files` are `files`."""
        return tree_sha(files) if files else "", hashlib.blake2b(record_text(files).encode(), digest_size=16).digest()

    def token_in_sync(self, owner: str, token: tuple[str, bytes]) -> bool:
        """Read-only, lock-free, and no file read: HEAD's tree for the owner's folder is exactly the
        desired files (`token`), `git status` (one for every check of this instance, while HEAD and
        main stay) lists nothing in it -- no hand edit, addition, deletion or uncommitted write -- and
        the drift record is the one those files make. A broken main is never "in sync"."""
        self.git.settle_index()  # first: a drainer in flight would move the fingerprint (its index.lock)
        fingerprint = self._fingerprint()  # once: HEAD/main must not move between the checks below
        head_ok, dirty = self._repo_view(fingerprint)
        return head_ok and self._owner_in_sync(Owner.parse(owner), token, fingerprint, dirty)

    def tokens_in_sync(self, checks: Sequence[tuple[str, tuple[str, bytes]]]) -> list[bool]:
        """`token_in_sync` of many (owner, token) pairs, for the fleet's no-op pass: HEAD/main's fingerprint is
        taken once before and once after (not twice per owner: 4 `stat`s each), and if it moved meanwhile
        every pair is asked again on its own, against the new state."""
        self.git.settle_index()  # first: a drainer in flight would move the fingerprint (its index.lock)
        fingerprint = self._fingerprint()
        head_ok, dirty = self._repo_view(fingerprint)
        if not head_ok:
            return [False] * len(checks)
        answers = [self._owner_in_sync(Owner.parse(owner), token, fingerprint, dirty) for owner, token in checks]
        if self._fingerprint() != fingerprint:
            return [self.token_in_sync(owner, token) for owner, token in checks]
        return answers

    def _owner_in_sync(self, own: Owner, token: tuple[str, bytes], fingerprint: tuple[object, ...],
                       dirty: frozenset[str]) -> bool:
        """`token_in_sync` for one owner, given the fingerprint and the `git status` taken with it."""
        if self._dirty(own, dirty):
            return False
        tree, record = token
        if (self._head_tree(own, fingerprint) or "") != tree:
            return False
        if not tree:  # nothing desired: in sync without any record
            return self._record_key(own) is None
        return self._record_key(own) == record

    def apply_many(
        self, batch: Sequence[tuple[str, list[Manifest]]], *, message: str
    ) -> dict[str, ApplyResult]:
        """Apply many owners under one lock and record every change in ONE commit.

        For the cold path and the fleet sync: a thousand tenants are one commit instead of a
        thousand `git add`/`git commit` pairs. Each owner keeps `apply`'s semantics (prune, drift).
        """
        owners = [(Owner.parse(owner), self.desired_files(manifests)) for owner, manifests in batch]
        if len({own for own, _ in owners}) != len(owners):
            raise PermanentError("apply_many got the same owner twice")
        with self.locked():
            plans = [self.plan(own, desired) for own, desired in owners]
            for plan in plans:
                self._write(plan)
            changed = [p for p in plans if p.changed]
            revision = None
            if changed:
                body = "\n".join(f"{p.owner}: {p.summary()}" for p in changed)
                revision = self._commit(changed, f"{self._subject(message, changed)}\n\n{body}")
            return {str(p.owner): p.result(revision if p.changed else None) for p in plans}

    def has_committed(self, owners: Sequence[str]) -> bool:
        """Read-only: does HEAD hold a folder for each of these owners? One `cat-file --batch-check`."""
        paths = [Owner.parse(owner).path for owner in owners]
        if not paths or self._fingerprint()[0] is None:
            return False
        return all(tree is not None for tree in self._trees_at("HEAD", paths).values())

    def owned(self, owner: str) -> list[str]:
        own = Owner.parse(owner)
        return sorted(f"{own.path}/{n}" for n in self._existing(self.path / own.path))
