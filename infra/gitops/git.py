"""A thin wrapper around the git CLI for one repository."""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Collection, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path

from ..errors import PermanentError, TransientError

log = logging.getLogger(__name__)


def blob_sha(data: bytes) -> str:
    """The object name git gives a file with these bytes (`git hash-object`), computed in Python."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def tree_sha(files: Mapping[str, bytes]) -> str:
    """The object name of a git tree holding exactly `files` (plain, non-executable files), as `git mktree`
    would write it: entries sorted by name, each "100644 <name>\\0<20-byte blob id>"."""
    body = b"".join(
        b"100644 " + name.encode() + b"\0" + bytes.fromhex(blob_sha(files[name])) for name in sorted(files)
    )
    return hashlib.sha1(b"tree %d\0" % len(body) + body, usedforsecurity=False).hexdigest()


def _whole_folders(changes: Mapping[str, bytes | None], new_folders: Collection[str]) -> dict[str, dict[str, bytes]]:
    """The `new_folders` whose changes are all additions of files directly in them: folder -> its files.
    A deletion or a deeper path under one (which the caller should not have) leaves it to per-file changes."""
    whole: dict[str, dict[str, bytes]] = {folder: {} for folder in new_folders if folder}
    spoiled: set[str] = set()
    for path, data in changes.items():
        parent, _, leaf = path.rpartition("/")
        if parent in whole and data is not None:
            whole[parent][leaf] = data
        elif parent in whole:
            spoiled.add(parent)
        ancestor = parent.rpartition("/")[0]
        while ancestor:  # a deeper path under a new folder
            if ancestor in whole:
                spoiled.add(ancestor)
            ancestor = ancestor.rpartition("/")[0]
    return {folder: files for folder, files in whole.items() if files and folder not in spoiled}


# Every commit through `commit_files` is one small pack (fast-import keeps it: unpacking a one-tenant
# commit into loose objects was a child process on the event path, 30 ms of fast-import's 40, and left
# loose objects nothing ever packed); past this many, a fleet pass merges the recent ones (`maintain`:
# `git repack --geometric`, cost proportional to the small packs -- ~0.2 s for 25 -- off the event path).
PACKS_BEFORE_REPACK = 24
# ... and a commit does so itself only past this many (no fleet pass for a long time).
PACKS_HARD_LIMIT = 256
# Changes of at most this many paths (the event path: one tenant) leave the index to a drainer that runs after
# the commit, off the caller's time (`_drain_later`); larger ones (a chunk of the cold pass) are re-indexed
# before `commit_files` returns, after fast-import, when their blobs are already packed.
DEFERRED_REINDEX_MAX_PATHS = 64
# The split index's own part (`.git/index`) is rewritten whole by every `update-index`, and grows with each
# entry changed since the shared index was last written, up to `splitIndex.maxPercentChange` of all entries
# (backend.INDEX_CONFIG: 2 %, ~3,200 entries at 10,000 tenants). At git's default, 20 %, it reached 12 MB
# after a cold pass and a one-file event's `update-index` took 150 ms instead of 50 (measured at 10,000
# tenants over 3 clusters). Large commits (a cold pass's chunks) run at the default instead, so a pass
# does not rewrite the 26 MB shared index at every chunk; `maintain` compacts once after them.
BULK_SPLIT_PERCENT = 20
INDEX_PATHS = ["update-index", "--add", "--remove", "-z", "--stdin"]  # re-index the NUL-terminated paths given

# The index learns the paths of the event path's commits in a background `update-index`: reading the index
# alone is ~27 ms at 160,000 entries (10,000 tenants), 30-45 ms per event of wall that was most of the
# event's git time (GIT_TRACE2_PERF at 10,000 tenants x 3 clusters: fast-import 10 ms, update-index 43 ms).
# The drainer takes the index lock (`Git.index_locked`, the same flock), re-indexes every pending list
# (`reindex-*`: paths, NUL-terminated) in one `update-index` -- so a burst of events costs one index rewrite,
# not one each -- and removes the lists it did. Every reader of the index settles first (`settle_index`):
# it waits for a drainer in flight and re-indexes any list one left (killed, or never started).
_DRAIN_SCRIPT = rf"""
exec 9>>"$1" || exit 1
flock 9 || exit 1
set -- "$2"/reindex-*
[ -e "$1" ] || exit 0
cat -- "$@" | git {" ".join(INDEX_PATHS)} && rm -f -- "$@"
"""
_FLOCK = shutil.which("flock")  # util-linux (Debian: essential); without it the index is updated inline
# Index locks this thread holds, by lock file: `index_locked` nests (a settle inside a status inside a
# commit) without a second flock of the same file, which would wait for itself.
_HELD = threading.local()
# Drainers started and not yet seen to end: kept so that each is waited for (no zombie, no "still running"
# warning from a collected Popen); `_drain_later` reaps the finished ones.
_DRAINERS: list[subprocess.Popen[bytes]] = []


@atexit.register
def _wait_for_drainers() -> None:
    """A process that exits right after a commit lets its index update end (milliseconds; a drainer that
    does not end in time is left to run, its list to the next settle)."""
    for drainer in _DRAINERS:
        try:
            drainer.wait(timeout=5)
        except subprocess.TimeoutExpired:
            drainer.returncode = 0  # not ours to wait for any longer: no "still running" warning


class Git:
    def __init__(self, path: Path, author: str = "gpufleet <gpufleet@localhost>") -> None:
        self.path = path
        name, _, email = author.partition("<")
        self.env = {
            **os.environ,
            "GIT_AUTHOR_NAME": name.strip() or "gpufleet",
            "GIT_AUTHOR_EMAIL": email.rstrip(">").strip() or "gpufleet@localhost",
            "GIT_COMMITTER_NAME": name.strip() or "gpufleet",
            "GIT_COMMITTER_EMAIL": email.rstrip(">").strip() or "gpufleet@localhost",
            # Never let a user's or the machine's git config (hooks, signing, pagers) change our commits.
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
        }
        self.index_settled = True  # False after a large commit's re-index (`maintain`)

    def run(
        self, *args: str, input_: str | None = None, check: bool = True, env: dict[str, str] | None = None
    ) -> str:
        try:
            proc = subprocess.run(
                ["git", "-C", str(self.path), *args],
                input=input_,
                capture_output=True,
                text=True,
                env={**self.env, **env} if env else self.env,
                timeout=120,
            )
        except FileNotFoundError as exc:
            raise PermanentError("git is not installed on this machine") from exc
        except subprocess.TimeoutExpired as exc:
            raise TransientError(f"git {args[0]} timed out", delay=10) from exc
        if check and proc.returncode != 0:
            message = (proc.stderr or proc.stdout).strip()
            if "index.lock" in message:
                raise TransientError(f"git {args[0]}: repository busy: {message}", delay=2)
            raise PermanentError(f"git {' '.join(args[:2])} failed: {message}")
        return proc.stdout

    def ensure_repo(self, branch: str = "main", *, remote: str = "", remote_branch: str = "main") -> None:
        """Create the working copy if it is missing: from the remote when one is configured (a lost or
        restored volume must continue the remote's history, never start an unrelated one that every
        push would be refused), else a fresh repository with a README commit."""
        if (self.path / ".git").exists():
            return
        self.path.mkdir(parents=True, exist_ok=True)
        # init + fetch rather than `git clone`: the path is often a volume's mount point, which may
        # already hold files git does not know (`lost+found`) and which clone refuses.
        self.run("init", "-q", "-b", branch)
        if remote:
            wanted = f"+refs/heads/{remote_branch}:refs/gpufleet/remote"
            self.run("fetch", "-q", "--no-tags", remote, wanted, check=False)
            if self.ref_exists("refs/gpufleet/remote"):
                self.run("reset", "-q", "--hard", "refs/gpufleet/remote")
                return
            # No such branch there: fine if the remote is reachable and empty (our first push creates
            # it); if unreachable, starting a history of our own would diverge from it. Wait.
            code, heads = self.probe("ls-remote", "--heads", remote, f"refs/heads/{remote_branch}")
            if code != 0 or heads.strip():
                shutil.rmtree(self.path / ".git")  # retried from scratch next time
                raise TransientError(
                    f"GitOps remote {remote} could not be read (branch {remote_branch}); not starting a new history",
                    delay=30,
                )
        readme = self.path / "README.md"
        readme.write_text(
            "# gpufleet desired state\n\n"
            "Written by gpufleet; do not edit by hand (the next reconcile restores what gpufleet wants).\n\n"
            "- `platform/`: cluster-wide objects (flavors, cohorts, node pools, baseline policies)\n"
            "- `tenants/<slug>/`: everything one tenant owns, one file per object\n"
        )
        self.run("add", "README.md")
        self.run("commit", "-q", "-m", "gpufleet: initialise desired-state repository")

    def probe(self, *args: str) -> tuple[int, str]:
        """Run git and return (exit code, stdout) without raising on a non-zero exit."""
        proc = subprocess.run(
            ["git", "-C", str(self.path), *args], capture_output=True, text=True, env=self.env, timeout=120
        )
        return proc.returncode, proc.stdout

    def git_dir(self) -> Path:
        """Where gpufleet keeps private bookkeeping (never part of the tracked tree)."""
        return self.path / ".git"

    def ref_exists(self, ref: str) -> bool:
        return bool(self.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False).strip())

    def read_blobs(self, shas: list[str]) -> dict[str, bytes]:
        """Contents of many blobs with one `git cat-file --batch` call."""
        if not shas:
            return {}
        try:
            proc = subprocess.run(
                ["git", "-C", str(self.path), "cat-file", "--batch"],
                input="".join(f"{sha}\n" for sha in shas).encode(),
                capture_output=True,
                env=self.env,
                timeout=120,
                check=True,
            )
        except subprocess.CalledProcessError as exc:
            raise PermanentError(f"git cat-file failed: {exc.stderr.decode(errors='replace')}") from exc
        out, blobs, pos = proc.stdout, {}, 0
        for sha in shas:
            header_end = out.index(b"\n", pos)
            _, kind, size = out[pos:header_end].decode().split(" ")
            if kind != "blob":
                raise PermanentError(f"git object {sha} is a {kind}, not a file")
            start = header_end + 1
            blobs[sha] = out[start : start + int(size)]
            pos = start + int(size) + 1  # content is followed by a newline
        return blobs

    def head(self) -> str:
        return self.run("rev-parse", "HEAD").strip()

    def ls_tree(self, rev: str, folder: str = "") -> dict[str, tuple[str, str]]:
        """Entries directly in `folder` ("" for the root) of `rev`: name -> (mode, object id). Reads
        tree objects only (not the index: at 140,000 files every index read costs tens of ms)."""
        out = self.run("ls-tree", "-z", rev, *(["--", f"{folder.rstrip('/')}/"] if folder else []))
        entries: dict[str, tuple[str, str]] = {}
        for entry in out.split("\0"):
            if entry:
                meta, _, path = entry.partition("\t")
                mode, _, sha = meta.split(" ", 2)
                entries[path.rsplit("/", 1)[-1]] = (mode, sha)
        return entries

    def commit_files(self, changes: Mapping[str, bytes | None], message: str, *,
                     new_folders: Collection[str] = ()) -> str | None:
        """Commit `changes` (repo path -> new bytes, None to delete) on top of main in one `git fast-import`,
        and have the index learn the same paths, so `git status` stays clean: a small change in the
        background, right after (`_drain_later`), a large one before returning. None if nothing changed.

        Cost follows the change, not the repository: no index is read to build the commit (`git commit`
        reads and rewrites all of it, ~17 MB at 10,000 tenants), and only the touched paths are
        re-indexed. Files staged by hand elsewhere stay staged; ignore rules cannot drop a path. The caller
        passes only real changes (fast-import would commit an unchanged tree).

        `new_folders`: folders main does not have (the caller looked): each whose changes are all additions
        of files directly in it goes in as ONE tree entry instead of one per file (`_stream`), the same
        commit. fast-import finds a path's place in a tree by a linear search of its entries, so 16 files
        into each of 250 new folders of a 10,000-entry `tenants/` tree was 4,000 searches of up to 10,000
        entries per chunk: most of a cold start's git CPU."""
        if not changes:
            return None
        stage = f"refs/gpufleet/stage-{os.getpid()}"
        stream = self._stream(changes, message, _whole_folders(changes, new_folders), stage)
        folder = self.git_dir() / "gpufleet"
        marks = folder / f"marks-{os.getpid()}"
        folder.mkdir(parents=True, exist_ok=True)
        paths = b"".join(path.encode() + b"\0" for path in sorted(changes))
        fast_import = ["-c", "fastimport.unpackLimit=1", "fast-import", "--quiet", "--done",
                       f"--export-marks={marks}"]
        if len(changes) <= DEFERRED_REINDEX_MAX_PATHS:
            # The list goes down before the commit: whatever happens after it (a crash, a killed drainer), the
            # next settle re-indexes these paths, so `git status` never keeps them "modified" (HEAD and the
            # work tree agree, so no apply would touch them).
            self._write_list(folder, paths)
            self._run_bytes(fast_import, stream)
            self._drain_later()
        else:
            # Not deferred, and not overlapped with fast-import: `update-index` stores every blob it does not
            # find yet -- fast-import's pack is not there until it ends -- as a loose object, one file each
            # (measured at 10,000 tenants: 47 overlapped re-indexes took 35 s of the cold pass; 3,500 new
            # paths take 0.46 s with their blobs missing, 0.04 s once packed).
            self._write_list(folder, paths)  # until the index has them (a crash here: the next settle)
            self._run_bytes(fast_import, stream)
            # With any list still pending (it waits for a drainer in flight), in one `update-index`.
            self._settle(["-c", f"splitIndex.maxPercentChange={BULK_SPLIT_PERCENT}"])
            self.index_settled = False
        exported = dict(line.split(" ", 1) for line in marks.read_text().splitlines())  # ":1 <commit>"
        head = exported[":1"].strip()
        marks.unlink(missing_ok=True)
        self._repack_if_needed(PACKS_HARD_LIMIT)
        return head

    # --- the index: gpufleet's stat cache of the work tree, for `git status` ------------------------------

    def _index_lock_path(self) -> str:
        # Beside the repository, like the backend's writer lock: never inside the tracked tree or .git.
        return str(self.path.parent / f".{self.path.name}.index-lock")

    def _open_index_lock(self) -> int:
        return os.open(self._index_lock_path(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    @contextmanager
    def index_locked(self) -> Iterator[None]:
        """Hold the index lock: no drainer (`_drain_later`) runs meanwhile, so a git command that reads or
        writes the index neither sees half of one nor fails on its `index.lock`. Nests within a thread."""
        held: dict[str, int] = _HELD.__dict__.setdefault("locks", {})
        key = self._index_lock_path()
        if held.get(key):
            held[key] += 1
            try:
                yield
            finally:
                held[key] -= 1
            return
        fd = self._open_index_lock()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held[key] = 1
            try:
                yield
            finally:
                del held[key]
        finally:
            os.close(fd)  # releases the flock

    def index_busy_with_ours(self) -> bool:
        """Does a gpufleet index user (a drainer, a settle, a status) hold the index lock right now? Then a
        `.git/index.lock` is its own, not a foreign git's."""
        if _HELD.__dict__.get("locks", {}).get(self._index_lock_path()):
            return True
        try:
            fd = self._open_index_lock()
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def _pending_lists(self) -> list[Path]:
        folder = self.git_dir() / "gpufleet"
        try:
            names = [e.name for e in os.scandir(folder) if e.name.startswith("reindex-")]
        except FileNotFoundError:
            return []
        return [folder / name for name in sorted(names)]

    def index_pending(self) -> bool:
        """Paths committed that the index has not learnt yet (a drainer's work, in flight or left over)."""
        return bool(self._pending_lists())

    def settle_index(self) -> None:
        """Bring the index up to the commits: wait for a drainer in flight, re-index what is still pending.
        A listing and nothing more when nothing is (the common case for every reader)."""
        if self._pending_lists():
            self._settle([])

    def _settle(self, options: list[str]) -> None:
        with self.index_locked():
            lists = self._pending_lists()
            if not lists:
                return  # the drainer we waited for did it
            self._run_bytes([*options, *INDEX_PATHS], b"".join(path.read_bytes() for path in lists))
            for path in lists:
                path.unlink(missing_ok=True)

    def reindex_later(self, paths: Collection[str]) -> None:
        """Have the index learn `paths` as they are on disk, in the background (a pending list + the drainer)."""
        if not paths:
            return
        folder = self.git_dir() / "gpufleet"
        folder.mkdir(parents=True, exist_ok=True)
        self._write_list(folder, b"".join(path.encode() + b"\0" for path in sorted(paths)))
        self._drain_later()

    @staticmethod
    def _write_list(folder: Path, paths: bytes) -> None:
        """A pending list (`reindex-*`), written whole and then renamed: a drainer never reads half of one."""
        reindex = folder / f"reindex-{os.getpid()}-{time.time_ns()}"
        tmp = folder / f".{reindex.name}.tmp"
        tmp.write_bytes(paths)
        os.replace(tmp, reindex)

    def _drain_later(self) -> None:
        """Start the drainer (`_DRAIN_SCRIPT`) and return at once: the commit is made, only git's stat cache
        lags, for as long as one `update-index` takes."""
        if _FLOCK is None:
            self.settle_index()
            return
        _DRAINERS[:] = [proc for proc in _DRAINERS if proc.poll() is None]
        try:
            drainer = subprocess.Popen(
                ["sh", "-c", _DRAIN_SCRIPT, "gpufleet-index-drain", self._index_lock_path(),
                 str(self.git_dir() / "gpufleet")],
                cwd=self.path, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True,
            )
        except OSError:
            self.settle_index()
            return
        _DRAINERS.append(drainer)

    def status(self, *args: str) -> str:
        """`git status <args>` of a settled index, under the index lock (no drainer starts meanwhile). If the
        index cannot be brought up to date (a read-only repository), status still answers: the paths not
        re-indexed show as changed, which is what a writer then finds and reports."""
        with ExitStack() as stack:
            try:
                stack.enter_context(self.index_locked())
                self.settle_index()
            except (OSError, PermanentError, TransientError) as exc:
                log.warning("gitops: could not bring the index of %s up to date: %s", self.path, exc)
            return self.run("status", *args)

    def _stream(self, changes: Mapping[str, bytes | None], message: str, whole: dict[str, dict[str, bytes]],
                stage: str) -> bytes:
        """fast-import's input: the commit on main (mark :1). The folders in `whole` are first written as
        the top-level folders of a throw-away root commit on `stage` (a tree of a few hundred entries:
        cheap searches), whose folder trees main's commit then takes by id -- `tree_sha` of the same
        files, so git has them -- and `stage` is deleted by the same stream."""
        name, email = self.env["GIT_COMMITTER_NAME"], self.env["GIT_COMMITTER_EMAIL"]
        when = f"{int(time.time())} +0000"
        author = f"author {self.env['GIT_AUTHOR_NAME']} <{self.env['GIT_AUTHOR_EMAIL']}> {when}\n".encode()
        committer = f"committer {name} <{email}> {when}\n".encode()
        text = message.encode()
        stream: list[bytes] = []
        if whole:
            stream += [f"commit {stage}\n".encode(), b"mark :2\n", committer, b"data 0\n"]
            for i, folder in enumerate(sorted(whole)):
                for leaf, data in sorted(whole[folder].items()):
                    stream += [f"M 100644 inline {i}/{leaf}\n".encode(), b"data %d\n" % len(data), data, b"\n"]
        stream += [
            b"commit refs/heads/main\n", b"mark :1\n", author, committer, b"data %d\n" % len(text), text, b"\n",
            # "^0": the branch's current commit (fast-import does not let a branch start from itself);
            # no `rev-parse` first. Under the backend's lock nothing else moves main meanwhile.
            b"from refs/heads/main^0\n",
        ]
        for folder in sorted(whole):
            stream.append(f"M 040000 {tree_sha(whole[folder])} {folder}\n".encode())
        for path in sorted(changes):
            if path.rpartition("/")[0] in whole:
                continue
            data = changes[path]
            if data is None:
                stream.append(f"D {path}\n".encode())
            else:
                stream += [f"M 100644 inline {path}\n".encode(), b"data %d\n" % len(data), data, b"\n"]
        if whole:
            stream.append(f"reset {stage}\nfrom {'0' * 40}\n\n".encode())
        stream.append(b"done\n")
        return b"".join(stream)

    def maintenance_due(self) -> bool:
        return not self.index_settled or self._packs() > PACKS_BEFORE_REPACK

    def maintain(self) -> None:
        """Off the event path (a fleet pass calls it): after large commits, write a new shared index if the
        split part outgrew the configured share (one rewrite, ~150 ms at 10,000 tenants), so the next small
        change rewrites a small file; and merge the small packs the commits since the last time left."""
        if not self.index_settled:
            with self.index_locked():
                self.settle_index()
                self._run_bytes(["update-index", "--split-index"], b"")
            self.index_settled = True
        self._repack_if_needed(PACKS_BEFORE_REPACK)

    def _packs(self) -> int:
        try:
            return sum(1 for entry in os.scandir(self.git_dir() / "objects" / "pack") if entry.name.endswith(".pack"))
        except FileNotFoundError:
            return 0

    def _repack_if_needed(self, limit: int) -> None:
        if self._packs() > limit:
            self.run("repack", "--geometric=2", "-d", "-q")

    def _run_bytes(self, args: list[str], data: bytes) -> bytes:
        try:
            proc = subprocess.run(
                ["git", "-C", str(self.path), *args], input=data, capture_output=True, env=self.env, timeout=120
            )
        except FileNotFoundError as exc:
            raise PermanentError("git is not installed on this machine") from exc
        except subprocess.TimeoutExpired as exc:
            raise TransientError(f"git {args[0]} timed out", delay=10) from exc
        if proc.returncode != 0:
            message = proc.stderr.decode(errors="replace").strip()
            if "index.lock" in message:
                raise TransientError(f"git {args[0]}: repository busy: {message}", delay=2)
            raise PermanentError(f"git {args[0]} failed: {message}")
        return proc.stdout

    def commit_paths(self, paths: list[str], message: str) -> str | None:
        """Stage exactly `paths` (additions, edits and deletions) and commit them; None if no change."""
        with self.index_locked():
            self.settle_index()
            return self._commit_paths(paths, message)

    def _commit_paths(self, paths: list[str], message: str) -> str | None:
        self.run("add", "-A", "--", *paths)
        staged = [p for p in self.run("diff", "--cached", "--name-only", "-z").split("\0") if p]
        ours = [p for p in staged if any(p == path or p.startswith(f"{path.rstrip('/')}/") for path in paths)]
        if not ours:
            return None
        if len(ours) == len(staged):
            # Only our paths are staged: a plain commit of the index. `commit -- <paths>` would build a
            # temporary index from HEAD first, several times slower on a repository of 10,000s of files.
            self.run("commit", "-q", "-m", message)
        else:  # someone staged other files by hand: leave them staged, commit only ours
            self.run("commit", "-q", "-m", message, "--", *paths)
        return self.head()
