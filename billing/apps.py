from django.apps import AppConfig


class BillingConfig(AppConfig):
    """The demo's prices and usage seeder is declared in billing.contributions."""

    name = "billing"
    verbose_name = "Billing"
