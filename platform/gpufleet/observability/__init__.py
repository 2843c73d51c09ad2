"""The platform's own observability: Prometheus metrics (`/metrics`) and JSON logs."""
