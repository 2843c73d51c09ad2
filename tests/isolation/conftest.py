"""The kubeconfig sign-in test uses the real OIDC provider from tests/support/oidc.py."""

from tests.support.oidc import oidc_provider, oidc_settings  # noqa: F401  (fixtures)
