"""Bad rows: the `<table>_rejects` table and the --max-errors budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chute.errors import UsageError
from chute.load.books import Books
from chute.sql import TableName, quote_ident, quote_str, sources_filter
from chute.targets.base import Target

REJECT_COLUMNS = ("_source", "_source_row", "raw", "error", "_load_id", "at")

_REJECT_TYPES = (
    ("_source", "LowCardinality(String)"),
    ("_source_row", "UInt64"),
    ("raw", "String"),
    ("error", "String"),
    ("_load_id", "LowCardinality(String)"),
    ("at", "DateTime64(3, 'UTC')"),
)


class Rejects:
    """The rejects table next to a target table: one row per bad input record."""

    def __init__(self, target: Target, table: TableName, books: Books | None = None) -> None:
        self.target = target
        self.books = books or Books(target, table)
        self.name = table.with_suffix("_rejects")
        self._exists: bool | None = None

    def exists(self) -> bool:
        if self._exists is None:
            self._exists = self.target.table_columns(self.name) is not None
        return self._exists

    def ensure(self) -> None:
        if self.exists():
            return
        caps = self.target.capabilities
        body = ", ".join(f"{quote_ident(n)} {caps.adapt_type(t)}" for n, t in _REJECT_TYPES)
        self.books.create(self.name, body, "(_source, _source_row)", f"creating {self.name}")
        self._exists = True

    def clear(self, source: str, loads: Sequence[str] = ()) -> None:
        """Forget earlier rejects of a file about to be checked again (no doubles); given
        `loads`, those of these loads only (see Ledger.load_ids)."""
        if not self.exists():
            return
        # Deletes are costly even when they match nothing; the key makes this look-up cheap.
        where = sources_filter([source], loads)
        found = self.target.rows(f"SELECT count() AS n FROM {self.name.sql} WHERE {where}")
        if int(found[0]["n"]):
            self.target.delete_sources(self.name, [source], loads)

    def types(self) -> dict[str, str]:
        columns = self.target.table_columns(self.name) or []
        return {c.name: c.type for c in columns}


DEFAULT_MAX_SHARE = 0.1
DEFAULT_FREE_ROWS = 100


@dataclass(frozen=True)
class ErrorBudget:
    """How many bad rows a file may have: a count, a share, or the default.

    The default stops a load with the wrong format, delimiter or table before it
    marks files done: a file fails when over 10% of its rows and over 100 rows are
    bad. Whatever the budget, a file with no good row fails (nothing to load is
    never a success); a re-run loads it once the cause is fixed."""

    count: int | None = None
    share: float | None = None

    @classmethod
    def parse(cls, text: str | int | None) -> ErrorBudget:
        if text is None or text == "":
            return cls()
        if isinstance(text, int) and not isinstance(text, bool):
            text = str(text)
        if not isinstance(text, str):
            raise UsageError(f"--max-errors takes a count (10) or a share ('0.1%'), not {text!r}")
        try:
            if text.endswith("%"):
                share = float(text[:-1]) / 100
                if not 0 <= share <= 1:
                    raise ValueError
                return cls(share=share)
            count = int(text)
            if count < 0:
                raise ValueError
            return cls(count=count)
        except ValueError:
            raise UsageError(f"--max-errors takes a count (10) or a share (0.1%), not {text!r}") from None

    def allows(self, rejected: int, total: int) -> bool:
        return self.over(rejected, total) is None

    def over(self, rejected: int, total: int) -> str | None:
        """Why a file with `rejected` bad rows of `total` fails, None when it may load."""
        if rejected and rejected >= total:
            rows = f"all {total} rows" if total > 1 else "its one row"
            return f"{rows} rejected (a wrong --format, --delimiter or table?)"
        if self.count is not None:
            return (
                None
                if rejected <= self.count
                else f"{rejected} of {total} rows rejected, over --max-errors {self.count}"
            )
        if self.share is not None:
            if rejected <= self.share * total:
                return None
            return f"{rejected} of {total} rows rejected, over --max-errors {self.share * 100:g}%"
        if rejected <= DEFAULT_FREE_ROWS or rejected <= DEFAULT_MAX_SHARE * total:
            return None
        return (
            f"{rejected} of {total} rows rejected, over the default limit (10% and {DEFAULT_FREE_ROWS} rows; "
            "set --max-errors to allow more)"
        )


RESERVED_DATABASES = frozenset({"system", "information_schema"})
"""The server's own databases: never a load's target."""


def refuse_reserved(table: TableName) -> None:
    """`system.query_log` and the like: refused before anything is opened."""
    if table.database is not None and table.database.lower() in RESERVED_DATABASES:
        raise UsageError(f"table {table}: database {table.database} belongs to ClickHouse; load into another database")


def refuse_rejects_clash(target: Target, table: TableName, ledger: TableName | None) -> None:
    """A load's table and chute's `<table>_rejects` tables must not be each other.

    - `t_rejects` is refused when chute loads `t` (the ledger knows it, or `t` has
      provenance columns): its bad rows go to `t_rejects`.
    - `t` is refused when a `t_rejects` exists that is not a rejects table (it lacks
      the rejects columns): bad rows of `t` would be written into someone's data.
    """
    if table.table.endswith("_rejects") and table.table != "_rejects":
        base = TableName(table.database, table.table.removesuffix("_rejects"))
        columns = {c.name for c in target.table_columns(base) or []}
        known = ledger is not None and int(
            target.rows(
                f"SELECT count() AS n FROM {ledger.sql} WHERE `table` = {quote_str(str(base))}",
                context="reading the ledger",
            )[0]["n"]
        )
        if known or {"_source", "_load_id"} <= columns:
            raise UsageError(f"table {table} is where chute keeps the bad rows of {base}; choose another table name")
    rejects = table.with_suffix("_rejects")
    found = target.table_columns(rejects)
    if found is not None and not set(REJECT_COLUMNS) <= {c.name for c in found}:
        raise UsageError(
            f"table {rejects} exists and is not chute's rejects table: bad rows of {table} go to {rejects}; "
            f"rename that table, or load into another one"
        )
