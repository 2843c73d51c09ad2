"""Billing: measured GPU-seconds, prices, invoices, OpenCost reconciliation, finance exports."""
