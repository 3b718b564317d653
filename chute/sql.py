"""Quoting for everything that reaches SQL: names and paths come from users."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

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


MAX_NAME = 180
"""Longest database or table name chute takes (see TableName.parse)."""


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
        if any(len(p) > MAX_NAME for p in parts):
            # Tables are directories and files named after them (and chute's stages add ~40 bytes):
            # past the file system's 255 bytes the server fails with its own C++ message.
            raise UsageError(f"table name too long ({max(len(p) for p in parts)} characters; at most {MAX_NAME})")
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


def _top_level(text: str, start: int = 0) -> Iterator[tuple[int, int]]:
    """(position, bracket depth before it) of each character of `text` outside quotes
    ('...', `...`, "..."; backslash escapes), from `start`."""
    depth, quote, i = 0, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'`\"":
            quote = ch
        else:
            yield i, depth
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
        i += 1


def split_top(text: str, sep: str) -> list[str]:
    """`text` split at `sep` outside brackets and quotes (structures, types, arguments)."""
    parts, start = [], 0
    for i, depth in _top_level(text):
        if depth == 0 and i >= start and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i + len(sep)
    parts.append(text[start:])
    return parts


def closing_bracket(text: str, at: int) -> int | None:
    """The position of the bracket that closes the one at `at`, outside quotes; None if none does."""
    for i, depth in _top_level(text, at):
        if depth == 1 and text[i] in ")]":
            return i
    return None


def sources_filter(sources: Sequence[str], loads: Sequence[str] = ()) -> str:
    """WHERE of the rows of `sources` (by `_source`), of the loads `loads` only when given."""
    where = f"_source IN ({', '.join(quote_str(s) for s in sources)})"
    if loads:
        where += f" AND _load_id IN ({', '.join(quote_str(x) for x in loads)})"
    return where
