"""Scheduling: GPU models, flavors, quotas, cohorts, queues, inference endpoints, node pools."""
