"""A separate process that takes `tenant_lock(key)`, says "held", and keeps it until stdin says "release".

Run by tests/tenants/test_locks.py with DATABASE_URL pointing at the test database and its own
PYTHONHASHSEED, as a second worker or the CLI would be.
"""

from __future__ import annotations

import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufleet.settings.test")
django.setup()

from tenants.locks import tenant_lock  # noqa: E402  (needs Django set up)

key = int(sys.argv[1])
print("waiting", flush=True)
with tenant_lock(key):
    print("held", flush=True)
    sys.stdin.readline()
print("released", flush=True)
