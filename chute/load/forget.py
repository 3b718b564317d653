"""`chute forget`: units out of a table's books, their rows and rejects deleted, so the next
load takes them as new (once).

Files are matched against the ledger's units, not the file system: a file that is gone, or
that changed since, is forgotten as well. Its rows are found by `_source` (all of them, of
every load); then its rejects; then the ledger gets a `forgotten` row per unit (the ledger
only grows). A crash in between leaves the unit `done` with fewer rows: `forget` again
finishes the job, and the next load cannot double anything.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from chute.calls import public_call
from chute.errors import UsageError
from chute.load.books import Books
from chute.load.claims import DEFAULT_LEASE_SECONDS, Claims
from chute.load.ledger import FORGOTTEN, Ledger, known_spelling
from chute.load.rejects import Rejects, refuse_reserved
from chute.sources.base import expand_braces
from chute.sources.s3 import glob_regex
from chute.sql import TableName, sources_filter
from chute.targets import open_target
from chute.targets.base import Target

RANGE_MARK = "#bytes="
"""How a byte range's unit key follows its file's (chute.sources.files)."""


@dataclass
class ForgetReport:
    """What `forget` did: the units it took out of the books and the rows it deleted."""

    table: str
    target: str
    units: list[str] = field(default_factory=list)
    """The ledger's units forgotten (a file split in byte ranges: each range)."""
    files: list[str] = field(default_factory=list)
    """The files (what `_source` names) whose rows were deleted."""
    rows_deleted: int = 0
    rejects_deleted: int = 0
    kept_rows: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True: a forget that fails raises (no report). As every report has it."""
        return True

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, **asdict(self)}


@public_call
def forget(
    sources: Sequence[str] | str,
    table: str,
    target: str | None = None,
    password_file: str | None = None,
    insecure: bool = False,
    keep_rows: bool = False,
) -> ForgetReport:
    """Forget files the ledger of `table` holds, so that the next load loads them again, once:
    their rows (by `_source`) and rejects are deleted, then the ledger marks them `forgotten`.

    `sources`: paths, directories or globs (`**`, `{a,b}`), as for a load, or the URLs a load
    was given; matched against the ledger, so a file that is gone can be forgotten too.
    `keep_rows`: only the ledger forgets (for a table without provenance columns, or rows
    deleted by hand). Raises UsageError when a pattern matches no unit of the table, or when
    another worker loads one of them now: nothing is changed then."""
    patterns = [sources] if isinstance(sources, str) else list(sources)
    if not patterns:
        raise UsageError("forget: give the files to forget (paths, directories or globs)")
    name = TableName.parse(table)
    refuse_reserved(name)
    tgt = open_target(target, password_file, insecure, existing=True)
    name, spelled = known_spelling(tgt, name)
    books = Books(tgt, name)
    ledger = Ledger(tgt, name, books)
    report = ForgetReport(str(name), tgt.display_name, kept_rows=keep_rows, notes=[spelled] if spelled else [])
    latest = ledger.latest() if ledger.exists() else {}
    if not latest:
        raise UsageError(f"forget: the ledger of {tgt.display_name} names no file loaded into table {name}")
    units = matched(patterns, [k for k, e in latest.items() if e.state != FORGOTTEN], str(name))
    files = sorted({k.split(RANGE_MARK, 1)[0] for k in units})
    _refuse_claimed(tgt, name, books, units)
    columns = tgt.table_columns(name)
    if columns is not None and not keep_rows:
        if "_source" not in {c.name for c in columns}:
            raise UsageError(
                f"table {name} has no _source column (loaded with --no-provenance): its rows of these files "
                "cannot be found; delete them yourself, then forget with --keep-rows"
            )
        report.rows_deleted = _delete(tgt, name, files)
        left = int(tgt.rows(f"SELECT count() AS n FROM {name.sql}", context=f"counting {name}")[0]["n"])
        if report.rows_deleted and not left:
            report.notes.append(
                f"table {name} holds no rows now; its columns stay as they were made: to have them made "
                f"anew by the next load, drop it (DROP TABLE {name.sql})"
            )
    rejects = Rejects(tgt, name, books)
    if rejects.exists():
        report.rejects_deleted = _delete(tgt, rejects.name, files)
    ledger.mark(units, FORGOTTEN, f"forget-{uuid.uuid4().hex}", "forgotten by chute forget")
    report.units, report.files = units, files
    return report


def _refuse_claimed(tgt: Target, table: TableName, books: Books, units: list[str]) -> None:
    """UsageError when another worker loads one of `units` now (a live claim, on a server
    several workers share): its rows would go in after the delete."""
    if not tgt.shared:
        return  # (an embedded directory: one process at a time, this one)
    claims = Claims(tgt, table, None, DEFAULT_LEASE_SECONDS, books)
    if books.target.table_columns(claims.name) is None:
        return
    held = claims.holders(units)
    if held:
        unit, (holder, *_) = next(iter(held.items()))
        raise UsageError(
            f"{unit}: being loaded now by {holder.worker} (since {holder.since}); forget it once that load "
            "has ended; nothing was forgotten"
        )


def _delete(tgt: Target, table: TableName, files: list[str]) -> int:
    """Delete the rows of `files` from `table` (counted first: a mutation costs even when it
    matches nothing); how many there were."""
    found = tgt.rows(f"SELECT count() AS n FROM {table.sql} WHERE {sources_filter(files)}", context=f"counting {table}")
    count = int(found[0]["n"])
    if count:
        tgt.delete_sources(table, files)
    return count


def matched(
    patterns: Sequence[str], keys: Sequence[str], table: str | None, what: str = "nothing was forgotten"
) -> list[str]:
    """The unit keys the patterns name: a file (its byte ranges too), everything under a
    directory or URL prefix, or a glob; UsageError for a pattern that names none."""
    chosen: dict[str, None] = {}
    for pattern in patterns:
        found = [k for k in keys if _names(pattern, k.split(RANGE_MARK, 1)[0])]
        if not found:
            of, listed = (f" of table {table}", f" --table {table}") if table else ("", "")
            raise UsageError(
                f"{pattern}: no file{of} in the ledger is named so (chute status{listed} lists them); {what}"
            )
        chosen.update(dict.fromkeys(found))
    return sorted(chosen)


def _names(pattern: str, source: str) -> bool:
    """Whether `pattern` names the file (or object) `source`."""
    if "://" in pattern:
        forms = [pattern]
    else:
        pattern = os.path.expanduser(pattern)  # (a quoted ~/...: the shell left it as it is)
        forms = list(dict.fromkeys([os.path.abspath(pattern), os.path.realpath(pattern)]))
    if source in forms:
        return True  # (a file named like a glob, `[1]{2}*.json`, by its very name)
    for form in (f for given in forms for f in expand_braces(given)):
        if any(c in form for c in "*?["):
            if glob_regex(form).fullmatch(source):
                return True
        elif source == form or source.startswith(form.rstrip("/") + "/"):
            return True
    return False
