from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Billing"

    def ready(self) -> None:
        from . import demo  # noqa: F401  (registers the demo's prices and usage seeder)
