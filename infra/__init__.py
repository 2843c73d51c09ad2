"""Adapters: all I/O to the outside world. Nothing here imports Django or the apps (import-linter)."""
