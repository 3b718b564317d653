"""What a ClickHouse server version can do, held in one place.

New version-dependent behaviour gets a field here rather than a loose
`if version >= ...` somewhere in the loader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DECIMAL = re.compile(r"Decimal\(\s*(\d+)\s*,\s*\d+\s*\)")
"""A Decimal(P, S) type, P in group 1."""
DATETIME64 = re.compile(r"DateTime64\(\s*\d+\s*(,\s*('[^']*'))?\s*\)")
"""A DateTime64 type, its time zone (if any) in group 2."""
TYPE_DEPTH_MAX = 149
"""The deepest nesting of parentheses in a type that the engine reads back from a table's parts:
its type parser stops at an AST depth of 300 (two a level; measured on chDB 26.9 with Tuple,
Array, Map and Nullable). A part written with a deeper type is "broken-on-start" at the engine's
next start, its rows gone from the table, though the insert and the first reads went well."""


@dataclass(frozen=True)
class Capabilities:
    version: tuple[int, ...]
    low_cardinality: bool
    """LowCardinality columns without the experimental flag (19.x)."""
    datetime64: bool
    """DateTime64 (20.1)."""
    bool_type: bool
    """Bool as its own type (21.12); before it, UInt8."""
    lightweight_delete: bool
    """DELETE FROM (23.3 generally available)."""
    mutations_sync: bool
    """The mutations_sync setting (20.1); before it, poll system.mutations."""
    dedup_token: bool
    """insert_deduplication_token (22.2)."""
    codecs: bool
    """CODEC(...) in column definitions (19.1)."""
    ip_types: bool
    """IPv4 / IPv6 (19.3)."""
    map_type: bool
    """Map(K, V) (21.1)."""
    url_compression: bool
    """url(URL, format, structure, compression) (21.1); before it, three arguments only."""
    reads_header_files: bool
    """INSERT ... SELECT FROM url(..., 'CSVWithNames') keeps the first data row (21.1;
    measured on 18.16: it drops it)."""
    s3_function: bool
    """s3(URL, key, secret, format, structure[, compression]) (20.1: keys and compression;
    19.15's experimental s3() took neither)."""
    s3_cluster: bool
    """s3Cluster(cluster, URL, ...): the nodes of a cluster read (21.5)."""
    s3_row_number: bool
    """`_row_number` (the row's number in its object) from s3()/s3Cluster() for JSON lines,
    CSV, TSV, Parquet and Avro. Not in the s3 docs' list of virtual columns; fixed in 2025
    and in 26.4 (PRs 87220, 100116), still asked for text formats in 26.2 (issue 98009); run
    and verified on 26.9 (the embedded engine), so gated there until an older release is shown."""
    hides_secrets: bool
    """Secret keys of s3() shown as [HIDDEN] in query_log, server logs and errors (22.11)."""
    date32: bool
    """Date32 (21.9); before it, Date (1970-01-01 to 2149-06-06)."""
    decimal256: bool
    """Decimal with a precision past 38 (Decimal256, 20.8); before it, `[69] Wrong precision`."""
    checked_typed_reads: bool
    """What chute's check of a typed file's values needs on the server reading it (Date32,
    accurateCastOrNull, toUnixTimestamp64Second, throwIf with a message): 21.9."""
    table_totals: bool
    """system.tables has total_rows and total_bytes (gated at 20.5; a server past it that lacks
    them fails the read, and the parts are summed as on older ones)."""
    precise_floats: bool
    """Input formats parse Float32/Float64 text to the nearest double (26.7, PR 109086). Before,
    a fast parser that is off by an ulp now and then: 18.16 made 52 of 148,908 JSON values with two
    decimals differ (1.68 as 1.6800000000000002), so a server parsing text is not chosen for them."""
    csv_text_like_engine: bool
    """Its CSV parser reads text columns as the embedded engine does: an unquoted `\\N` is a NULL
    (the default '' in a String column) and an unquoted empty field a NULL in a Nullable one (PR 6055,
    merged for 19.13; gated there). Measured on 18.16: `\\N` stays the two characters, and the empty
    field is ''."""
    tsv_text_like_engine: bool
    """Its TSV parser keeps the backslash of an escape it does not know (`\\q` is `\\q`, as in the
    embedded engine; PR 11208, merged in May 2020; gated at 20.5, not verified on a release in
    between). Measured on 18.16: `q\\qz` is `qqz` and `\\u0041` is `u0041`."""
    nested_tuples: bool
    """A (named) Tuple inside Array(...), Nullable(...) or another Tuple (issue 15587: refused
    up to 20.10; gated at 21.1, not verified on a release in between). Measured on 18.16: a
    named Tuple only as a column's whole type ([62] inside Array or Nullable), and an unnamed
    Tuple inside Array is split into Nested columns `a.1`, `a.2` (issue 3840)."""
    compressed_output: bool
    """`compress=1` answers are whole (gated at 19.1, not verified on a release in between).
    Measured on 18.16: an answer under 1 MiB uncompressed (its first buffer never filled) comes
    out empty, with status 200, so a copy streams its plain Native and compresses it itself."""

    @classmethod
    def for_version(cls, text: str) -> Capabilities:
        parts = tuple(int(p) for p in re.findall(r"\d+", text)[:3]) or (0,)
        v = parts + (0,) * (3 - len(parts))
        return cls(
            version=v,
            low_cardinality=v >= (19, 0, 0),
            datetime64=v >= (20, 1, 0),
            bool_type=v >= (21, 12, 0),
            lightweight_delete=v >= (23, 3, 0),
            mutations_sync=v >= (20, 1, 0),
            dedup_token=v >= (22, 2, 0),
            codecs=v >= (19, 1, 0),
            ip_types=v >= (19, 3, 0),
            map_type=v >= (21, 1, 0),
            url_compression=v >= (21, 1, 0),
            reads_header_files=v >= (21, 1, 0),
            s3_function=v >= (20, 1, 0),
            s3_cluster=v >= (21, 5, 0),
            s3_row_number=v >= (26, 9, 0),
            hides_secrets=v >= (22, 11, 0),
            date32=v >= (21, 9, 0),
            decimal256=v >= (20, 8, 0),
            checked_typed_reads=v >= (21, 9, 0),
            nested_tuples=v >= (21, 1, 0),
            csv_text_like_engine=v >= (19, 13, 0),
            tsv_text_like_engine=v >= (20, 5, 0),
            precise_floats=v >= (26, 7, 0),
            table_totals=v >= (20, 5, 0),
            compressed_output=v >= (19, 1, 0),
        )

    @property
    def version_text(self) -> str:
        return ".".join(str(p) for p in self.version)

    def adapt_type(self, type_sql: str) -> str:
        """A type the server can store, for a type the embedded engine inferred."""
        return self.adapt_type_noted(type_sql)[0]

    def adapt_type_noted(self, type_sql: str, data: bool = False) -> tuple[str, str]:
        """(a type the server can store, why it differs from `type_sql`: "" when it does not).

        `data`: the type of a column of the user's rows, which must hold every value as it
        is. Without DateTime64 (before 20.1) such a column is String, holding each time's
        exact text: DateTime would drop the fraction of a second and clamp the years past
        1970..2106, without a word. chute's own columns (ledger, `_source_mtime`) take
        DateTime: whole seconds are what they need."""
        depth = type_depth(type_sql)
        if data and depth > TYPE_DEPTH_MAX:
            text = "Nullable(String)" if type_sql.startswith("Nullable(") else "String"
            return text, (
                f"nested {depth} levels deep, past the {TYPE_DEPTH_MAX} the engine reads back from a table's parts: "
                "String holding the value's JSON text"
            )
        narrowed = DECIMAL.sub(lambda m: "String" if int(m.group(1)) > 38 else m.group(0), type_sql)
        if data and not self.decimal256 and narrowed != type_sql:
            t, why = self.adapt_type_noted(narrowed, data)
            note = f"server {self.version_text} has no Decimal of more than 38 digits: String holding each exact number"
            return t, f"{note}; {why}" if why else note
        if data and not self.datetime64 and DATETIME64.search(type_sql):
            t, why = self.adapt_type_noted(DATETIME64.sub("String", type_sql))
            note = (
                f"server {self.version_text} has no DateTime64: String holding each time's exact text "
                "(a column you create as DateTime would take whole seconds only)"
            )
            return t, f"{note}; {why}" if why else note
        t, why = self._adapt(type_sql), ""
        if not self.date32 and re.search(r"\bDate32\b", type_sql):
            t = re.sub(r"\bDate32\b", "Date", t)
            why = (
                f"server {self.version_text} has no Date32: Date instead; a date outside "
                "1970-01-01..2149-06-06 is a rejected row with the value named, nothing is clamped"
                + (
                    "; this server shows dates past 2105 wrong (stored right: toUInt16 gives the day)"
                    if self.version < (19, 0, 0)
                    else ""
                )
            )
        if not self.nested_tuples and _tuple_inside(t):
            t = "Nullable(String)" if t.startswith("Nullable(") else "String"
            why = (
                f"server {self.version_text} has no Tuple inside Array or Nullable: String "
                "holding the value's JSON text (JSON lines, Parquet, ORC, Arrow, Native)"
            )
        if t != type_sql and not why:
            why = f"server {self.version_text} has no {type_sql}"
        return t, why

    def _adapt(self, type_sql: str) -> str:
        t = type_sql
        if not self.low_cardinality:
            t = _unwrap(t, "LowCardinality")
        if not self.bool_type:
            t = re.sub(r"\bBool\b", "UInt8", t)
        if not self.datetime64:
            t = DATETIME64.sub(lambda m: f"DateTime({m.group(2)})" if m.group(2) else "DateTime", t)
        if not self.ip_types:
            t = re.sub(r"\bIPv[46]\b", "String", t)
        if not self.map_type and t.startswith("Map("):
            t = "String"
        if t.startswith(("JSON", "Object(", "Dynamic", "Variant(")):
            t = "String"
        return t


def type_depth(type_sql: str) -> int:
    """The deepest nesting of parentheses in a type, names in quotes (a tuple element's) aside."""
    depth = deepest = 0
    quote = ""
    escaped = False
    for ch in type_sql:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "`'\"":
            quote = ch
        elif ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
    return deepest


def _tuple_inside(type_sql: str) -> bool:
    """A Tuple anywhere but as the whole type: `Array(Tuple(...))`, `Nullable(Tuple(...))`, a Tuple in a Tuple."""
    inner = type_sql[len("Tuple(") :] if type_sql.startswith("Tuple(") else type_sql
    return re.search(r"\bTuple\(", inner) is not None


def _unwrap(type_sql: str, wrapper: str) -> str:
    """Remove every `wrapper(...)` around a type, keeping the inner type."""
    prefix = wrapper + "("
    while prefix in type_sql:
        start = type_sql.index(prefix)
        depth = 0
        for i in range(start + len(prefix) - 1, len(type_sql)):
            if type_sql[i] == "(":
                depth += 1
            elif type_sql[i] == ")":
                depth -= 1
                if depth == 0:
                    inner = type_sql[start + len(prefix) : i]
                    type_sql = type_sql[:start] + inner + type_sql[i + 1 :]
                    break
        else:
            break
    return type_sql


EMBEDDED = Capabilities.for_version("99.0.0")
"""The embedded engine is always current."""
