"""A database table's columns as chute reads them, and the words of its errors."""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

from chute.errors import SchemaError
from chute.sql import quote_str, split_top


@dataclass(frozen=True)
class SourceColumn:
    """A column as chute reads it: `expr` (over the engine's raw column) gives `type`."""

    name: str
    raw: str  # the engine's type for the column, as its table function reads it
    type: str
    expr: str
    zone: str = ""  # a timestamp with zone: the zone of the text the server writes and compares it in
    exact: str = ""
    """SQL of the value from the column read as text, NULL where it does not fit `type` exactly
    (chute.sources.database.exact); "": the engine's reading is exact."""
    text: bool = False
    """The column is read as the server's text (`raw` is String), converted by `expr`."""
    numeric: bool = False
    """A PostgreSQL numeric or MySQL DECIMAL: its text converts exactly into any Decimal."""


def split_nullable(type_name: str) -> tuple[bool, str]:
    if type_name.startswith("Nullable(") and type_name.endswith(")"):
        return True, type_name[9:-1]
    return False, type_name


def parse_structure(structure: str) -> list[tuple[str, str, str]]:
    """(name, type, default SQL) of each column of a structure chute wrote (`Column.structure_sql`)."""
    found = []
    for item in split_top(structure, ","):
        item = item.strip()
        if not item:
            continue
        match = re.match(r"`((?:[^`\\]|\\.)*)`\s+", item)
        if not match:
            raise SchemaError(f"cannot read the column list {structure[:200]!r}")
        name = re.sub(r"\\(.)", r"\1", match.group(1))
        rest = list(split_top(item[match.end() :], " DEFAULT "))
        found.append((name, rest[0].strip(), rest[1].strip() if len(rest) > 1 else ""))
    return found


def scrub_secret(text: str, secret: str) -> str:
    if not secret:
        return text
    for form in {secret, quote_str(secret)[1:-1], urllib.parse.quote(secret, safe="")}:
        text = text.replace(form, "***")
    return text


def one_reason(message: str) -> str:
    """The server's own words from an engine error about a connection or table."""
    for pattern in (
        r"port \d+ failed: (?:FATAL:\s*)?(.+?)[\s.]*$",
        r"mysqlxx::\w+: (.+?)(?: \(\(nullptr\):\d+\))?[\s.]*$",
    ):
        match = re.search(pattern, message)
        if match:
            return match.group(1).strip().rstrip(".")
    return message
