"""A unit made the fast way (`Unit.of_file`, for listings of 100,000 files) is the unit the
dataclass makes: every field set, equal, same hash, same identity, still frozen."""

from __future__ import annotations

import dataclasses

import pytest

from chute.formats import FileFormat
from chute.units import Unit


def test_of_file_is_the_dataclass_unit() -> None:
    fmt = FileFormat("JSONEachRow", "gzip")
    fast = Unit.of_file("/d/a.json.gz", 10, 20, fmt, "fp", "30.40")
    slow = Unit(key="/d/a.json.gz", size=10, mtime_ns=20, fmt=fmt, fingerprint="fp", witness="30.40")
    assert set(vars(fast)) == {f.name for f in dataclasses.fields(Unit)}
    assert fast == slow and hash(fast) == hash(slow) and fast.identity == slow.identity == "10:20:fp:30.40"
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.size = 11  # type: ignore[misc]
