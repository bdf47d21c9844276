#!/usr/bin/env python
"""Django's command-line utility for Garante."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    from config.deployment import InsecureSettings

    try:
        execute_from_command_line(sys.argv)
    except InsecureSettings as error:
        # An operator's mistake, not a bug: the one line that says what to set.
        sys.exit(f"Garante refuses to start: {error}")


if __name__ == "__main__":
    main()
