"""What every command shares: exit codes and sizes given on the command line."""

from __future__ import annotations

from chute.errors import UsageError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def parse_size(text: str) -> int:
    """Bytes from '256MB', '1GB', '1.5G', '1000' (binary multiples, as ClickHouse prints them)."""
    import re

    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if not match:
        raise UsageError(f"invalid size {text!r}: use e.g. 256MB or 1GB")
    factor = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[match.group(2)]
    return int(float(match.group(1)) * factor)
