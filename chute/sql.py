"""Quoting for everything that reaches SQL: names and paths come from users."""

from __future__ import annotations

import re
import secrets
from collections.abc import Generator, Sequence

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


INTERNAL_PREFIX = f"_chute{secrets.token_hex(4)}_"
"""The prefix of every name chute gives its own values in SQL beside a user's columns (aliases,
scratch tables' columns, a tag in a rewritten record): random per process, so no column of a
user's table is named so. A fixed name met a user's column of that name: `row` made every
`_source_row` the user's value, `k` or `reason` failed a whole file on one bad value."""


def internal(name: str) -> str:
    """chute's own name `name` in SQL, in a namespace of its own (see INTERNAL_PREFIX)."""
    return INTERNAL_PREFIX + name


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


def _top_level(text: str, start: int = 0, comments: bool = False) -> Generator[tuple[int, int], None, str]:
    """(position, bracket depth before it) of each character of `text` outside quotes
    ('...', `...`, "..."; backslash escapes), from `start`; with `comments`, outside comments
    too (`--`, `#` to the line's end, `/* */`). Returns the quote left open at the end ('' for none)."""
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
        elif comments and text.startswith(("--", "/*", "#"), i):
            end = text.find("*/", i + 2) + 2 if ch == "/" else text.find("\n", i)
            if end < i:
                return ""  # the comment runs to the end
            i = end
            continue
        else:
            yield i, depth
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
        i += 1
    return quote


def _scan(text: str, expression: bool) -> tuple[str | None, int]:
    """What makes `text` more (or less) than one piece of SQL: None, or the first such thing,
    and the bracket depth at the end. In an expression a comment or `$` is refused too (a
    heredoc would hide a quote from this scan); in a statement comments are skipped."""
    chars, depth = _top_level(text, comments=not expression), 0
    while True:
        try:
            i, before = next(chars)
        except StopIteration as end:
            return (f"an unclosed {end.value}" if end.value else None), depth
        ch = text[i]
        if ch == ";":
            return "a ';'", before
        if expression and (ch == "$" or text.startswith(("--", "/*", "#"), i)):
            return ("a '$'" if ch == "$" else "a comment"), before
        depth = before + (ch in "([") - (ch in ")]")
        if depth < 0:
            return f"an unmatched {ch!r}", depth


def expression(text: str, option: str) -> str:
    """A SQL expression a user gave (`--order-by`, `--where`...), as it is, once it is one piece:
    it goes into chute's statements, so a ';', a comment or an unclosed quote or bracket could make
    it another statement or cut chute's off. Raises UsageError."""
    if not text.strip():
        raise UsageError(f"{option} needs an expression")
    found, depth = _scan(text, expression=True)
    if found is None and depth:
        found = "an unclosed bracket"
    if found is not None:
        raise UsageError(f"{option} must be one SQL expression; {text!r} has {found}")
    return text


def one_statement(text: str) -> str:
    """A query a user gave, without its trailing ';': one statement only, as the embedded
    engine would run every one. Raises UsageError."""
    body = text.strip()
    while body.endswith(";"):
        body = body[:-1].rstrip()
    if not body:
        raise UsageError("no SQL statement given")
    found, depth = _scan(body, expression=False)
    if found == "a ';'":
        raise UsageError("one SQL statement at a time (found a ';' between statements)")
    if found is None and depth:
        found = "an unclosed bracket"
    if found is not None:
        raise UsageError(f"the SQL statement has {found}")
    return body


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
