from .backend import GitOpsBackend

__all__ = ["GitOpsBackend"]
