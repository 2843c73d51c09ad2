from django.apps import AppConfig


class OutboxConfig(AppConfig):
    name = "gpufleet.outbox"
    label = "outbox"
    verbose_name = "Task outbox"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Load the Celery application in every Django process (web, commands, worker): tasks declared with
        # @shared_task send through the current app, which must be gpufleet's (its broker, its routes), not
        # Celery's default. gpufleet/__init__ used to do this on import, which made importing any gpufleet
        # module load Django and Celery (the Terraform provider included); the outbox is the app that sends.
        import gpufleet.celery  # noqa: F401
