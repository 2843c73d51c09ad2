from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "gpufleet.accounts"
    label = "accounts"
    verbose_name = "Accounts and API tokens"

    def ready(self) -> None:
        from . import schema  # noqa: F401  (registers the API token scheme with drf-spectacular)
