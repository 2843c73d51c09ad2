"""Inference endpoints: SLA tiers and endpoints (models), their serving, scrape and autoscaling objects (render)."""
