from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "gpufleet.accounts"
    label = "accounts"
    verbose_name = "Accounts and API tokens"
    # The API token's OpenAPI bearer scheme is registered by gpufleet.api (api/schema.py).
