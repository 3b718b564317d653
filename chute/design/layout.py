"""Layouts and codecs: the sample written into candidate tables and measured on disk."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from chute.design.model import LayoutTrial
from chute.design.sample import Sample, Scratch
from chute.design.types import Typed, as_int, first_row, unwrap
from chute.engine import Engine
from chute.schema import PROVENANCE_NAMES
from chute.sql import TableName, quote_ident, quote_str

DEPENDENCY_DIMS = 12
"""Dependencies are looked for among the highest-cardinality dimensions only."""
CODEC_TABLE_COLUMNS = 200
"""Codec variants written per scratch table, to bound the memory of one insert."""
MAX_KEY_DIMENSIONS = 4
MAX_TIME_COLUMNS = 2
MAX_LAYOUTS = 7
COSTLIER_MUST_WIN_BY = 0.02
"""A costlier codec (or a longer key) is chosen only if it is at least 2% smaller."""
PARTITION_MIN_DAYS = 92
_WIDE = "SETTINGS min_bytes_for_wide_part = 0, min_rows_for_wide_part = 0"
"""Scratch tables keep a file per column, as big tables do, so sizes per column can be read."""

# Codec candidates per kind of data, cheapest first ("" is the default, LZ4).
INT_CODECS = (
    "",
    "T64, LZ4",
    "Delta, LZ4",
    "DoubleDelta",
    "ZSTD(1)",
    "T64, ZSTD(1)",
    "Delta, ZSTD(1)",
    "DoubleDelta, ZSTD(1)",
    "ZSTD(3)",
    "T64, ZSTD(3)",
    "Delta, ZSTD(3)",
)
FLOAT_CODECS = ("", "Gorilla", "ZSTD(1)", "Gorilla, ZSTD(1)", "ZSTD(3)")
GENERIC_CODECS = ("", "ZSTD(1)", "ZSTD(3)")

_INT_LIKE = re.compile(r"^(U?Int(8|16|32|64)|Bool|Date|Date32|DateTime(64)?(\(.*\))?|Enum(8|16)\(.*\))$")
_TIME = re.compile(r"^(Date|Date32|DateTime(64)?(\(.*\))?)$")


@dataclass(frozen=True)
class TypedColumn:
    name: str
    inferred: str
    typed: Typed

    @property
    def key_eligible(self) -> bool:
        """Plain, non-Nullable scalars with some repetition can sort the table."""
        base, _ = unwrap(self.typed.type, "LowCardinality")
        if self.typed.nulls or base.startswith(("Array", "Map", "Tuple", "Float", "Nullable", "JSON", "Object")):
            return False
        return self.typed.distinct >= 2

    @property
    def is_time(self) -> bool:
        return _TIME.match(self.typed.type) is not None

    @property
    def cost(self) -> int:
        """How cheap a key column is: integers before LowCardinality before text."""
        if _INT_LIKE.match(self.typed.type):
            return 0
        return 1 if self.typed.type.startswith("LowCardinality") else 2


def _codec_candidates(type_: str) -> tuple[str, ...]:
    base = type_
    for wrapper in ("Array", "Nullable"):
        base, _ = unwrap(base, wrapper)
    if base.startswith("LowCardinality"):
        return GENERIC_CODECS
    if _INT_LIKE.match(base):
        return INT_CODECS
    if base.startswith("Float"):
        return FLOAT_CODECS
    return GENERIC_CODECS


def _order_by_sql(key: Sequence[str]) -> str:
    if not key:
        return "tuple()"
    if len(key) == 1:
        return quote_ident(key[0])
    return "(" + ", ".join(quote_ident(k) for k in key) + ")"


def _column_sql(name: str, type_: str, codec: str, comment: str = "") -> str:
    sql = f"{quote_ident(name)} {type_}" + (f" COMMENT {quote_str(comment)}" if comment else "")
    return sql + (f" CODEC({codec})" if codec else "")


def _pick_codec(sizes: Mapping[str, int], candidates: Sequence[str]) -> str:
    """The smallest; a costlier codec must beat the cheaper ones by COSTLIER_MUST_WIN_BY."""
    best = candidates[0]
    for codec in candidates[1:]:
        if codec in sizes and sizes[codec] < sizes[best] * (1 - COSTLIER_MUST_WIN_BY):
            best = codec
    return best


class Measurer:
    """Writes the sample into scratch tables and reads their sizes from system tables."""

    def __init__(self, engine: Engine, scratch: Scratch, sample: Sample, columns: list[TypedColumn]) -> None:
        self.engine = engine
        self.scratch = scratch
        self.sample = sample
        self.columns = columns
        self.codec_sizes: dict[str, dict[str, dict[str, int]]] = {}
        """Per layout name: per column: bytes per codec."""

    def select_sql(self, names: Sequence[str]) -> str:
        exprs = ", ".join(
            f"{c.typed.convert(quote_ident(c.name))} AS {quote_ident(n)}"
            for c, n in zip(self.columns, names, strict=True)
        )
        return f"SELECT {exprs} FROM {quote_ident(self.sample.table)}"

    def _write(self, table: str, body: list[str], tail: str, select: str) -> None:
        self.engine.execute(
            f"CREATE TABLE {quote_ident(table)} ({', '.join(body)}) ENGINE = MergeTree {tail} {_WIDE}",
            context="design: creating a measuring table",
        )
        self.engine.execute(
            f"INSERT INTO {quote_ident(table)} {select}",
            settings={"max_insert_threads": 1},
            context="design: writing the sample",
        )
        parts = first_row(
            self.engine,
            "SELECT count() AS n FROM system.parts WHERE active "
            f"AND database = currentDatabase() AND table = {quote_str(table)}",
            "design: counting parts",
        )
        if as_int(parts.get("n")) > 1:
            self.engine.execute(f"OPTIMIZE TABLE {quote_ident(table)} FINAL", context="design: merging")

    def _column_bytes(self, table: str) -> dict[str, int]:
        rows = self.engine.rows(
            "SELECT name, data_compressed_bytes AS b FROM system.columns "
            f"WHERE database = currentDatabase() AND table = {quote_str(table)}"
        )
        return {str(r["name"]): as_int(r["b"]) for r in rows}

    def codecs(self, key: Sequence[str]) -> dict[str, dict[str, int]]:
        """Bytes of every codec of every column when the sample is sorted by `key`."""
        variants = [(i, codec) for i, c in enumerate(self.columns) for codec in _codec_candidates(c.typed.type)]
        sizes: dict[str, dict[str, int]] = {c.name: {} for c in self.columns}
        for start in range(0, len(variants), CODEC_TABLE_COLUMNS):
            for (i, codec), size in self._codec_table(key, variants[start : start + CODEC_TABLE_COLUMNS]):
                sizes[self.columns[i].name][codec] = size
        return sizes

    def _codec_table(self, key: Sequence[str], variants: list[tuple[int, str]]) -> list[tuple[tuple[int, str], int]]:
        """One scratch table holding `variants` (column index, codec), sorted by `key` (all columns)."""
        table = self.scratch.name("codecs")
        names = {f"v{j}": variant for j, variant in enumerate(variants)}
        body = [_column_sql(n, self.columns[i].typed.type, codec) for n, (i, codec) in names.items()]
        select = [quote_ident(f"c{i}") for i, _ in variants]
        index = {c.name: i for i, c in enumerate(self.columns)}
        keys = [f"c{index[k]}" for k in key]
        body += [f"{quote_ident(k)} {self.columns[index[n]].typed.type}" for k, n in zip(keys, key, strict=True)]
        select += [quote_ident(k) for k in keys]
        inner = self.select_sql([f"c{i}" for i in range(len(self.columns))])
        try:
            self._write(table, body, f"ORDER BY {_order_by_sql(keys)}", f"SELECT {', '.join(select)} FROM ({inner})")
            return [(names[n], size) for n, size in self._column_bytes(table).items() if n in names]
        finally:
            self.scratch.drop(table)

    def layout(self, label: str, key: Sequence[str]) -> LayoutTrial:
        """The sample written into `key` with the best codec per column, measured on disk."""
        sizes = self.codecs(key)
        chosen = {c.name: _pick_codec(sizes[c.name], _codec_candidates(c.typed.type)) for c in self.columns}
        order = _order_by_sql(key)
        self.codec_sizes[label] = sizes
        table = self.scratch.name("layout")
        body = [_column_sql(c.name, c.typed.type, chosen[c.name]) for c in self.columns]
        try:
            self._write(table, body, f"ORDER BY {order}", self.select_sql([c.name for c in self.columns]))
            on_disk = self.bytes_on_disk(table)
            column_bytes = self._column_bytes(table)
        finally:
            self.scratch.drop(table)
        return LayoutTrial(label, order, on_disk, self.sample.rows, column_bytes, chosen)

    def final(self, columns: Sequence[tuple[str, str, str]], order_by: str, partition_by: str | None) -> int:
        """The sample written into the proposed DDL itself: proves it valid and measures it."""
        table = TableName(None, self.scratch.name("final"))
        ddl = create_table_ddl(table, columns, order_by, partition_by)
        self.engine.execute(f"{ddl}\n{_WIDE}", context="design: the proposed DDL does not create")
        self.engine.execute(
            f"INSERT INTO {table.sql} {self.select_sql([c.name for c in self.columns])}",
            context="design: the sample does not fit the proposed table",
        )
        return self.bytes_on_disk(table.table)

    def bytes_on_disk(self, table: str) -> int:
        row = first_row(
            self.engine,
            "SELECT sum(bytes_on_disk) AS b FROM system.parts WHERE active "
            f"AND database = currentDatabase() AND table = {quote_str(table)}",
            "design: reading sizes",
        )
        return as_int(row.get("b"))


# -- ORDER BY candidates ------------------------------------------------------------


def _dependents(
    engine: Engine, sample: Sample, dims: list[TypedColumn], columns: list[TypedColumn]
) -> dict[str, set[str]]:
    """For the highest-cardinality dimensions, the other columns each determines."""
    others = [c for c in columns if c.name not in PROVENANCE_NAMES and c.typed.distinct != 1]
    rows = quote_ident(sample.table)
    found: dict[str, set[str]] = {d.name: set() for d in dims}
    for dim in sorted(dims, key=lambda c: -c.typed.distinct)[:DEPENDENCY_DIMS]:
        d = quote_ident(dim.name)
        pairs = ", ".join(f"uniq({d}, {quote_ident(c.name)}) AS p{i}" for i, c in enumerate(others))
        row = first_row(engine, f"SELECT uniq({d}) AS d, {pairs} FROM {rows}", "design: dependencies")
        limit = as_int(row["d"]) * 1.01
        found[dim.name] = {c.name for i, c in enumerate(others) if c is not dim and as_int(row[f"p{i}"]) <= limit}
    return found


def _chain(engine: Engine, sample: Sample, dims: list[TypedColumn]) -> list[TypedColumn]:
    """Dimensions low to high cardinality, skipping those the earlier ones determine."""
    chain: list[TypedColumn] = []
    groups = 1
    for column in dims:
        if len(chain) == MAX_KEY_DIMENSIONS or groups > sample.rows / 2:
            break
        args = ", ".join(quote_ident(c.name) for c in [*chain, column])
        row = first_row(engine, f"SELECT uniq({args}) AS d FROM {quote_ident(sample.table)}", "design: cardinality")
        combined = as_int(row.get("d"))
        if combined <= groups * 1.01:
            continue
        chain.append(column)
        groups = combined
    return chain


def key_candidates(engine: Engine, sample: Sample, columns: list[TypedColumn]) -> list[tuple[str, list[str]]]:
    """ORDER BY candidates from cardinalities and dependencies, time last; unsorted as the baseline.

    A column that determines others (a user id fixing name, country, ...) is
    worth sorting by: those others become runs of one value. Columns that
    determine nothing (a random measure) only break runs up.
    """
    eligible = [c for c in columns if c.key_eligible and c.name not in PROVENANCE_NAMES]
    position = {c.name: i for i, c in enumerate(columns)}
    times = sorted((c for c in eligible if c.is_time), key=lambda c: -c.typed.distinct)[:MAX_TIME_COLUMNS]
    dims = sorted(
        (c for c in eligible if not c.is_time and c.typed.distinct <= sample.rows / 2),
        key=lambda c: (c.typed.distinct, c.cost, position[c.name]),
    )
    dependents = _dependents(engine, sample, dims, columns)
    carriers = [c for c in dims if dependents[c.name]]
    by_reach = sorted(carriers, key=lambda c: (-len(dependents[c.name]), c.cost, -c.typed.distinct))
    prefixes = [(f"{c.name} (determines {len(dependents[c.name])} columns)", [c.name]) for c in by_reach[:2]]
    # The truly highest-cardinality column that can sort (dims leave out the near-unique ones).
    sortable = [c for c in eligible if not c.is_time]
    if not prefixes and sortable:
        highest = max(sortable, key=lambda c: (c.typed.distinct, -c.cost, -position[c.name]))
        prefixes = [(f"highest-cardinality column ({highest.typed.distinct:,} distinct)", [highest.name])]
    prefixes.append(("columns that determine others, low to high", [c.name for c in _chain(engine, sample, carriers)]))
    prefixes.append(("low to high cardinality", [c.name for c in _chain(engine, sample, dims)]))
    found: list[tuple[str, list[str]]] = []
    for tail in [[t.name] for t in times] or [[]]:
        then = f", then {tail[0]}" if tail else ""
        found += [(f"{label}{then}", [*prefix, *tail]) for label, prefix in prefixes if prefix]
    if times:
        found.append((f"{times[0].name} only", [times[0].name]))
    unique: dict[tuple[str, ...], str] = {}
    for label, key in found:
        if key:
            unique.setdefault(tuple(key), label)
    ordered = [(label, list(key)) for key, label in unique.items()][: MAX_LAYOUTS - 1]
    return [*ordered, ("unsorted", [])]


def pick_winner(trials: list[LayoutTrial], times: set[str]) -> tuple[LayoutTrial, str]:
    """Smallest on disk; within COSTLIER_MUST_WIN_BY, a key ending in time, then the shorter key."""
    smallest = min(trials, key=lambda t: t.bytes_on_disk)

    def preference(t: LayoutTrial) -> tuple[int, int, int]:
        key = [] if t.order_by == "tuple()" else t.order_by.strip("()").split(", ")
        ends_in_time = bool(key) and key[-1] in times
        return (0 if ends_in_time else 1, len(key), t.bytes_on_disk)

    close = [t for t in trials if t.bytes_on_disk <= smallest.bytes_on_disk / (1 - COSTLIER_MUST_WIN_BY)]
    winner = min(close, key=preference)
    why = f"{winner.name}, ORDER BY {winner.order_by}: {winner.bytes_per_row:.2f} bytes/row on the sample"
    unsorted = next((t for t in trials if t.order_by == "tuple()"), None)
    if unsorted is not None and unsorted is not winner:
        why += f"; unsorted takes {unsorted.bytes_on_disk / max(winner.bytes_on_disk, 1):.2f}x its size"
    others = sorted((t for t in trials if t is not winner), key=lambda t: t.bytes_on_disk)
    if others:
        nxt = others[0]
        ratio = nxt.bytes_on_disk / max(winner.bytes_on_disk, 1)
        why += f"; next: {nxt.name} (ORDER BY {nxt.order_by}) at {ratio:.3f}x the size"
    if winner is not smallest:
        gain = 1 - smallest.bytes_on_disk / winner.bytes_on_disk
        why += f"; preferred to {smallest.name}, only {gain:.1%} smaller, for a key that ends in time or is shorter"
    return winner, why


def partition(engine: Engine, sample: Sample, columns: list[TypedColumn], key: str) -> tuple[str | None, str]:
    """PARTITION BY month (or year) of the time column when the sample spans months."""
    times = [c for c in columns if c.is_time and not c.typed.nulls and c.name not in PROVENANCE_NAMES]
    if not times:
        return None, "no non-Nullable time column: no PARTITION BY"
    column = next((c for c in times if quote_ident(c.name) in key), times[0])
    value = column.typed.convert(quote_ident(column.name))
    row = first_row(
        engine,
        f"SELECT dateDiff('day', min({value}), max({value})) AS days, toString(min({value})) AS lo, "
        f"toString(max({value})) AS hi FROM {quote_ident(sample.table)}",
        "design: time span",
    )
    days = as_int(row.get("days"))
    span = f"{column.name} spans {days} days ({row.get('lo')} .. {row.get('hi')})"
    if days <= PARTITION_MIN_DAYS:
        return None, f"{span}: no PARTITION BY (under {PARTITION_MIN_DAYS} days)"
    if days > 20 * 366:
        return f"toYear({quote_ident(column.name)})", f"{span}: one partition per year"
    return f"toYYYYMM({quote_ident(column.name)})", f"{span}: one partition per month"


def create_table_ddl(
    table: TableName,
    columns: Sequence[tuple[str, str, str]],
    order_by: str,
    partition_by: str | None,
    comments: Mapping[str, str] | None = None,
) -> str:
    """CREATE TABLE from (name, type, codec) triples; ORDER BY/PARTITION BY are SQL; `comments`
    by column name (a NULL marker the load reads, schema.marker_comment)."""
    body = ",\n    ".join(_column_sql(n, t, c, (comments or {}).get(n, "")) for n, t, c in columns)
    sql = f"CREATE TABLE IF NOT EXISTS {table.sql}\n(\n    {body}\n)\nENGINE = MergeTree"
    if partition_by:
        sql += f"\nPARTITION BY {partition_by}"
    return sql + f"\nORDER BY {order_by}"
