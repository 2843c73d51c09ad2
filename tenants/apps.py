from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = "Tenants"

    def ready(self) -> None:
        # Isolation (GPU modes, Kyverno, Cilium, vCluster OIDC/RBAC) registers its render sections/hooks.
        from .isolation.register import register

        register()
