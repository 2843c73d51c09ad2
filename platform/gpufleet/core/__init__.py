"""The platform's core: what every app builds on and nothing in it imports an app.

The bottom layer of the import-linter `layers` contract (pyproject.toml): the contributor registry,
the sharing-mode registry, the typed settings and the shared error types live here, so `tenants`,
`scheduling` and `billing` meet in one place instead of importing each other.
"""
