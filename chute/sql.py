"""Quoting for everything that reaches SQL: names and paths come from users."""

from __future__ import annotations

import re

from chute.errors import UsageError

_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def quote_ident(name: str) -> str:
    """Quote an identifier with backticks, escaping what needs it."""
    escaped = name.replace("\\", "\\\\").replace("`", "\\`")
    return f"`{escaped}`"


def quote_str(value: str) -> str:
    """Quote a string literal, escaping backslashes, quotes and control bytes."""
    escaped = (
        value.replace("\\", "\\\\")
        .replace("'", "\\'")
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
        .replace("\0", "\\0")
    )
    return f"'{escaped}'"


class TableName:
    """A validated `[db.]table` name with its quoted SQL form."""

    __slots__ = ("database", "table")

    def __init__(self, database: str | None, table: str) -> None:
        self.database = database
        self.table = table

    @classmethod
    def parse(cls, text: str) -> TableName:
        """Accept `table` or `db.table`; names must be plain identifiers."""
        parts = text.split(".")
        if len(parts) > 2 or not all(_PLAIN_NAME.match(p) for p in parts):
            raise UsageError(
                f"invalid table name {text!r}: use letters, digits and underscores, as `table` or `db.table`"
            )
        if len(parts) == 2:
            return cls(parts[0], parts[1])
        return cls(None, parts[0])

    def with_suffix(self, suffix: str) -> TableName:
        return TableName(self.database, self.table + suffix)

    @property
    def sql(self) -> str:
        if self.database:
            return f"{quote_ident(self.database)}.{quote_ident(self.table)}"
        return quote_ident(self.table)

    def __str__(self) -> str:
        return f"{self.database}.{self.table}" if self.database else self.table

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TableName) and (self.database, self.table) == (other.database, other.table)

    def __hash__(self) -> int:
        return hash((self.database, self.table))
