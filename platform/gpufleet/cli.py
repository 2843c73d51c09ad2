"""The `gpufleet` console script: Django's management commands with the platform's defaults.

Without DJANGO_SETTINGS_MODULE it uses the embedded demo profile (SQLite under ./var, GitOps into a
local repository) and applies pending migrations first, so `gpufleet tenant create ...` works on a
fresh checkout.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv if argv is None else argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufleet.settings.demo")
    import django
    from django.conf import settings
    from django.core.management import call_command, execute_from_command_line

    django.setup()
    command = argv[1] if len(argv) > 1 else "help"
    if getattr(settings, "GPUFLEET_AUTO_MIGRATE", False) and command not in {
        "migrate",
        "makemigrations",
        "help",
        "--help",
        "-h",
    }:
        call_command("migrate", interactive=False, verbosity=0)
    execute_from_command_line(argv)


if __name__ == "__main__":
    main()
