"""Kubernetes backend: server-side apply through the official client, prune by owner label."""

from .backend import KubernetesBackend

__all__ = ["KubernetesBackend"]
