"""Time is injected: product code reads `gpufleet.clock`, tests pin it, and the date logic holds on any date.

The last test is the proof the reliability issue asks for: the billing-period, invoice, price and token-expiry
tests run again in a subprocess whose whole process clock is moved by `faketime` to 2027-02-01 and to
2030-06-15. (Whole-suite faketime is not a fair check: git, Go binaries such as VictoriaMetrics and socket
timeouts misbehave under it, so only the files whose subject is date logic run there.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.utils import timezone

from gpufleet import clock
from gpufleet.accounts.models import ApiToken
from tests.support import factories
from tests.support.clock import MID_NOVEMBER_2026, pinned
from tests.support.services import REPO, need_binary
from tests.tenants.test_tokens import factories_client

# The tests whose subject is a date rule: billing periods ("has not ended", "is in the future"), invoice
# numbering per year and finalizing, price effective dates, and API-token expiry.
DATE_LOGIC = [
    "tests/billing/test_money.py",
    "tests/billing/test_cli_exports.py",
    "tests/billing/test_api_pages.py",
    "tests/billing/test_prices_idle_tasks.py",
    "tests/portal/test_tokens.py",
    "tests/test_clock.py::test_token_expiry_follows_the_clock",
    "tests/test_clock.py::test_pinned_clock_moves_the_product_clock",
]


def test_pinned_clock_moves_the_product_clock():
    with pinned(datetime(2031, 2, 28, 23, 30, tzinfo=UTC)) as at:
        assert abs(clock.now() - at) < timedelta(seconds=5)
        assert abs(timezone.now() - at) < timedelta(seconds=5)
        assert clock.today().isoformat() == "2031-02-28" and clock.this_month().isoformat() == "2031-02-01"
        assert clock.now().tzinfo is not None
    with pytest.raises(ValueError, match="UTC-aware"):
        with pinned(datetime(2031, 1, 1)):
            pass


@pytest.mark.django_db
def test_token_expiry_follows_the_clock(api):
    alice = factories.user("alice")
    api.force_authenticate(alice)
    with time_machine.travel(MID_NOVEMBER_2026, tick=False) as traveller:
        past = (clock.now() - timedelta(minutes=1)).isoformat()
        refused = api.post("/api/v1/tokens/", {"name": "old", "expires_at": past}, format="json")
        assert refused.status_code == 400
        assert refused.json()["errors"] == [{"field": "expires_at", "reason": "must be in the future"}]
        tomorrow = (clock.now() + timedelta(days=1)).isoformat()
        secret = api.post("/api/v1/tokens/", {"name": "ci", "expires_at": tomorrow}, format="json").json()["token"]
        bearer = factories_client(secret)
        assert bearer.get("/api/v1/tenants/").status_code == 200 and ApiToken.objects.active().count() == 1
        traveller.shift(timedelta(days=1, seconds=1))  # one second past its expiry
        assert bearer.get("/api/v1/tenants/").status_code == 401
        assert ApiToken.objects.active().count() == 0 and not ApiToken.objects.get().is_active


@pytest.mark.service
@pytest.mark.parametrize("moved_to", ["2027-02-01 00:00:00", "2030-06-15 12:00:00"])
def test_date_logic_passes_with_the_process_clock_moved(moved_to):
    faketime = need_binary("faketime")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
           # Its own test database, so this run never drops the outer run's one.
           "GPUFLEET_TEST_DB_NAME": f"test_gpufleet_clock_{moved_to[:4]}_{os.getpid()}"}
    result = subprocess.run(
        [faketime, "-f", f"@{moved_to}", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-o", "addopts=", *DATE_LOGIC],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert f"{moved_to[:4]}" in subprocess.run([faketime, "-f", f"@{moved_to}", "date", "-u", "+%Y"],
                                               capture_output=True, text=True).stdout  # the clock really moved
