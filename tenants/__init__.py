"""Tenants: who shares the fleet, their trust level and lifecycle, and what each one owns."""
