from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "gpufleet.accounts"
    label = "accounts"
    verbose_name = "Accounts and API tokens"
