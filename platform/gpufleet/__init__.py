"""gpufleet: the platform layer (settings, accounts, API, portal, audit).

Importing this package has no side effects: it loads neither Django nor Celery and sets no settings module
(the Terraform provider under gpufleet.terraform runs without Django). The Celery application is
gpufleet.celery (`celery -A gpufleet` finds it there); Django processes load it when their apps are ready
(gpufleet.outbox.apps), so every task they send goes through it.
"""
