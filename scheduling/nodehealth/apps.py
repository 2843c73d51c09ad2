"""Node health: classification, remediation state and its audit trail (own label, own migrations)."""

from django.apps import AppConfig


class NodeHealthConfig(AppConfig):
    name = "scheduling.nodehealth"
    label = "nodehealth"
    verbose_name = "GPU node health"
    default_auto_field = "django.db.models.BigAutoField"
