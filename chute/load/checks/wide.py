"""The careful passes of wide files: the columns of one type checked by one expression over an array.

Column by column, a careful pass's SQL holds each column's conversion (`column.conversion`) two
or three times, about 5 KB a column: the engine took about 60 ms of CPU a column to plan it (a
2,000-column CSV with one bad row: 2 CPU minutes), and 10,000 columns passed its AST limits
(`TOO_BIG_AST`: the whole file failed). Past WIDE_COLUMNS columns the passes group the columns by
type: one `arrayMap` over the group's texts converts them, one `arrayFirstIndex` finds its first
bad value, and a column's value is its element of its group's array. The conversions and the
reasons are the same SQL (chute.load.checks.reasons), written once a type instead of once a
column. A file of few columns keeps the column-by-column SQL (no arrays to build a row).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chute.load.checks.column import conversion
from chute.load.checks.missing import MASK_BITS, computed
from chute.load.checks.reasons import bad_arm, bad_reason, final_value, refused_arm, unfit_named
from chute.load.checks.types import array_element, default_of, read_as_text, strip_wrappers
from chute.schema import Column
from chute.sql import internal, quote_ident, quote_str

WIDE_COLUMNS = 64
"""Columns past which the careful passes check a type at a time (tests lower it to check the same
rows both ways)."""

NONE = 4294967295
"""A group's position of its first bad value where it has none (past every column)."""

X, C, P, T = internal("x"), internal("c"), internal("p"), internal("t")
"""Lambda parameters: a field's text, its conversion, whether it is present; a tuple."""
FIRST = internal("group_first")
"""The position of a record's first bad value among all groups (NONE where it has none)."""


def is_wide(columns: list[Column]) -> bool:
    return len(columns) > WIDE_COLUMNS


@dataclass(frozen=True)
class Group:
    """Columns of one type (and null marker), by their positions among the input columns."""

    number: int
    members: tuple[int, ...]
    column: Column
    """The first member: its type and null marker are the group's."""
    place: dict[int, int]
    """A member's 1-based place in the group's arrays."""

    def name(self, what: str) -> str:
        """The SQL name of one of the group's arrays (chute.sql.internal)."""
        return internal(f"group{self.number}_{what}")

    def element(self, what: str, i: int) -> str:
        """SQL of input column i's element of the group's array `what`."""
        return f"{self.name(what)}[{self.place[i]}]"

    def names(self, columns: list[Column]) -> str:
        return "[" + ", ".join(quote_str(columns[i].name) for i in self.members) + "]"

    def positions(self) -> str:
        return "[" + ", ".join(str(i) for i in self.members) + "]"


def groups(columns: list[Column], which: Callable[[Column], bool] = lambda c: True) -> list[Group]:
    """The columns (those `which` takes) grouped by type and null marker, in column order."""
    found: dict[tuple[str, str | None], list[int]] = {}
    for i, c in enumerate(columns):
        if which(c):
            found.setdefault((c.type, c.null_marker), []).append(i)
    return [
        Group(n, tuple(members), columns[members[0]], {i: k for k, i in enumerate(members, start=1)})
        for n, members in enumerate(found.values())
    ]


@dataclass(frozen=True)
class Delimited:
    """A CSV/TSV file's checks a type at a time (chute.load.careful_delimited._good_records):
    `source(table)` reads the fields' table with the groups' arrays beside them; `reasons` are
    the multiIf arms of the first bad value; `values` and `present` are each column's SQL."""

    layers: list[list[str]]
    reasons: list[str]
    values: list[str]
    slots: list[tuple[str, int]]
    """Each column's array of present flags, and its 1-based place there."""

    @property
    def present(self) -> list[str]:
        return [f"{array}[{k}]" for array, k in self.slots]

    def missing(self, watched_at: tuple[int, ...]) -> list[tuple[int, str]]:
        """`missing.mask_sql`'s flags of the `watched_at` columns: one each up to the mask's last
        bit, then one for all the others (the bit they share), an `arrayExists` a group."""
        last = MASK_BITS - 1
        flags = [(i, f"NOT {self.present[i]}") for i in watched_at if i < last]
        shared: dict[str, list[int]] = {}
        for i in watched_at:
            if i >= last:
                array, k = self.slots[i]
                shared.setdefault(array, []).append(k)
        exists = []
        for array, at in shared.items():
            marks = [0] * max(at)
            for k in at:
                marks[k - 1] = 1
            exists.append(f"arrayExists(({P}, {X}) -> {X} AND NOT {P}, arraySlice({array}, 1, {len(marks)}), {marks})")
        if exists:
            flags.append((last, exists[0] if len(exists) == 1 else f"or({', '.join(exists)})"))
        return flags

    def source(self, table: str) -> str:
        sql = table
        for layer in self.layers:
            if layer:
                sql = f"(SELECT *, {', '.join(layer)} FROM {sql})"
        return sql


def delimited(
    columns: list[Column],
    fields: list[str],
    text: Callable[[str], str],
    present: Callable[[Column, str], str],
    extract: Callable[[Column, str], str],
) -> Delimited:
    """`text(field)`, `present(column, field)` and `extract(column, field)`: the SQL the
    column-by-column pass uses, here over a lambda's parameter."""
    fields_at, converted, values, first_bad, least = [], [], [], [], []
    arms: list[str] = []
    by_column: dict[int, Group] = {}
    for g in groups(columns):
        col = g.column
        by_column.update((i, g) for i in g.members)
        fields_at.append(f"[{', '.join(fields[i] for i in g.members)}] AS {g.name('f')}")
        conv = conversion(text(X), col.type)
        checked = conv is not None and conv != text(X)
        converted.append(f"arrayMap({X} -> {present(col, X)}, {g.name('f')}) AS {g.name('p')}")
        if checked:
            converted.append(f"arrayMap({X} -> {conv}, {g.name('f')}) AS {g.name('c')}")
            value = final_value(col, C, P, extract(col, X))
            values.append(
                f"arrayMap(({X}, {C}, {P}) -> {value}, {g.name('f')}, {g.name('c')}, {g.name('p')}) AS {g.name('v')}"
            )
            first_bad.append(
                f"arrayFirstIndex(({C}, {P}) -> {P} AND {C} IS NULL, {g.name('c')}, {g.name('p')}) AS {g.name('b')}"
            )
            at = f"if({g.name('b')} = 0, {NONE}, {g.positions()}[{g.name('b')}])"
            least.append(f"{at} AS {g.name('q')}")
            bad_text = text(f"{g.name('f')}[{g.name('b')}]")
            name = f"{g.names(columns)}[{g.name('b')}]"
            arms += [
                f"{g.name('b')} != 0 AND {g.name('q')} = {FIRST}",
                bad_reason(col, bad_text, name),
            ]
        else:
            value = final_value(col, conv, P, extract(col, X))
            values.append(f"arrayMap(({X}, {P}) -> {value}, {g.name('f')}, {g.name('p')}) AS {g.name('v')}")
    if least:
        names = [q.rsplit(" AS ", 1)[1] for q in least]
        smallest = names[0] if len(names) == 1 else f"least({', '.join(names)})"
        least.append(f"{smallest} AS {FIRST}")
    return Delimited(
        [fields_at, converted, values + first_bad, least],
        arms,
        [by_column[i].element("v", i) for i in range(len(columns))],
        [(by_column[i].name("p"), by_column[i].place[i]) for i in range(len(columns))],
    )


def range_reasons(columns: list[Column]) -> str:
    """`reasons.range_reasons` a type at a time: over a row the engine parsed with the checked
    types as text, every value that does not fit, in column order, joined by '; '."""
    found = []
    for g in groups(columns, lambda c: read_as_text(c.type)):
        conv = conversion(X, g.column.type)
        if conv is None:
            continue
        inner = strip_wrappers(g.column.type)[0]
        reason = unfit_named(C, f"if(empty({X}), '\"\"', {X})", inner)
        texts = "[" + ", ".join(quote_ident(columns[i].name) for i in g.members) + "]"
        found.append(
            f"arrayFilter({T} -> {T}.2 != '', arrayMap(({X}, {C}, {P}) -> ({P}, "
            f"ifNull(if(isNotNull({X}) AND ({conv}) IS NULL, {reason}, ''), '')), "
            f"{texts}, {g.names(columns)}, {g.positions()}))"
        )
    if not found:
        return "''"
    every = found[0] if len(found) == 1 else f"arrayConcat({', '.join(found)})"
    return f"arrayStringConcat(arrayMap({T} -> {T}.2, arraySort({every})), '; ')"


def json_conversions(columns: list[Column], source: str) -> tuple[str, dict[int, str]]:
    """The parsed JSON records (`source`) with each group of text-read columns converted in an
    array beside them, and the SQL of each such column's final value: its text converted
    (`column.conversion`), its NULL or default where missing, cast to its type (the careful
    pass's good rows: their values fit). Not the columns whose missing value is a DEFAULT
    expression (computed per row), nor types without a conversion."""
    arrays: list[str] = []
    elements: dict[int, str] = {}
    for g in groups(columns, lambda c: read_as_text(c.type) and not computed(c)):
        conv = conversion(X, g.column.type)
        if conv is None:
            continue
        inner, nullable = strip_wrappers(g.column.type)
        missing = "NULL" if nullable else "'[]'" if array_element(inner) else default_of(inner)
        value = f"CAST(if(isNull({X}), {missing}, {conv}), {quote_str(g.column.type)})"
        texts = "[" + ", ".join(quote_ident(columns[i].name) for i in g.members) + "]"
        arrays.append(f"arrayMap({X} -> {value}, {texts}) AS {g.name('v')}")
        elements.update((i, g.element("v", i)) for i in g.members)
    if not arrays:
        return source, elements
    return f"(SELECT *, {', '.join(arrays)} FROM {source})", elements


def json_reason(columns: list[Column], raw: str) -> str:
    """The multiIf arms of a refused JSON record's first value that does not fit, in column order
    (`reasons.bad_arm`, then `reasons.refused_arm`, of each column): its keys and raw values read
    once a group, each key's column found by `transform` (a hash lookup, not a scan)."""
    found = []
    pairs = f"JSONExtractKeysAndValuesRaw({raw})"
    for g in groups(columns):
        col = g.column
        text, present, name = f"{T}.3", f"{T}.4", f"{T}.2"
        arms = []
        if conversion(text, col.type) not in (None, text):
            arms += bad_arm(col, text, present, name)
        arms += refused_arm(col, text, present, name)
        if not arms:
            continue
        position = f"transform({T}.1, {g.names(columns)}, {g.positions()}, toUInt32({NONE}))"
        value = f"{T}.2"
        read = (
            f"arrayMap({T} -> ({position}, {T}.1, if(JSONType({value}) = 'String', JSONExtractString({value}), "
            f"{value}), JSONType({value}) != 'Null'), {pairs})"
        )
        mine = f"arrayFilter({T} -> {T}.1 != {NONE}, {read})"
        found.append(
            f"arrayFilter({T} -> {T}.2 != '', arrayMap({T} -> ({T}.1, multiIf({', '.join(arms)}, '')), {mine}))"
        )
    if not found:
        return ""
    every = found[0] if len(found) == 1 else f"arrayConcat({', '.join(found)})"
    return f"notEmpty({every}), arraySort({every})[1].2"
