"""A unit of work: what the ledger records, a source names and a target loads.

Core: it imports nothing of chute's but the file format it is read in.
"""

from __future__ import annotations

from dataclasses import dataclass

from chute.formats import FileFormat


@dataclass(frozen=True)
class Unit:
    """One unit of work: a file today; a byte range, key range or offsets later."""

    key: str  # stable name of the unit (the absolute path for files, the URL of an object)
    size: int
    mtime_ns: int
    fmt: FileFormat
    etag: str = ""  # an object store's version of the object, where it has one
    origin: str = ""  # for a byte range of a big file: the file (what `_source` names)
    start: int = 0  # the byte range [start, end) of `origin`
    end: int = 0
    fingerprint: str = ""
    """A hash of the unit's first and last bytes (local files): a file replaced by one of the same
    size with its old mtime restored (`cp -p`, `rsync -t`, `tar x`) is a changed unit."""
    witness: str = ""
    """`ctime_ns.inode` of a local file as it was when its fingerprint was read, where that change
    time was already past (files.WITNESS_AGE): no write, `touch -d` or replacement leaves both
    as they were, so a later run that finds them so trusts the recorded fingerprint, unread."""

    @classmethod
    def of_file(cls, key: str, size: int, mtime_ns: int, fmt: FileFormat, fingerprint: str, witness: str) -> Unit:
        """A whole local file's unit, made without the frozen class's field-by-field `__init__`
        (4 us against 1.5 on a busy machine: a listing of 100,000 files makes as many)."""
        unit = object.__new__(cls)
        unit.__dict__.update(
            key=key,
            size=size,
            mtime_ns=mtime_ns,
            fmt=fmt,
            etag="",
            origin="",
            start=0,
            end=0,
            fingerprint=fingerprint,
            witness=witness,
        )
        return unit

    @property
    def source_name(self) -> str:
        """What `_source` holds for this unit's rows: the file, also for its ranges."""
        return self.origin or self.key

    @property
    def is_range(self) -> bool:
        return bool(self.origin)

    @property
    def identity(self) -> str:
        """What must stay equal for the unit to count as unchanged. (Made each time: at 0.5 us it is
        cheaper than `functools.cached_property`, whose lock costs 5 us a first read in Python 3.11.)"""
        base = f"{self.size}:{self.etag}" if self.etag else f"{self.size}:{self.mtime_ns}"
        if not self.fingerprint:
            return base
        return f"{base}:{self.fingerprint}:{self.witness}" if self.witness else f"{base}:{self.fingerprint}"

    def matches(self, recorded: str) -> bool:
        """Whether `recorded` (a ledger's identity of this unit) says it is unchanged: the same
        size, mtime and fingerprint. Its witness may differ (a `chmod`, a copy of the same bytes):
        the content is what counts. A ledger written before fingerprints holds size and mtime
        alone: equal ones count as unchanged (what that version knew), so an upgrade reloads nothing."""
        if recorded == self.identity:
            return True
        if not self.fingerprint or self.etag:
            return False
        content = f"{self.size}:{self.mtime_ns}:{self.fingerprint}"
        return recorded in (f"{self.size}:{self.mtime_ns}", content) or recorded.startswith(content + ":")
