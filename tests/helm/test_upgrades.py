"""Issue 16 §3: the migrate hook fits inside the guide's `helm upgrade --timeout` and cleans up after itself."""

from __future__ import annotations

import re
import shlex

from tests.support.services import REPO

from .chart import PRODUCTION_VALUES, containers, render


def guide_timeouts() -> list[int]:
    """Seconds of every `--timeout` in the operator guide's helm commands."""
    guide = (REPO / "docs" / "operator-guide.md").read_text()
    found = []
    for line in guide.replace("\\\n", " ").splitlines():
        if line.startswith("helm upgrade"):
            words = shlex.split(line)
            assert "--timeout" in words, f"the guide's helm command has no --timeout: {line}"
            value = words[words.index("--timeout") + 1]
            match = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", value)
            assert match, value
            found.append(int(match[1] or 0) * 60 + int(match[2] or 0))
    return found


def test_migrate_deadline_is_under_the_guides_helm_timeout_and_finished_jobs_expire() -> None:
    job = render(PRODUCTION_VALUES, upgrade=True, revision=7).get("Job", "gpufleet-migrate-7")
    deadline = job["spec"]["activeDeadlineSeconds"]
    timeouts = guide_timeouts()
    assert len(timeouts) >= 2 and all(deadline < timeout for timeout in timeouts), (deadline, timeouts)
    assert job["spec"]["ttlSecondsAfterFinished"] > 0
    args = containers(job)[0]["args"]
    lock_timeout = float(next(a for a in args if a.startswith("--lock-timeout=")).split("=", 1)[1])
    assert 0 < lock_timeout < deadline  # a waiting second Job fails by itself, before Kubernetes kills it


def test_the_image_is_an_explicit_reference_with_digest_support() -> None:
    import pytest

    from .chart import helm

    with pytest.raises(helm().HelmError) as caught:
        render(None, image=False)
    assert "image.repository is required" in str(caught.value)
    with pytest.raises(helm().HelmError):
        render({"image": {"repository": "gpufleet"}})  # no registry host: refused by the schema
    digest = "sha256:" + "ab" * 32
    rendered = render({"image": {"repository": "registry.example.com/platform/gpufleet", "digest": digest,
                                 "tag": "ignored"}})
    images = {c["image"] for o in rendered.objects if o["kind"] in ("Deployment", "Job")
              for c in containers(o)}
    assert images == {f"registry.example.com/platform/gpufleet@{digest}"}
