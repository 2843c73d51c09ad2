from django.apps import AppConfig


class TenantsConfig(AppConfig):
    name = "tenants"
    verbose_name = "Tenants"

    def ready(self) -> None:
        # Isolation's admin pages; what it adds to rendering is declared in tenants.contributions.
        from .isolation.register import register

        register()
