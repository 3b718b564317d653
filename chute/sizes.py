"""Sizes as users write them ("256MB", "1GB", or bytes) for every command and LoadOptions
alike. Multiples are binary (MB = MiB = 2**20 bytes), as ClickHouse prints them and as every
figure chute prints is (KiB, MiB, GiB)."""

from __future__ import annotations

import re

from chute.errors import UsageError

_SIZE_RE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(?:i?b)?\s*")
_FACTORS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def parse_size(value: str | int, what: str = "size") -> int:
    """Bytes from '256MB', '1GB', '1.5G', '1000' or an int of bytes."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE_RE.fullmatch(str(value).lower())
    if not isinstance(value, str) or not match:
        raise UsageError(f"invalid {what} {value!r}: use e.g. 256MB or 1GB, or bytes as an int")
    return int(float(match.group(1)) * _FACTORS[match.group(2)])
