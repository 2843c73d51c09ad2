from django.apps import AppConfig


class OutboxConfig(AppConfig):
    name = "gpufleet.outbox"
    label = "outbox"
    verbose_name = "Task outbox"
    default_auto_field = "django.db.models.BigAutoField"
