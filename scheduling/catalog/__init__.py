"""The GPU catalog: GPU models and flavors (models), resource names and weights (rules), the revision token
that invalidates the per-process catalog cache (revision) and the demo fleet's catalog (demo)."""
