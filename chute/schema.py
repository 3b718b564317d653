"""Schema inference, table DDL, and the structure that casts input to the table."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chute.engine import Engine
from chute.errors import ChuteError
from chute.sql import TableName, internal, quote_ident, quote_str

RowsQuery = Callable[[str, Any, str], list[dict[str, Any]]]
"""A target's or engine's `rows(sql, settings, context)`."""

PROVENANCE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("_source", "LowCardinality(String)"),
    ("_source_mtime", "DateTime64(3, 'UTC')"),
    ("_source_row", "UInt64"),
    ("_load_id", "LowCardinality(String)"),
)
PROVENANCE_NAMES = frozenset(name for name, _ in PROVENANCE_COLUMNS)

# Inference makes a column Nullable only where the sample holds a null.
INFERENCE_SETTINGS = {"schema_inference_make_columns_nullable": "auto"}
TRIMMED_FOR_INFERENCE = {"input_format_csv_trim_whitespaces": 1}
"""Names and types are inferred from trimmed CSV fields (` 7 ` is a number, ` id` names `id`),
while the load itself keeps a text value's spaces (chute.load.options.format_settings)."""

NULL_MARKERS: tuple[str, ...] = (
    "NA",
    "N/A",
    "n/a",
    "NULL",
    "null",
    "None",
    "<NA>",
    "#N/A",
    "#N/A N/A",
    "#NA",
    "-1.#IND",
    "-1.#QNAN",
    "1.#IND",
    "1.#QNAN",
    "NaN",
    "-NaN",
    "nan",
    "-nan",
)
"""How CSV/TSV files write a missing value (pandas' `na_values`, less the empty field and `\\N`,
which the engine reads as NULL itself). A Float column's `nan` parses: there it is a value."""
_MARKER_COMMENT = "chute: NULL written as "
"""A column's comment naming its NULL marker: `chute: NULL written as NA`."""


def marker_comment(marker: str) -> str:
    return _MARKER_COMMENT + marker


def marker_of(comment: str) -> str:
    """The NULL marker a column's comment names ('' for none); only markers of NULL_MARKERS count."""
    if comment.startswith(_MARKER_COMMENT) and comment[len(_MARKER_COMMENT) :] in NULL_MARKERS:
        return comment[len(_MARKER_COMMENT) :]
    return ""


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    default_kind: str = ""  # "", DEFAULT, MATERIALIZED, ALIAS, EPHEMERAL
    default_expression: str = ""
    comment: str = ""

    @property
    def null_marker(self) -> str:
        """The text that stands for NULL in this column of a CSV/TSV file ('' for none; see NULL_MARKERS)."""
        typed = self.type.startswith("Nullable(") and self.type != "Nullable(String)"
        return marker_of(self.comment) if typed else ""

    @property
    def insertable(self) -> bool:
        return self.default_kind not in ("MATERIALIZED", "ALIAS")

    def structure_sql(self) -> str:
        """The column as written in a file() structure, defaults included."""
        sql = f"{quote_ident(self.name)} {self.type}"
        if self.default_kind == "DEFAULT" and self.default_expression:
            sql += f" DEFAULT {self.default_expression}"
        return sql


def structure(columns: list[Column]) -> str:
    return ", ".join(c.structure_sql() for c in columns)


def describe(
    engine: Engine,
    table_expression: str,
    context: str,
    sample_rows: int | None = None,
    format_settings: Mapping[str, str | int | float] | None = None,
) -> list[Column]:
    """Column names and types the engine infers for a table expression."""
    settings: dict[str, str | int | float] = {**INFERENCE_SETTINGS, **(format_settings or {}), **TRIMMED_FOR_INFERENCE}
    if sample_rows is not None:
        settings["input_format_max_rows_to_read_for_schema_inference"] = sample_rows
    hints: list[str] = []
    while True:
        if hints:
            settings["schema_inference_hints"] = ", ".join(hints)
        try:
            rows = engine.rows(f"DESCRIBE {table_expression}", settings=settings, context=context)
        except ChuteError as exc:
            column = _signed_and_unsigned(str(exc))
            if column is None or len(hints) >= MAX_INFERENCE_HINTS or any(h.startswith(column) for h in hints):
                raise
            hints.append(f"{column} Int128")
            continue
        return [Column(r["name"], r["type"]) for r in rows]


MAX_INFERENCE_HINTS = 64
_MIXED_SIGN = re.compile(
    r"Automatically defined type U?Int64 for column '((?:[^'\\]|\\.)*)' in row \d+ differs from type "
    r"defined by previous rows: U?Int64"
)


def _signed_and_unsigned(message: str) -> str | None:
    """The column (quoted) whose integers the engine's inference found both as Int64 and as
    UInt64 (a value past 2^63 beside small ones): it fails to merge the two instead of widening
    them. Such a column is inferred Int128 (a hint), which holds both."""
    match = _MIXED_SIGN.search(message)
    if match is None:
        return None
    return quote_ident(match.group(1).replace("\\'", "'"))


def table_columns(rows: RowsQuery, table: TableName, ordered: bool = True) -> list[Column] | None:
    """The table's columns, or None when the table does not exist.

    `ordered` sorts by `position`, which servers before 19.x lack (their
    system.columns lists columns in table order anyway).
    """
    database = quote_str(table.database) if table.database else "currentDatabase()"
    found = rows(
        "SELECT name, type, default_kind, default_expression, comment FROM system.columns "
        f"WHERE database = {database} AND table = {quote_str(table.table)}" + (" ORDER BY position" if ordered else ""),
        None,
        f"reading columns of {table}",
    )
    if not found:
        return None
    return [
        Column(r["name"], r["type"], r["default_kind"], r["default_expression"], str(r.get("comment") or ""))
        for r in found
    ]


# Codecs for provenance columns of tables chute creates: row numbers count up and a
# file's mtime repeats, so Delta makes them nearly free on disk (measured: 4.4 MB -> 0.4 MB
# per million rows, same insert time).
PROVENANCE_CODECS = {"_source_row": "CODEC(Delta(8), LZ4)", "_source_mtime": "CODEC(Delta(8), LZ4)"}


def create_table_sql(
    table: TableName,
    columns: list[Column],
    order_by: str,
    partition_by: str | None,
    codecs: bool = False,
) -> str:
    """MergeTree DDL; ORDER BY and PARTITION BY are SQL expressions of the user.
    With `codecs` (the target has them), provenance columns get theirs."""
    body = ",\n    ".join(
        c.structure_sql()
        + (f" COMMENT {quote_str(c.comment)}" if c.comment else "")
        + (f" {PROVENANCE_CODECS[c.name]}" if codecs and c.name in PROVENANCE_CODECS else "")
        for c in columns
    )
    sql = f"CREATE TABLE IF NOT EXISTS {table.sql}\n(\n    {body}\n)\nENGINE = MergeTree"
    if partition_by:
        sql += f"\nPARTITION BY {partition_by}"
    sql += f"\nORDER BY {order_by}"
    if not _nullable_safe(order_by, columns):
        sql += "\nSETTINGS allow_nullable_key = 1"
    return sql


def _nullable_safe(order_by: str, columns: list[Column]) -> bool:
    """No Nullable column is named in the ORDER BY (as a whole identifier)."""
    nullable = {c.name for c in columns if c.type.startswith("Nullable(")}
    named = {quoted or plain for quoted, plain in re.findall(r"`([^`]+)`|([A-Za-z_][A-Za-z0-9_]*)", order_by)}
    return not (nullable & named)


def with_provenance(columns: list[Column], extra: Sequence[tuple[str, str]] = ()) -> list[Column]:
    """`columns` plus the provenance columns (and a source's `extra` ones) they lack."""
    present = {c.name for c in columns}
    return columns + [Column(n, t) for n, t in (*PROVENANCE_COLUMNS, *extra) if n not in present]


_NOT_NULLABLE = ("Array(", "Map(", "Tuple(", "Nested(", "LowCardinality(", "Nullable(", "Object(", "JSON", "Variant(")


def nullable(type_sql: str) -> str:
    """`type_sql` as a type that holds NULL, where the engine has one (not for arrays, maps, ...)."""
    return type_sql if type_sql.startswith(_NOT_NULLABLE) or type_sql == "Dynamic" else f"Nullable({type_sql})"


def with_null_markers(
    engine: Engine,
    table_expression: str,
    columns: list[Column],
    context: str,
    format_settings: Mapping[str, str | int | float] | None = None,
    sample_rows: int | None = None,
) -> list[Column]:
    """`columns` of a CSV/TSV file, where a text column's only values that are not of another
    type are one NULL marker (`NA`, `NULL`, ... see NULL_MARKERS): that column typed
    Nullable(<the other values' type>), its comment naming the marker.

    The engine counts the markers over the rows inference reads, then infers again with the
    marker as the format's NULL; a column still inferred as text keeps its text (its `NA`
    is a value, as a country code may be)."""
    texts = [c for c in columns if c.type in ("String", "Nullable(String)")]
    if not texts:
        return columns
    markers = ", ".join(quote_str(m) for m in NULL_MARKERS)
    counts = [
        f"groupUniqArrayIf({quote_ident(c.name)}, {quote_ident(c.name)} IN ({markers})) AS m{i}"
        for i, c in enumerate(texts)
    ]
    found = _sample_as_text(engine, table_expression, texts, counts, context, format_settings, sample_rows)
    single = {c.name: found[0][f"m{i}"][0] for i, c in enumerate(texts) if found and len(found[0][f"m{i}"]) == 1}
    if not single:
        return columns
    typed: dict[str, Column] = {}
    for marker in sorted(set(single.values())):
        as_null = {"format_csv_null_representation": marker, "format_tsv_null_representation": marker}
        again = describe(engine, table_expression, context, sample_rows, {**(format_settings or {}), **as_null})
        for c in again:
            inner = c.type[len("Nullable(") : -1] if c.type.startswith("Nullable(") else c.type
            if single.get(c.name) == marker and inner != "String" and not inner.startswith(_NOT_NULLABLE):
                typed[c.name] = Column(c.name, f"Nullable({inner})", comment=marker_comment(marker))
    return [typed.get(c.name, c) for c in columns]


_NUMBER = re.compile(r"^(Nullable\()?(U?Int\d+|Float\d+|Decimal.*)\)?$")
_UNFAITHFUL = (
    # a sign the number drops (`+4930`), a zero it drops (`00123`), or more digits than a Float64 keeps
    "match({c}, '^\\\\s*([+]|-?0[0-9])') OR match({c}, '^\\\\s*-?[0-9]{{16,}}\\\\s*$')"
)


def with_faithful_numbers(
    engine: Engine,
    table_expression: str,
    columns: list[Column],
    context: str,
    format_settings: Mapping[str, str | int | float] | None = None,
    sample_rows: int | None = None,
) -> list[Column]:
    """`columns` of a CSV/TSV file, where a column inferred as a number holds text the number
    would not give back (zip codes `00123`, phone numbers `+4930`, integers of more digits
    than a Float64 keeps): that column typed String, as JSON's inference has such values."""
    numbers = [c for c in columns if _NUMBER.match(c.type)]
    if not numbers:
        return columns
    # One test over an array of the columns, not one per column: the engine plans a regex test per
    # column in ~3 ms (10,000 columns: half a minute), an element of an array in microseconds.
    value = internal("value")
    values = ", ".join(f"ifNull({quote_ident(c.name)}, '0')" for c in numbers)
    test = f"sumForEach(arrayMap({value} -> toUInt64({_UNFAITHFUL.format(c=value)}), [{values}])) AS n"
    found = _sample_as_text(engine, table_expression, numbers, [test], context, format_settings, sample_rows)
    counts = found[0]["n"] if found else []
    text = {c.name for c, n in zip(numbers, counts, strict=False) if int(n)}
    return [
        Column(c.name, "Nullable(String)" if c.type.startswith("Nullable(") else "String") if c.name in text else c
        for c in columns
    ]


def _sample_as_text(
    engine: Engine,
    table_expression: str,
    columns: list[Column],
    aggregates: list[str],
    context: str,
    format_settings: Mapping[str, str | int | float] | None,
    sample_rows: int | None,
) -> list[dict[str, Any]]:
    """`aggregates` over the rows inference reads, `columns` read as their text."""
    settings: dict[str, str | int | float] = {**INFERENCE_SETTINGS, **(format_settings or {}), **TRIMMED_FOR_INFERENCE}
    limit = sample_rows or int(settings.get("input_format_max_rows_to_read_for_schema_inference", 25_000))
    structure_sql = ", ".join(f"{quote_ident(c.name)} Nullable(String)" for c in columns)
    return engine.rows(
        f"SELECT {', '.join(aggregates)} FROM (SELECT * FROM {table_expression} LIMIT {int(limit)})",
        settings={**settings, "schema_inference_hints": structure_sql},
        context=context,
    )


def unnamed(columns: Sequence[Column]) -> bool:
    """Columns the engine named c1, c2, ... itself: a CSV/TSV file read without a header."""
    return bool(columns) and [c.name for c in columns] == [f"c{i}" for i in range(1, len(columns) + 1)]


def union_columns(
    engine: Engine, per_file: Sequence[list[Column]], kept: list[tuple[str, str, str]] | None = None
) -> list[Column]:
    """The columns of several files in one list: every name in the order first seen; a type
    that differs between files as the common type of the two (`_common_type`); a column some
    files lack, Nullable (their rows hold no value for it). Where two types have none (a number
    and text), the first stays and (name, kept, other) goes to `kept`: a later file's stray
    `"oops"` is a rejected row, it does not make a number column text."""
    merged: dict[str, Column] = {}
    seen_in: dict[str, int] = {}
    for columns in per_file:
        for c in columns:
            seen_in[c.name] = seen_in.get(c.name, 0) + 1
            before = merged.get(c.name)
            if before is None or before.type == c.type:
                merged[c.name] = before or c
                continue
            comment = before.comment if before.comment == c.comment or not c.comment else ""
            common = _common_type(engine, before.type, c.type)
            if common is None:
                common = nullable(before.type) if "Nullable(" in c.type else before.type
                if kept is not None:
                    kept.append((c.name, before.type, c.type))
            merged[c.name] = Column(c.name, common, comment=comment or before.comment)
    return [
        c if seen_in[c.name] == len(per_file) else Column(c.name, nullable(c.type), comment=c.comment)
        for c in merged.values()
    ]


def _common_type(engine: Engine, a: str, b: str) -> str | None:
    """The engine's common type of `a` and `b` (a UNION ALL's: `if` returns the first branch's
    type for some arrays, maps and tuples); where the engine has none, what its inference makes
    of both values in one file where that loses nothing: Float64 for integers and floats, arrays
    of their elements' common type, String for objects (Map, Tuple, JSON). None for the rest (a
    number and text or a date). Nullable if either is."""
    try:
        rows = engine.rows(
            f"SELECT toTypeName(x) AS t FROM (SELECT defaultValueOfTypeName({quote_str(a)}) AS x "
            f"UNION ALL SELECT defaultValueOfTypeName({quote_str(b)}) AS x) LIMIT 1",
            settings={"use_variant_as_common_type": 0},
            context="the common type of a column's inferred types",
        )
        return str(rows[0]["t"])
    except ChuteError:  # no common type (a number and a date, Int64 and Float64)
        pass
    held = [t[len("Nullable(") : -1] if t.startswith("Nullable(") else t for t in (a, b)]
    if all(_NUMBER.match(t) for t in held) and any(t.startswith("Float") for t in held):
        common: str | None = "Float64"
    elif all(t.startswith("Array(") for t in held):
        element = _common_type(engine, held[0][len("Array(") : -1], held[1][len("Array(") : -1])
        common = f"Array({element})" if element is not None else None
    elif any(re.match(r"(Map|Tuple|Object|JSON)\b", t) for t in held):
        common = "String"  # (objects whose keys or values differ: their JSON text holds each)
    else:
        return None
    return nullable(common) if common is not None and held != [a, b] else common


INFER_FILES = 8
"""Files whose schema inference reads when it makes a table: the first and others spread over the list."""
INFER_MORE_ROWS = 2_000
"""Rows inference reads from each of the other files (a field that appears later is seen there)."""


def spread(count: int, take: int) -> list[int]:
    """`take` indices spread evenly over range(count) (the first and the last among them), then the rest in order."""
    if count <= take:
        return list(range(count))
    first = sorted({round(i * (count - 1) / (take - 1)) for i in range(take)}) if take > 1 else [0]
    chosen = set(first)
    return first + [i for i in range(count) if i not in chosen]


def without_nullable(type_sql: str) -> str:
    """`type_sql` with every Nullable(...) taken off, at any depth (`Array(Nullable(Int32))` is
    `Array(Int32)`, `LowCardinality(Nullable(String))` is `LowCardinality(String)`); quoted text
    (an Enum's names, a time zone) is left alone."""
    out: list[str] = []
    closers: list[bool] = []  # per open parenthesis: whether it is a Nullable( being dropped
    i = 0
    while i < len(type_sql):
        ch = type_sql[i]
        if ch == "'":
            end = i + 1
            while end < len(type_sql) and type_sql[end] != "'":
                end += 2 if type_sql[end] == "\\" else 1
            out.append(type_sql[i : end + 1])
            i = end + 1
            continue
        if type_sql.startswith("Nullable(", i) and (
            i == 0 or not (type_sql[i - 1].isalnum() or type_sql[i - 1] == "_")
        ):
            closers.append(True)
            i += len("Nullable(")
            continue
        if ch == "(":
            closers.append(False)
        elif ch == ")" and closers and closers.pop():
            i += 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)
