"""Writes from the portal go through the actions: bad input shows field errors and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from gpufleet.audit.models import AuditEvent
from infra.gitops.git import Git
from tenants.models import Membership, Phase, Tenant
from tests.support import factories

pytestmark = pytest.mark.django_db


def field_errors(page: str, field: str) -> str:
    """The text of the error list rendered next to `field` ('' when there is none)."""
    marker = f'data-field="{field}">'
    if marker not in page:
        return ""
    return page.split(marker, 1)[1].split("</ul>", 1)[0]


@pytest.mark.parametrize(
    ("data", "field", "reason"),
    [
        ({"slug": "Acme", "trust_level": "standard"}, "slug", "lowercase"),
        ({"slug": "ab", "trust_level": "standard"}, "slug", "3"),
        ({"slug": "a" * 41, "trust_level": "standard"}, "slug", "40"),
        ({"slug": "-acme", "trust_level": "standard"}, "slug", ""),
        ({"slug": "tenant-x", "trust_level": "standard"}, "slug", "tenant-"),
        ({"slug": "acmé", "trust_level": "standard"}, "slug", ""),
        ({"slug": "", "trust_level": "standard"}, "slug", ""),
        ({"slug": "good-one", "trust_level": "root"}, "trust_level", "must be one of"),
        ({"slug": "good-one", "trust_level": ""}, "trust_level", "is required"),
        ({"slug": "good-one", "trust_level": "standard", "display_name": "x\ny"}, "display_name", "single line"),
    ],
)
def test_request_with_bad_input_shows_field_error_and_creates_nothing(alice_client, data, field, reason) -> None:
    events = AuditEvent.objects.count()
    response = alice_client.post(reverse("portal:tenant-request"), data)
    assert response.status_code == 400
    errors = field_errors(response.content.decode(), field)
    assert errors, f"no error shown next to {field}"
    assert reason in errors
    assert Tenant.objects.count() == 0
    assert Membership.objects.count() == 0
    assert AuditEvent.objects.count() == events
    # What the user typed is kept so they can fix it.
    if data["slug"]:
        assert f'value="{data["slug"]}"' in response.content.decode()


def test_duplicate_slug_is_refused_next_to_the_field(alice_client, bob) -> None:
    factories.tenant("taken", "standard", owner=bob)
    response = alice_client.post(reverse("portal:tenant-request"), {"slug": "taken", "trust_level": "standard"})
    assert response.status_code == 400
    assert "already taken" in field_errors(response.content.decode(), "slug")
    assert Tenant.objects.count() == 1


def test_request_creates_tenant_owned_by_requester(alice_client, alice, django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        response = alice_client.post(
            reverse("portal:tenant-request"),
            {"slug": "vision-lab", "trust_level": "standard", "display_name": "Vision lab"},
        )
    assert response.status_code == 302
    assert response["Location"] == reverse("portal:tenant-detail", args=["vision-lab"])
    tenant = Tenant.objects.get(slug="vision-lab")
    assert tenant.phase == Phase.REQUESTED and tenant.display_name == "Vision lab"
    assert Membership.objects.get(tenant=tenant).user == alice
    assert callbacks == [], "a request waits for approval: nothing is reconciled yet"
    event = AuditEvent.objects.get(action="tenant.request")
    assert event.actor_user == alice, "the audit event names the portal user"


def test_approve_from_portal_reconciles_to_ready_with_files_in_gitops(
    admin_client_, acme, eager_tasks, gitops_repo: Path, django_capture_on_commit_callbacks
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = admin_client_.post(
            reverse("portal:tenant-approve", args=["acme"]), {"next": reverse("portal:approvals")}
        )
    assert response.status_code == 302 and response["Location"] == reverse("portal:approvals")
    assert len(callbacks) == 1, "approve enqueues exactly one reconcile on commit"
    acme.refresh_from_db()
    assert acme.phase == Phase.READY
    assert acme.observed_generation == acme.generation
    files = sorted(p.name for p in (gitops_repo / "clusters/default/tenants" / "acme").iterdir())
    assert "namespace.core_tenant-acme.yaml" in files
    log = Git(gitops_repo).run("log", "--format=%s")
    assert "tenant acme: reconcile generation 1" in log
    page = admin_client_.get(reverse("portal:tenant-detail", args=["acme"])).content.decode()
    assert ">ready<" in page and "Your latest change is live" in page


def test_approve_twice_is_harmless(admin_client_, acme, django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        admin_client_.post(reverse("portal:tenant-approve", args=["acme"]))
        admin_client_.post(reverse("portal:tenant-approve", args=["acme"]))
    assert len(callbacks) == 1
    assert AuditEvent.objects.filter(action="tenant.approve").count() == 1


def test_reject_with_reason(admin_client_, acme) -> None:
    response = admin_client_.post(
        reverse("portal:tenant-reject", args=["acme"]), {"reason": "use the shared research tenant"}, follow=True
    )
    acme.refresh_from_db()
    assert acme.phase == Phase.REJECTED
    page = response.content.decode()
    assert "rejected" in page and "use the shared research tenant" in page


def test_suspend_resume_and_trust_level(admin_client_, alice, django_capture_on_commit_callbacks) -> None:
    tenant = factories.tenant("lab", "standard", owner=alice, phase=Phase.READY)
    with django_capture_on_commit_callbacks() as callbacks:
        admin_client_.post(reverse("portal:tenant-suspend", args=["lab"]))
        tenant.refresh_from_db()
        assert tenant.phase == Phase.SUSPENDED
        admin_client_.post(reverse("portal:tenant-resume", args=["lab"]))
        tenant.refresh_from_db()
        assert tenant.phase == Phase.APPROVED
        admin_client_.post(reverse("portal:tenant-trust-level", args=["lab"]), {"trust_level": "trusted"})
    tenant.refresh_from_db()
    assert tenant.trust_level == "trusted"
    assert len(callbacks) == 3, "each change enqueues a reconcile"


def test_bad_trust_level_changes_nothing_and_says_why(admin_client_, alice) -> None:
    tenant = factories.tenant("lab", "standard", owner=alice, phase=Phase.READY)
    for value in ("", "root"):
        page = admin_client_.post(
            reverse("portal:tenant-trust-level", args=["lab"]), {"trust_level": value}, follow=True
        ).content.decode()
        assert "trust level:" in page
    tenant.refresh_from_db()
    assert tenant.trust_level == "standard" and tenant.generation == 1


def test_conflict_is_a_message_not_an_error_page(admin_client_, alice) -> None:
    factories.tenant("gone", "standard", owner=alice, phase=Phase.DELETED)
    response = admin_client_.post(reverse("portal:tenant-approve", args=["gone"]), follow=True)
    assert response.status_code == 200
    assert "cannot be approved" in response.content.decode()


def test_owner_renames(alice_client, acme) -> None:
    alice_client.post(reverse("portal:tenant-rename", args=["acme"]), {"display_name": "Acme research"})
    acme.refresh_from_db()
    assert acme.display_name == "Acme research" and acme.generation == 2


def test_blank_display_name_is_refused(alice_client, acme) -> None:
    page = alice_client.post(
        reverse("portal:tenant-rename", args=["acme"]), {"display_name": "  "}, follow=True
    ).content.decode()
    assert "display name: is required" in page
    acme.refresh_from_db()
    assert acme.display_name == "acme team" and acme.generation == 1


def test_delete_needs_the_slug_typed(alice_client, acme) -> None:
    page = alice_client.get(reverse("portal:tenant-delete", args=["acme"])).content.decode()
    assert "Type the tenant" in page
    response = alice_client.post(reverse("portal:tenant-delete", args=["acme"]), {"confirm": "acm"})
    assert response.status_code == 400
    assert "to confirm" in field_errors(response.content.decode(), "confirm")
    acme.refresh_from_db()
    assert acme.phase == Phase.REQUESTED

    response = alice_client.post(reverse("portal:tenant-delete", args=["acme"]), {"confirm": "acme"})
    assert response.status_code == 302
    acme.refresh_from_db()
    assert acme.phase == Phase.DELETED  # never provisioned, so nothing to prune


def test_owner_deletes_live_tenant_and_its_files_are_pruned(
    alice_client, acme, eager_tasks, gitops_repo: Path, django_capture_on_commit_callbacks
) -> None:
    from tenants import actions, reconcile

    actions.approve(acme)
    reconcile.reconcile_tenant(acme.pk)
    assert (gitops_repo / "clusters/default/tenants" / "acme").is_dir()
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("portal:tenant-delete", args=["acme"]), {"confirm": "acme"})
    assert response.status_code == 302
    acme.refresh_from_db()
    assert acme.phase == Phase.DELETED
    folder = gitops_repo / "clusters/default/tenants" / "acme"
    assert not folder.exists() or not any(folder.iterdir())
    page = alice_client.get(reverse("portal:tenant-detail", args=["acme"])).content.decode()
    assert "was deleted" in page
    assert reverse("portal:tenant-delete", args=["acme"]) not in page, "nothing left to delete"
