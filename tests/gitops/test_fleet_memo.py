"""The fleet pass remembers renders by their inputs and checks the repository by tree id: every input
change, and every hand edit in the repository, must still be found (benchmarks/reconcile.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.gitops import GitOpsBackend
from scheduling.models import Quota
from tenants import fleet
from tenants.models import Phase, Tenant
from tenants.tasks import reconcile_all
from tests.support.services import need_binary, need_reference

from .helpers import commits, git, status
from .helpers import renders as _renders
from .test_fleet import catalog, ready_tenants  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def warm(catalog, gitops_repo: Path):  # noqa: F811
    """Two tenants with quotas, applied, and a second pass that found nothing to do (memo filled)."""
    need_binary("git")
    need_reference()
    fleet.forget_renders()
    tenants = ready_tenants(2)
    for tenant in tenants:
        Quota.objects.create(tenant=tenant, flavor=catalog["whole"], nominal=1, borrowing_limit=0, lending_limit=0)
    reconcile_all()
    head = git(gitops_repo, "rev-parse", "HEAD")
    reconcile_all()
    assert git(gitops_repo, "rev-parse", "HEAD") == head
    assert len(fleet._KNOWN) == 2
    return tenants


def test_a_warm_noop_pass_renders_nothing_and_reads_no_file(warm, gitops_repo: Path, monkeypatch) -> None:
    calls = _renders(monkeypatch)
    reads: list[str] = []
    files = GitOpsBackend._files
    monkeypatch.setattr(GitOpsBackend, "_files", lambda self, folder: reads.append(str(folder)) or files(self, folder))
    head = git(gitops_repo, "rev-parse", "HEAD")
    assert reconcile_all() == 2
    assert calls == [] and [r for r in reads if "/tenants/" in r] == []  # the platform is applied as ever
    assert git(gitops_repo, "rev-parse", "HEAD") == head


def test_a_quota_changed_behind_the_event_path_is_found(warm, gitops_repo: Path, monkeypatch) -> None:
    # No event, no generation bump: only the level-triggered pass can notice (its inputs changed).
    Quota.objects.filter(tenant=warm[0]).update(nominal=7)
    calls = _renders(monkeypatch)
    before = commits(gitops_repo)
    reconcile_all()
    assert calls == [warm[0].slug]  # the other tenant's inputs are unchanged: remembered
    assert commits(gitops_repo) == before + 1
    changed = git(gitops_repo, "show", "--name-only", "--format=", "HEAD").split()
    assert changed and all(path.startswith(f"clusters/default/tenants/{warm[0].slug}/") for path in changed)
    assert status(gitops_repo) == ""


def test_a_platform_wide_input_change_is_found(warm, gitops_repo: Path, settings) -> None:
    settings.GPUFLEET_VCLUSTER_CHART_VERSION = "0.99.0"
    reconcile_all()
    for tenant in warm:
        release = (f"clusters/default/tenants/{tenant.slug}/"
                   f"helmrelease.helm.toolkit.fluxcd.io_tenant-{tenant.slug}_vcluster.yaml")
        assert "0.99.0" in (gitops_repo / release).read_text()
    assert status(gitops_repo) == ""


@pytest.mark.parametrize("committed", [False, True])
def test_a_hand_edit_is_drift_whatever_the_memo_says(warm, gitops_repo: Path, committed: bool) -> None:
    target = sorted((gitops_repo / f"clusters/default/tenants/{warm[1].slug}").glob("resourcequota*.yaml"))[0]
    original = target.read_text()
    target.write_text(original.replace("pods: '500'", "pods: '5000'"))
    assert target.read_text() != original
    if committed:  # someone committed it: the work tree is clean, HEAD's tree id is not ours
        git(gitops_repo, "commit", "-qam", "hand edit")
        assert status(gitops_repo) == ""
    head = git(gitops_repo, "rev-parse", "HEAD")
    reconcile_all()
    assert target.read_text() == original
    assert status(gitops_repo) == ""
    if committed:
        assert "repair drift" in git(gitops_repo, "log", "-1", "--format=%s")
    else:  # restoring HEAD's bytes is all the repair: nothing to commit
        assert git(gitops_repo, "rev-parse", "HEAD") == head


def test_an_added_file_and_an_edited_drift_record_are_found(warm, gitops_repo: Path) -> None:
    folder = gitops_repo / f"clusters/default/tenants/{warm[0].slug}"
    (folder / "configmap.core_tenant-x_extra.yaml").write_text("kind: ConfigMap\n")
    record = gitops_repo / ".git/gpufleet/written" / f"clusters__default__tenants__{warm[1].slug}.json"
    record.write_text("{}")
    reconcile_all()
    assert not (folder / "configmap.core_tenant-x_extra.yaml").exists()
    assert record.read_text() != "{}"
    assert status(gitops_repo) == ""
    assert Tenant.objects.filter(phase=Phase.READY).count() == 2


def test_token_matches_only_the_committed_state(warm, gitops_repo: Path) -> None:
    backend = GitOpsBackend(gitops_repo)
    known = next(iter(fleet._KNOWN.values()))
    [(owner, token)] = known.token  # one placement: cluster default
    owners = [f"clusters/default/tenant:{t.slug}" for t in warm]
    assert owner in owners
    assert sum(backend.token_in_sync(owner, token) for owner in owners) == 1
    assert backend.token_in_sync(owners[0], ("0" * 40, b"")) is False


def test_tokens_in_sync_in_bulk_answers_as_one_by_one(warm, gitops_repo: Path, monkeypatch) -> None:
    backend = GitOpsBackend(gitops_repo)
    tokens = {owner: token for known in fleet._KNOWN.values() for owner, token in known.token}
    owners = sorted(tokens)
    checks = [(owner, tokens[owner]) for owner in owners] + [(owners[0], tokens[owners[1]])]  # a wrong pair
    assert backend.tokens_in_sync(checks) == [True, True, False]
    # A hand edit in one folder: the bulk check sees it like the single one.
    folder = gitops_repo / "clusters/default/tenants" / owners[1].rsplit(":", 1)[1]
    target = sorted(folder.glob("resourcequota*.yaml"))[0]
    target.write_text(target.read_text() + "# edited\n")
    fresh = GitOpsBackend(gitops_repo)
    assert fresh.tokens_in_sync(checks) == [fresh.token_in_sync(o, t) for o, t in checks] == [True, False, False]
    # HEAD moving during the bulk check: every pair is asked again against the new state.
    target.write_text(target.read_text().replace("# edited\n", ""))
    moved = GitOpsBackend(gitops_repo)
    owner_in_sync = GitOpsBackend._owner_in_sync
    calls: list[str] = []

    def commit_meanwhile(self, own, token, fingerprint, dirty):  # type: ignore[no-untyped-def]
        if not calls:
            (gitops_repo / "NOTES.md").write_text("operator notes\n")
            git(gitops_repo, "add", "NOTES.md")
            git(gitops_repo, "commit", "-qm", "notes")
        calls.append(own.path)
        return owner_in_sync(self, own, token, fingerprint, dirty)

    monkeypatch.setattr(GitOpsBackend, "_owner_in_sync", commit_meanwhile)
    assert moved.tokens_in_sync(checks) == [True, True, False]
    assert len(calls) == 2 * len(checks)  # the bulk answers, then each pair again


def test_the_cycle_collector_is_paused_only_while_the_fleet_is_checked(warm, monkeypatch) -> None:
    import gc

    seen: list[bool] = []
    in_sync = fleet._in_sync
    monkeypatch.setattr(fleet, "_in_sync", lambda *args: seen.append(gc.isenabled()) or in_sync(*args))
    assert gc.isenabled()
    reconcile_all()
    assert seen == [False] and gc.isenabled()

    def fails(*args):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")

    monkeypatch.setattr(fleet, "_in_sync", fails)
    with pytest.raises(RuntimeError):
        fleet.reconcile_fleet()
    assert gc.isenabled()  # re-enabled whatever happened
