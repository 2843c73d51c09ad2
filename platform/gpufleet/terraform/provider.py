"""The provider: configuration and the entry point of `terraform-provider-gpufleet`.

Protocol and framework: PyPI `tf` 1.2.0 (Terraform plugin protocol 6; hfern/tf `docs/usage.md`). Terraform
loads it through a CLI config's `dev_overrides` block pointing at the virtualenv's `bin/` (docs/terraform.md).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from tf import runner
from tf.iface import DataSource, Resource
from tf.schema import Attribute, Schema
from tf.types import Number, String, Unknown

from .client import Client
from .clusters import Cluster, Placement
from .data_sources import Flavors, Kubeconfig, TenantData, Usage
from .scheduling import InferenceEndpoint, Quota
from .tenants import Tenant, TenantMember
from .tokens import ApiToken

SOURCE_ADDRESS = "registry.terraform.io/gpufleet/gpufleet"


class GpufleetProvider:
    def __init__(self) -> None:
        self.client: Client | None = None

    def get_model_prefix(self) -> str:
        return "gpufleet_"

    def full_name(self) -> str:
        return SOURCE_ADDRESS

    def get_provider_schema(self, diags: Any) -> Schema:
        return Schema(version=0, attributes=[
            Attribute("endpoint", String(), optional=True,
                      description="Base URL of gpufleet, e.g. https://gpufleet.example.com (or GPUFLEET_ENDPOINT)"),
            Attribute("token", String(), optional=True, sensitive=True,
                      description="API token `gpf_…` (or GPUFLEET_TOKEN)"),
            Attribute("timeout", Number(), optional=True, description="Seconds per HTTP request (default 30)"),
            Attribute("retry_timeout", Number(), optional=True,
                      description="Seconds to keep retrying 409/429/503 and connection errors (default 60)"),
            Attribute("ca_bundle", String(), optional=True, description="PEM file of CAs to trust for the endpoint"),
        ])

    def validate_config(self, diags: Any, config: dict[str, Any]) -> None:
        for key in ("timeout", "retry_timeout"):
            value = config.get(key)
            if value not in (None, Unknown) and value <= 0:
                diags.add_error(f"{key} must be a positive number of seconds", path=[key])

    def configure_provider(self, diags: Any, config: dict[str, Any]) -> None:
        def setting(key: str, env: str | None = None) -> Any:
            value = config.get(key)
            if value in (None, Unknown) and env:
                value = os.environ.get(env) or None
            return None if value is Unknown else value

        endpoint, token = setting("endpoint", "GPUFLEET_ENDPOINT"), setting("token", "GPUFLEET_TOKEN")
        if not endpoint:
            diags.add_error("endpoint is not set", "Set endpoint in the provider block or GPUFLEET_ENDPOINT.",
                            path=["endpoint"])
        if not token:
            diags.add_error("token is not set", "Set token in the provider block or GPUFLEET_TOKEN.", path=["token"])
        if endpoint and token:
            self.client = Client(endpoint=endpoint, token=token, timeout=float(setting("timeout") or 30),
                                 ca_bundle=setting("ca_bundle"), retry_budget=float(setting("retry_timeout") or 60))

    def get_data_sources(self) -> list[type[DataSource]]:
        return [Flavors, TenantData, Kubeconfig, Usage]

    def get_resources(self) -> list[type[Resource]]:
        return [Tenant, TenantMember, Quota, InferenceEndpoint, ApiToken, Cluster, Placement]

    def get_functions(self) -> list[Any]:
        return []

    def new_resource(self, klass: type[Resource]) -> Resource:
        return klass(self)  # type: ignore[call-arg]

    def new_data_source(self, klass: type[DataSource]) -> DataSource:
        return klass(self)  # type: ignore[call-arg]

    def new_function(self, klass: Any) -> Any:
        return klass(self)


def main() -> None:
    runner.run_provider(GpufleetProvider(), sys.argv)
