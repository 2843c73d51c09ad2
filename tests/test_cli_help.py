"""The CLI as a person meets it (issue 28): help lists gpufleet's options (not Django's), every option says
what it is for, a mistyped option gets the nearest real one, irreversible or surprising writes ask first
(or want --yes), and `serve` on a busy port says how to pick another."""

from __future__ import annotations

import argparse
import io
import socket
from contextlib import redirect_stderr

import pytest
from django.core.management import call_command, get_commands, load_command_class
from django.core.management.base import CommandError

from billing.models import Invoice, Price
from gpufleet.cli import own_commands
from gpufleet.command import DJANGO_OPTIONS, GpufleetCommand, parsers
from tests.support import factories


def _parser(name: str) -> argparse.ArgumentParser:
    return load_command_class(get_commands()[name], name).create_parser("gpufleet", name)


def _help(parser: argparse.ArgumentParser) -> str:
    return parser.format_help()


def test_every_gpufleet_command_is_one_and_documents_every_option() -> None:
    missing, django_listed = [], []
    for name in own_commands():
        command = load_command_class(get_commands()[name], name)
        if name == "migrate":  # Django's own, extended: its options are Django's
            continue
        assert isinstance(command, GpufleetCommand), name
        for parser in parsers(command.create_parser("gpufleet", name)):
            text = _help(parser)
            django_listed += [f"{parser.prog}: {opt}" for opt in ("--settings", "--pythonpath", "--traceback",
                                                                  "--skip-checks", "--force-color") if opt in text]
            for action in parser._actions:
                if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                    continue
                if DJANGO_OPTIONS.intersection(action.option_strings):
                    continue
                if not action.help or action.help == argparse.SUPPRESS:
                    missing.append(f"{parser.prog} {'/'.join(action.option_strings) or action.dest}")
    assert not django_listed, django_listed
    assert not missing, missing


def test_group_help_lists_the_groups_verbs_and_not_djangos_options() -> None:
    text = _help(_parser("billing"))
    assert "invoices" in text and "collect" in text
    assert "--settings" not in text and "--pythonpath" not in text and "--verbosity" not in text


def test_django_options_still_work_when_hidden(db) -> None:
    call_command("tenant", "list", "--json", verbosity=0, stdout=io.StringIO())  # no error


def test_cilium_status_is_hyphenated_like_the_other_commands() -> None:
    names = set(own_commands())
    assert "cilium-status" in names and "cilium_status" not in names
    assert not [n for n in names if "_" in n]


def test_a_mistyped_option_gets_the_nearest_real_one(capsys) -> None:
    command = load_command_class(get_commands()["quota"], "quota")
    with pytest.raises(SystemExit):
        command.run_from_argv(["gpufleet", "quota", "set", "acme", "--flavour", "a100", "--nominal", "3"])
    err = capsys.readouterr().err
    assert "--flavour is not an option here: did you mean --flavor?" in err


@pytest.fixture
def billed(db, settings):
    """A tenant with a USD price and one hour of usage in November 2026 (the fleet bills in USD)."""
    from datetime import UTC, datetime

    from billing.models import UsageRecord
    from scheduling.clusters.models import default_cluster_id
    from scheduling.models import Flavor

    settings.GPUFLEET_BILLING_CURRENCY = "USD"
    tenant = factories.tenant("acme", "standard", owner=factories.user("alice"))
    quiet = {"stdout": io.StringIO()}
    call_command("gpu-model", "create", "a100", "--dcgm-name", "NVIDIA A100-SXM4-80GB", "--memory-mib", "81920",
                 **quiet)
    call_command("flavor", "create", "a100", "--gpu-model", "a100", "--mode", "whole", "--capacity", "8", **quiet)
    call_command("price", "set", "--flavor", "a100", "--per-unit-hour", "2.00", "--currency", "USD",
                 "--from", "2026-11-01", **quiet)
    hour = datetime(2026, 11, 2, 10, tzinfo=UTC)
    UsageRecord.objects.create(tenant=tenant, flavor=Flavor.objects.get(name="a100"), cluster_id=default_cluster_id(),
                               hour=hour, unit_seconds=3600, gpu_equivalent_seconds=3600, collected_at=hour,
                               window_start=hour, window_end=hour)
    return Flavor.objects.get(name="a100")


def test_finalize_wants_yes_without_a_terminal(billed) -> None:
    with pytest.raises(CommandError, match="Pass --yes to confirm"):
        call_command("billing", "invoices", "--period", "2026-11", "--finalize", stdout=io.StringIO())
    assert not Invoice.objects.exists()  # refused before anything was drafted
    call_command("billing", "invoices", "--period", "2026-11", "--finalize", "--yes", stdout=io.StringIO())
    assert Invoice.objects.get().number


def test_finalize_dry_run_shows_the_invoices_and_writes_nothing(billed) -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command("billing", "invoices", "--period", "2026-11", "--finalize", "--dry-run", stdout=out, stderr=err)
    assert '"number"' in out.getvalue() and "dry run: nothing was written" in err.getvalue()
    assert not Invoice.objects.exists()
    call_command("billing", "invoices", "--period", "2026-11", "--finalize", "--yes", stdout=io.StringIO())
    assert Invoice.objects.get().number.endswith("000001")  # the dry run took no number


def test_a_price_in_another_currency_is_refused_or_confirmed(billed) -> None:
    args = ["price", "set", "--flavor", billed.name, "--per-unit-hour", "1.90", "--currency", "EUR",
            "--from", "2026-11-01"]
    with pytest.raises(CommandError, match="not the fleet's billing currency"):
        call_command(*args, stdout=io.StringIO())
    assert not Price.objects.filter(currency="EUR").exists()
    call_command(*args, "--yes", stdout=io.StringIO())
    assert Price.objects.filter(currency="EUR").exists()


def test_serve_on_a_busy_port_says_to_pick_another() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(CommandError) as raised, redirect_stderr(io.StringIO()):
            call_command("serve", f"127.0.0.1:{port}")
    assert f"port {port} on 127.0.0.1 is already in use" in str(raised.value)
    assert f"make demo PORT={port + 100}" in str(raised.value)
