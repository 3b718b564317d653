"""Exactly-once bookkeeping, stored in the target as `_chute_ledger`.

One row per state change of a unit: `started` before its rows are written,
`done` after they are in the table, `failed` when it could not be loaded,
`dropped` when its table was found gone, `forgotten` after `chute forget`
deleted its rows (a forgotten unit loads as a new one). The
latest row per (table, unit) is the unit's state. A unit found `started` on a
new run was interrupted: its rows (if any) are deleted by `_source` before it
is loaded again, so a crash at any point, then a re-run, gives one copy.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterable, Iterator, Sequence
from operator import attrgetter, itemgetter
from typing import NamedTuple

from chute.load.books import Books
from chute.sql import TableName, quote_ident, quote_str
from chute.targets.base import Target
from chute.units import Unit

LEDGER_TABLE = "_chute_ledger"
FORGOTTEN = "forgotten"
"""The state `chute forget` gives a unit: its rows are gone, the next load takes it as new."""

LEDGER_COLUMNS = (
    ("table", "String"),
    ("unit", "String"),
    ("identity", "String"),
    ("size", "UInt64"),
    ("mtime", "DateTime64(3, 'UTC')"),
    ("state", "LowCardinality(String)"),
    ("rows_loaded", "UInt64"),
    ("rows_rejected", "UInt64"),
    ("load_id", "String"),
    ("error", "String"),
    ("at", "DateTime64(6, 'UTC')"),
    ("seq", "UInt64"),
)


_freeze_after = False
FREEZE_OBJECTS = 50_000
"""Objects made with the collector paused past which `many_objects` freezes them (the command only)."""


def freeze_many_objects() -> None:
    """After `many_objects`, keep what exists out of the garbage collector's later walks
    (`gc.freeze`). Only for a process chute owns (the `chute` command): a library caller's
    own objects would be frozen with them, their cycles never collected."""
    global _freeze_after
    _freeze_after = True


@contextlib.contextmanager
def many_objects() -> Iterator[None]:
    """The garbage collector paused while a load's many books objects are made (an entry, a
    result a file): none is garbage, yet each collection walks them all again. A million
    entries read in 7 CPU-s, not 11; planned in 3, not 7."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if _freeze_after and gc.get_count()[0] >= FREEZE_OBJECTS:
                # Left out of every later collection: each would walk them all again (0.1-0.2 s
                # of a re-run over 100,000 files). Refcounting still frees them when dropped.
                # Only after many: a long `--follow` run's small batches would freeze the
                # young cycles of each (an exception's traceback) for good.
                gc.freeze()
            gc.enable()


class LedgerEntry(NamedTuple):
    """A unit's latest ledger row. (A tuple: a load of 100,000 files reads as many; a frozen
    dataclass took 5 us each to make.)"""

    unit: str
    identity: str
    state: str
    rows_loaded: int
    rows_rejected: int
    load_id: str
    error: str
    at: str
    seq: int = 0


class Ledger:
    def __init__(self, target: Target, table: TableName, books: Books | None = None) -> None:
        self.target = target
        self.table = table
        self.books = books or Books(target, table)
        self.name = TableName(table.database, LEDGER_TABLE)
        self._last_seq: dict[str, int] = {}
        """The newest `seq` read per unit: a new row goes after it even when this host's clock
        is behind the clock of the worker that wrote it (workers on several hosts)."""

    def ensure(self) -> None:
        caps = self.target.capabilities
        body = ",\n    ".join(f"{quote_ident(n)} {caps.adapt_type(t)}" for n, t in LEDGER_COLUMNS)
        self.books.create(self.name, f"\n    {body}\n", "(`table`, unit, seq)", "creating the ledger")

    def _time(self, ns: int) -> str:
        """A plain timestamp literal (UTC): VALUES of literals parse fast, expressions do not."""
        seconds, rest = divmod(ns, 1_000_000_000)
        text = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))
        if self.target.capabilities.datetime64:
            text += f".{rest // 1000:06d}"
        return quote_str(text)

    def exists(self) -> bool:
        return self.books.target.table_columns(self.name) is not None

    def latest(self, units: Sequence[str] | None = None) -> dict[str, LedgerEntry]:
        """The current state of every unit of this table (or of `units` only)."""
        where = f"`table` = {quote_str(str(self.table))}"
        if units is not None:
            if not units:
                return {}
            where += f" AND unit IN ({', '.join(quote_str(u) for u in units)})"
        with many_objects():
            return self._latest(where)

    def _latest(self, where: str) -> dict[str, LedgerEntry]:
        # TSV, split once (a JSON object a row cost 2 s of 100,000 rows); in the ledger's order
        # (by unit), sorted here: the engine's sort of every name cost more than the read.
        rows = self.books.tsv(
            self.name,
            "SELECT unit, argMax(identity, seq) AS identity, argMax(state, seq) AS state, "
            "argMax(rows_loaded, seq) AS rows_loaded, argMax(rows_rejected, seq) AS rows_rejected, "
            "argMax(load_id, seq) AS load_id, argMax(error, seq) AS error, toString(max(at)) AS at, "
            f"toString(max(seq)) AS last_seq FROM {self.name.sql} WHERE {where} GROUP BY unit",
            context="reading the ledger",
        )
        rows.sort(key=itemgetter(0))
        found = {r[0]: LedgerEntry(r[0], r[1], r[2], int(r[3]), int(r[4]), r[5], r[6], r[7], int(r[8])) for r in rows}
        if not self._last_seq:  # (the first read: each unit's as read)
            self._last_seq.update(zip(found, map(attrgetter("seq"), found.values()), strict=True))
            return found
        for unit, entry in found.items():
            self._last_seq[unit] = max(self._last_seq.get(unit, 0), entry.seq)
        return found

    def forget_dropped_table(self, load_id: str) -> int:
        """The table is not there, yet the ledger has units loaded into it: it was dropped, and
        those rows went with it. Each such unit gets a `dropped` row (loaded again, as an
        interrupted one is); how many. One INSERT ... SELECT, so other workers see all or none."""
        return self.mark(None, "dropped", load_id, "the table was not there")

    def mark(self, units: Sequence[str] | None, state: str, load_id: str, why: str) -> int:
        """A `state` row for each of `units` (None: every unit of the table) whose latest state
        is another, with its last identity; how many. One INSERT ... SELECT: all or none."""
        where = f"`table` = {quote_str(str(self.table))}"
        if units is not None:
            if not units:
                return 0
            where += f" AND unit IN ({', '.join(quote_str(u) for u in units)})"
        found = self.books.rows(
            self.name,
            f"SELECT count() AS n FROM (SELECT unit FROM {self.name.sql} WHERE {where} GROUP BY unit "
            f"HAVING argMax(state, seq) != {quote_str(state)})",
            context="reading the ledger",
        )
        count = int(found[0]["n"])
        if count:
            self.books.insert(
                self.name,
                f"INSERT INTO {self.name.sql} SELECT `table`, unit, argMax(identity, seq), argMax(size, seq), "
                f"argMax(mtime, seq), {quote_str(state)}, 0, 0, {quote_str(load_id)}, {quote_str(why)}, "
                f"{self._time(time.time_ns())}, max(seq) + 1 FROM {self.name.sql} WHERE {where} GROUP BY `table`, unit "
                f"HAVING argMax(state, seq) != {quote_str(state)}",
                "writing the ledger",
            )
        return count

    def load_ids(self, units: Sequence[Unit]) -> list[str]:
        """Every load the ledger names for `units` (for a byte range: for any range of its file).
        Only their rows may be an earlier attempt's: a repair deletes those and no others, so a
        repair that reaches the server late cannot take the rows of a worker that loaded the
        unit after it (chute.load.commit.Commit.remove_rows)."""
        keys = sorted({u.key for u in units if not u.is_range})
        origins = sorted({u.origin for u in units if u.is_range})
        terms = [f"unit IN ({', '.join(quote_str(k) for k in keys)})"] if keys else []
        terms += [f"startsWith(unit, {quote_str(o)})" for o in origins]
        if not terms:
            return []
        rows = self.books.rows(
            self.name,
            f"SELECT DISTINCT load_id FROM {self.name.sql} WHERE `table` = {quote_str(str(self.table))} "
            f"AND ({' OR '.join(terms)})",
            context="reading the ledger",
        )
        return sorted(str(r["load_id"]) for r in rows)

    def record(
        self,
        units: Iterable[Unit],
        state: str,
        load_id: str,
        rows: dict[str, int] | None = None,
        errors: dict[str, str] | None = None,
        rejected: dict[str, int] | None = None,
    ) -> None:
        """Append one state row per unit, in a single insert (one part: atomic).

        What every row shares (table, state, load, the time) is quoted once: a batch of 10,000
        files writes 10,000 rows (quoting each field of each row cost 0.3 s a batch)."""
        now = time.time_ns()
        shared = f"{quote_str(state)}, "
        tail = f"{quote_str(load_id)}, "
        at = self._time(now)
        table = quote_str(str(self.table))
        no_error = quote_str("")
        values = []
        for i, unit in enumerate(units):
            key = unit.key
            rows_loaded = rows.get(key, 0) if rows else 0
            error = errors.get(key, "") if errors else ""
            rows_rejected = rejected.get(key, 0) if rejected else 0
            seq = max(now + i, self._last_seq.get(key, 0) + 1)
            self._last_seq[key] = seq
            values.append(
                f"({table}, {quote_str(key)}, {quote_str(unit.identity)}, "
                f"{unit.size}, {self._time(unit.mtime_ns)}, {shared}"
                f"{rows_loaded}, {rows_rejected}, {tail}{quote_str(error) if error else no_error}, "
                f"{at}, {seq})"
            )
        if values:
            self.books.insert(
                self.name, f"INSERT INTO {self.name.sql} VALUES {', '.join(values)}", "writing the ledger"
            )


def known_spelling(target: Target, table: TableName) -> tuple[TableName, str | None]:
    """`t` and `db.t`, where db is the target's own database, are one table; the ledger keys
    units by the name a load was given, so `--table default.t` after `--table t` found every
    file new and loaded it twice. The spelling the ledger holds units under already wins
    (with a note saying so); a table named one way only keeps its name."""
    books = target.books_target(table)
    ledger = TableName(table.database, LEDGER_TABLE)
    if books.table_columns(ledger) is None:
        return table, None
    current = str(books.rows("SELECT currentDatabase() AS d", context="reading the ledger")[0]["d"])
    if table.database is None:
        other = TableName(current, table.table)
    elif table.database == current:
        other = TableName(None, table.table)
    else:
        return table, None
    given, known = quote_str(str(table)), quote_str(str(other))
    found = books.rows(
        f"SELECT countIf(`table` = {given}) AS given, countIf(`table` = {known}) AS known "
        f"FROM {ledger.sql} WHERE `table` IN ({given}, {known})",
        context="reading the ledger",
    )[0]
    if int(found["given"]) or not int(found["known"]):
        return table, None
    return other, f"table {table} is the table loaded before as {other}: its ledger entries go by that name"
