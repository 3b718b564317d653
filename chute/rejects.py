"""Bad rows: the `<table>_rejects` table and the --max-errors budget."""

from __future__ import annotations

from dataclasses import dataclass

from chute.errors import UsageError
from chute.sql import TableName, quote_ident, quote_str
from chute.targets import Target

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

    def __init__(self, target: Target, table: TableName) -> None:
        self.target = target
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
        self.target.execute(
            f"CREATE TABLE IF NOT EXISTS {self.name.sql} ({body}) ENGINE = MergeTree ORDER BY (_source, _source_row)",
            context=f"creating {self.name}",
        )
        self._exists = True

    def clear(self, source: str) -> None:
        """Forget earlier rejects of a file about to be checked again (no doubles)."""
        if not self.exists():
            return
        # Deletes are costly even when they match nothing; the key makes this look-up cheap.
        found = self.target.rows(f"SELECT count() AS n FROM {self.name.sql} WHERE _source = {quote_str(source)}")
        if int(found[0]["n"]):
            self.target.delete_sources(self.name, [source])

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
    def parse(cls, text: str | None) -> ErrorBudget:
        if text is None or text == "":
            return cls()
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
