"""Tenant isolation: GPU allocation modes by trust level, vCluster OIDC/RBAC, Kyverno, Cilium, kubeconfig.

`policy.allowed_modes(tenant)` is the one answer to "which GPU allocation modes may this tenant use"
(the scheduling app uses it for ClusterQueue coverage; the Kyverno policy rendered here enforces it).
"""
