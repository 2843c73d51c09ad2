"""GPU node health: classify nodes from DCGM health fields and node conditions, remediate safely.

Pure parts: `rules` (the tunable classification table and its validation), `classify` (signals ->
state), `planning` (states + limits -> what remediation would do now). I/O: `signals` (the TSDB),
`infra.kube.nodes` (the Kubernetes API), `remediation` (runs a plan: cordon, evict, delete NodeClaim,
with every step audited with its evidence). docs/operations.md describes states, thresholds and limits.
"""
