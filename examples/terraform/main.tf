# From a token to a tenant with a quota and an inference endpoint in one `terraform apply`.
# See docs/terraform.md: install the provider (pip install from a gpufleet checkout), point a CLI config's dev_overrides at
# the virtualenv's bin/, export GPUFLEET_ENDPOINT and GPUFLEET_TOKEN (a platform admin's token), then apply.

terraform {
  required_providers {
    gpufleet = {
      source = "gpufleet/gpufleet"
    }
  }
}

provider "gpufleet" {
  # endpoint = "https://gpufleet.example.com"   # or GPUFLEET_ENDPOINT
  # token    = var.gpufleet_token               # or GPUFLEET_TOKEN
  timeout       = 30 # seconds per HTTP request
  retry_timeout = 60 # seconds to keep retrying 409/429/503
}

variable "slug" {
  type = string
  # Not one of the demo's tenants (vision, nlp-inference, ...): applying against `make demo` creates a new one.
  default = "tf-example"
}

variable "gpus" {
  type    = number
  default = 2
}

# The catalog: pick the first whole-GPU flavor.
data "gpufleet_flavors" "whole" {
  mode = "whole"
}

resource "gpufleet_tenant" "team" {
  slug         = var.slug
  display_name = "Terraform example"
  trust_level  = "standard"
  approve      = true # needs a platform-admin token; otherwise the tenant waits for approval
  timeout      = 600  # seconds to wait for ready (and for teardown on destroy)
}

resource "gpufleet_quota" "gpus" {
  tenant          = gpufleet_tenant.team.slug
  flavor          = data.gpufleet_flavors.whole.flavors[0].name
  nominal         = var.gpus
  borrowing_limit = 2
}

resource "gpufleet_inference_endpoint" "chat" {
  tenant = gpufleet_tenant.team.slug
  name   = "chat"
  model  = "meta-llama/Llama-3.1-8B-Instruct"
  tier   = "standard" # scales to zero; pre-warmed before business hours
}

resource "gpufleet_api_token" "ci" {
  name       = "${var.slug}-ci"
  expires_at = "2099-01-01T00:00:00Z"
}

data "gpufleet_kubeconfig" "team" {
  tenant = gpufleet_tenant.team.slug
}

output "namespace" {
  value = gpufleet_tenant.team.namespace
}

output "kubeconfig" {
  value = data.gpufleet_kubeconfig.team.kubeconfig
}

output "ci_token" {
  value     = gpufleet_api_token.ci.token
  sensitive = true
}
