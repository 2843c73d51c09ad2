"""The first-party Terraform provider (source address `gpufleet/gpufleet`), written with PyPI `tf`.

It is an HTTP client of the REST API (`/api/v1/`) and imports no Django: `terraform-provider-gpufleet`
runs on an operator's laptop or CI runner, next to nothing but an endpoint and a token.
"""
