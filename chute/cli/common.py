"""What every command shares: exit codes and sizes given on the command line."""

from __future__ import annotations

from chute.sizes import parse_size

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "parse_size"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
