"""The `gpufleet` console script: Django's management commands with the platform's defaults.

Without DJANGO_SETTINGS_MODULE it uses the embedded demo profile (an embedded PostgreSQL under ./var,
started for the command unless the demo already runs it; GitOps into a local repository) and applies
pending migrations first, so `gpufleet tenant create ...` works on a fresh checkout.

`gpufleet`, `gpufleet help` and `gpufleet --help` list gpufleet's own commands, one line each; Django's
whole list (migrate, createsuperuser, ...) is one `gpufleet help --django` away.
"""

from __future__ import annotations

import logging
import os
import sys

from gpufleet.core import conf

# The apps whose management commands are gpufleet's (the rest are Django's and third parties').
OWN_APPS = ("tenants", "scheduling", "billing", "gpufleet")
HELP_WORDS = {"help", "--help", "-h"}

# Noise a person running a command should not see: kombu's "No hostname was supplied" (the demo's
# in-memory broker has no host), Celery's "Task ... succeeded" lines for eagerly run tasks, and urllib3's
# per-retry warnings (the command reports the outcome itself, in one line). Errors still show.
QUIET_LOGGERS = {"kombu": logging.ERROR, "celery": logging.WARNING, "urllib3": logging.ERROR}


def own_commands() -> dict[str, str]:
    """gpufleet's commands and the first line of each one's help text, by name."""
    from django.core.management import get_commands, load_command_class

    listing = {}
    for name, app in sorted(get_commands().items()):
        if app.split(".")[0] not in OWN_APPS:
            continue
        text = str(getattr(load_command_class(app, name), "help", "") or "").strip()
        listing[name] = text.splitlines()[0] if text else ""
    return listing


def usage() -> str:
    commands = own_commands()
    width = max(len(name) for name in commands)
    lines = ["usage: gpufleet <command> [options]", "", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, text in commands.items()]
    lines += ["", "`gpufleet <command> --help` shows a command's options;",
              "`gpufleet help --django` lists Django's management commands too (migrate, createsuperuser...)."]
    return "\n".join(lines) + "\n"


def quiet_logs() -> None:
    for name, level in QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(level)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv if argv is None else argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufleet.settings.demo")
    import django
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import call_command, execute_from_command_line

    from gpufleet.embedded_bao import EmbeddedBaoError
    from gpufleet.embedded_db import EmbeddedDatabaseError

    try:
        django.setup()
    except (ImproperlyConfigured, EmbeddedDatabaseError, EmbeddedBaoError) as exc:  # one line, no traceback
        sys.stderr.write(f"gpufleet: {exc}\n")
        sys.exit(2)
    quiet_logs()
    args = argv[1:]
    if not args or args in (["help"], ["--help"], ["-h"]):
        sys.stdout.write(usage())
        return
    if args == ["help", "--django"]:
        argv = [argv[0], "help"]
    command = argv[1]
    if conf.AUTO_MIGRATE and command not in {
        "migrate",
        "makemigrations",
        *HELP_WORDS,
    }:
        call_command("migrate", interactive=False, verbosity=0)
    execute_from_command_line(argv)


if __name__ == "__main__":
    main()
