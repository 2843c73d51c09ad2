"""gpufleet demo: seed the demo fleet (idempotent)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandParser
from django.db import transaction

from gpufleet.accounts.roles import PLATFORM_ADMIN, set_platform_roles
from gpufleet.audit.context import acting
from gpufleet.command import GpufleetCommand
from gpufleet.core import registry
from tenants import actions
from tenants.models import Membership, Tenant

DEMO_PASSWORD = "gpufleet-demo"
DEMO_USERS = {
    "admin": {"roles": {PLATFORM_ADMIN, "billing-admin"}, "email": "admin@demo.gpufleet.local"},
    "alice": {"roles": set(), "email": "alice@demo.gpufleet.local"},
    "bob": {"roles": set(), "email": "bob@demo.gpufleet.local"},
}
DEMO_TENANTS = [
    # slug, display name, trust level, owner, approved?
    ("vision", "Vision research", "trusted", "alice", True),
    ("nlp-inference", "NLP inference", "standard", "alice", True),
    ("contractors", "External contractors", "untrusted", "bob", True),
    ("speech", "Speech team", "standard", "bob", False),
]


class Command(GpufleetCommand):
    help = "Seed demo users and tenants; running it again changes nothing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000",
                            help="where the portal is served (only for the sign-in hint printed)")

    def handle(self, *args: object, url: str = "http://127.0.0.1:8000", **opts: object) -> None:
        User = get_user_model()
        with acting(task="cli:demo"):
            with transaction.atomic():
                users = {}
                for name, spec in DEMO_USERS.items():
                    user, created = User.objects.get_or_create(username=name, defaults={"email": spec["email"]})
                    if created:
                        user.set_password(DEMO_PASSWORD)
                        user.save()
                    set_platform_roles(user, spec["roles"])
                    users[name] = user
            tenants = {}
            for slug, display_name, trust, owner, approved in DEMO_TENANTS:
                tenant = Tenant.objects.filter(slug=slug).first()
                if tenant is None:
                    tenant = actions.request_tenant(slug, trust, display_name, requested_by=users[owner])
                if not Membership.objects.filter(tenant=tenant, user=users[owner]).exists():
                    actions.add_member(tenant, users[owner], "owner")
                if approved and tenant.phase == "requested":
                    actions.approve(tenant)
                tenants[slug] = tenant
            # The other apps' parts of the demo fleet (catalog, quotas, prices): the `demo_seeder` contributions.
            for seed in registry.functions("demo_seeder"):
                seed(users, tenants)
        self.stdout.write(
            f"Demo data ready. Sign in at {url.rstrip('/')}/login/ as "
            f"admin / {DEMO_PASSWORD} (platform admin) or alice / {DEMO_PASSWORD} (tenant owner)."
        )
