"""A cheap proof of a JSON-lines file's integers and dates, for files a server parses itself.

chute.load.verify checks the values a server stored against chute's own read of the file. That
read parses every JSON line and runs chute's full value checks (~1.6 CPU-s per 1 M rows of the
streams set, about what converting the file here costs), so on two machines it bought nothing.
Most files hold only plain values: an integer as digits, a date as `"YYYY-MM-DD"`, a time as
`"YYYY-MM-DDThh:mm:ssZ"`. For those the engine need not parse JSON: it reads each line as text
(`LineAsString`), finds the key `"name":` (which cannot stand inside a JSON string, whose quotes
are escaped) and takes the bytes after it. A row is proved when each checked key occurs exactly
once in the line and its text is plain and round-trips: the digits of a number that fits the
column's type; a date or time that the engine formats back to the same text (no roll-over, in
the type's range). Its value is then hashed with its row number as the full check does.

The proof never decides against a file: a file with a row it does not prove gets the full check
(chute.load.verify.Verifier), which rejects or accepts each value by chute's own rules. The cost
and why it is enough: docs/internals/server-parse.md.
"""

from __future__ import annotations

import re

from chute.load.checks.types import strip_wrappers
from chute.sql import quote_str

_INTEGER = re.compile(r"^(U?)Int(8|16|32|64)$")
_DATETIME = re.compile(r"^DateTime(\(\s*'[^']*'\s*\))?$")
_DIGITS = "'^-?[1-9][0-9]{0,18}$|^0$'"
TAIL = 24
"""Bytes looked at after a key: the longest plain text (a quoted time, 22) and its `,` or `}`."""


def key_text(name: str) -> str | None:
    """The bytes `"name":` as they stand in a JSON line; None where a name needs escaping there."""
    if not name or any(c in name for c in '"\\/') or any(ord(c) < 0x20 or ord(c) > 0x7E for c in name):
        return None
    return f'"{name}":'


def provable(name: str, type_sql: str) -> bool:
    """Whether the cheap proof knows this column: an integer of up to 64 bits, Date or DateTime,
    not Nullable (a JSON null is a missing value, which the full read counts)."""
    inner, nullable = strip_wrappers(type_sql)
    if nullable or key_text(name) is None:
        return False
    return bool(_INTEGER.match(inner)) or inner == "Date" or bool(_DATETIME.match(inner))


def parsed(type_sql: str, text: str) -> tuple[str, str]:
    """(SQL of the value of the plain `text`, a JSON scalar's bytes, in the column's type; SQL
    that is 1 where `text` is plain and round-trips). Only the rows where the second holds count."""
    inner, _ = strip_wrappers(type_sql)
    integer = _INTEGER.match(inner)
    if integer:
        flag = integer.group(2) in ("8", "16", "32")  # JSON true/false, as chute's read takes them
        number = (
            f"multiIf({text} = 'true', 1, {text} = 'false', 0, toInt128OrZero({text}))"
            if flag
            else (f"toInt128OrZero({text})")
        )
        plain = f"match({text}, {_DIGITS})" + (f" OR {text} IN ('true', 'false')" if flag else "")
        value = f"accurateCastOrNull({number}, {quote_str(inner)})"
        return f"ifNull({value}, 0)", f"({plain}) AND isNotNull({value})"
    unquoted = f"substring({text}, 2, greatest(0, length({text}) - 2))"
    if inner == "Date":
        value = f"toDateOrNull({unquoted})"
        return f"ifNull({value}, toDate(0))", f"length({text}) = 12 AND toString({value}) = {unquoted}"
    # A time with Z is an instant, whatever the column's time zone.
    value = f"parseDateTimeBestEffortOrNull({unquoted}, 'UTC')"
    back = f"formatDateTime({value}, '%Y-%m-%dT%H:%i:%SZ', 'UTC')"
    return f"toUInt32(ifNull({value}, toDateTime(0, 'UTC')))", f"length({text}) = 22 AND {back} = {unquoted}"


def proof_layers(names: list[str], types: list[str], source: str, keep: str) -> tuple[str, list[str], str]:
    """A subquery over `source` (a SELECT of `line` and the `keep` columns) that gives per row
    the columns `keep`, `v0`.. (each column's value) and `proved`; the value SQL names (`v0`..);
    the name of the proof column. Written in layers so that each piece is computed once."""
    keys = [key_text(n) for n in names]
    assert all(k is not None for k in keys)
    tails = ", ".join(
        f"countSubstrings(line, {quote_str(k or '')}) AS c{j}, "
        f"substring(line, position(line, {quote_str(k or '')}) + {len(k or '')}, {TAIL}) AS t{j}"
        for j, k in enumerate(keys)
    )
    texts = ", ".join(
        f"c{j}, substring(t{j}, 1, greatest(0, multiSearchFirstPosition(t{j}, [',', '}}']) - 1)) AS x{j}"
        for j in range(len(keys))
    )
    pieces = [parsed(t, f"x{j}") for j, t in enumerate(types)]
    values = ", ".join(f"{value} AS v{j}" for j, (value, _) in enumerate(pieces))
    # (A NULL is no proof: a date that does not parse makes the comparison NULL.)
    proof = " AND ".join(f"(c{j} = 1 AND ifNull({ok}, 0))" for j, (_, ok) in enumerate(pieces)) or "1"
    sql = (
        f"SELECT {keep}, {values}, {proof} AS proved FROM (SELECT {keep}, {texts} FROM "
        f"(SELECT {keep}, {tails} FROM ({source})))"
    )
    return sql, [f"v{j}" for j in range(len(keys))], "proved"
