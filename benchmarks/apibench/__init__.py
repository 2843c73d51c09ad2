"""Support modules of benchmarks/api.py (a package, so `make bench` does not run them as benchmarks)."""
