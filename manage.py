#!/usr/bin/env python
"""Django's command-line utility; the `gpufleet` console script runs the same commands."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "platform"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufleet.settings.demo")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
