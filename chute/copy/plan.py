"""The units of a copy: one per partition of the source, or key ranges of a table without
partitions, and what the ledger says of each.

Partitions come from `system.parts` (no row is read): id, value, rows, bytes
and the names of the active parts. Parts never change once written, so the
same names mean the same rows: a unit copied before whose parts are the same
is skipped without a scan. Other names (a merge, an insert, a mutation) make
the copy compare the source's figures with those it recorded; only a unit
whose rows changed is copied again.

A big table without partitions is cut on the first column of its sorting key
(an integer, Date or DateTime) into ranges on a grid of powers of two, so the
same table gives the same ranges on every run; the first and last are open,
so rows added past either end belong to a range.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from chute.copy.tables import TableFacts
from chute.errors import UsageError
from chute.sql import TableName, expression, quote_ident, quote_str
from chute.targets.base import Target

_RANGED_TYPES = re.compile(r"^(?:Nullable\()?(U?Int(?:8|16|32|64)|Date|DateTime(?:\('[^']*'\))?)\)?$")
_LITERAL = re.compile(r"^(?:-?[0-9.e+-]+|'(?:[^'\\]|\\.)*'|\((?:[^()]*)\)|tuple\(\))$")


@dataclass
class CopyUnit:
    key: str
    """Its name in the ledger: the source, its table, the partition (and range, and --where)."""
    partition_id: str
    partition: str
    """The partition's value as the source prints it (`202401`, `'2024-01-01'`), or the key range."""
    where: str
    """The source rows of the unit (a condition on the source table; the destination's columns
    have the same names)."""
    rows: int
    bytes: int
    signature: str
    """A digest of the partition's active part names (equal: the rows did not change)."""
    key_range: tuple[str, str] | None = None
    """For a range unit: its condition (on either table) and a description."""
    partition_filter: str = "1"
    """The rows of its partition (without --where): what a stage shared by units holds of it."""

    @property
    def replaces_partition(self) -> bool:
        return self.key_range is None


def _database(table: TableName) -> str:
    return quote_str(table.database) if table.database else "currentDatabase()"


def _signature(names: list[str]) -> str:
    return hashlib.sha1("\n".join(sorted(names)).encode()).hexdigest()[:16]


def list_units(
    source: Target,
    table: TableName,
    facts: TableFacts,
    wanted: tuple[str, ...],
    where: str | None,
    rows_per_range: int,
    part_sources: list[tuple[str, Target, TableName]] | None = None,
) -> list[CopyUnit]:
    """The units to look at: every partition (those in `wanted` only, where given). The parts
    are listed on `part_sources` (for a Distributed source: a node of each shard, its local
    table; a partition's rows summed over them), else on the source."""
    base = f"{source.display_name}/{table}"
    if where:
        expression(where, "--where")
        base += "?where=" + hashlib.sha1(where.encode()).hexdigest()[:12]
    if not facts.merge_tree:
        # No parts to read: one unit, its rows counted; its figures decide every time.
        found = source.rows(f"SELECT count() AS n FROM {table.sql}", context=f"counting the rows of {table}")
        rows = int(str(found[0]["n"]))
        return [CopyUnit(f"{base}#all", "all", "all", _and("1", where), rows, 0, "")]
    parts = _parts(part_sources or [("", source, table)])
    units: list[CopyUnit] = []
    for part in parts:
        pid, value = str(part["partition_id"]), str(part["partition"])
        if wanted and pid not in wanted and value not in wanted and value.strip("'") not in wanted:
            continue
        rows, size, sig = int(part["rows"]), int(part["bytes"]), _signature(list(part["names"]))
        if not facts.partitioned:
            units.extend(_ranges(source, table, facts, f"{base}#{pid}", rows, size, sig, where, rows_per_range))
            continue
        own = _partition_filter(facts, value)
        units.append(CopyUnit(f"{base}#{pid}", pid, value, _and(own, where), rows, size, sig, partition_filter=own))
    if wanted:
        known = {u.partition_id for u in units} | {u.partition.strip("'") for u in units} | {u.partition for u in units}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise UsageError(f"no partition {', '.join(unknown)} in {table} (see chute copy --dry-run)")
    return units


def _parts(part_sources: list[tuple[str, Target, TableName]]) -> list[dict[str, Any]]:
    """Partitions with their rows, bytes and part names (tagged by where they were listed)."""
    merged: dict[str, dict[str, Any]] = {}
    for tag, node, table in part_sources:
        found = node.rows(
            "SELECT partition_id, any(partition) AS partition, toString(sum(rows)) AS rows, "
            "toString(sum(bytes_on_disk)) AS bytes, groupArray(name) AS names FROM system.parts "
            f"WHERE active AND database = {_database(table)} AND table = {quote_str(table.table)} "
            "GROUP BY partition_id",
            context=f"listing the partitions of {table} on {node.display_name}",
        )
        for row in found:
            into = merged.setdefault(
                str(row["partition_id"]),
                {
                    "partition_id": row["partition_id"],
                    "partition": row["partition"],
                    "rows": 0,
                    "bytes": 0,
                    "names": [],
                },
            )
            into["rows"] += int(row["rows"])
            into["bytes"] += int(row["bytes"])
            into["names"].extend(tag + str(n) for n in row["names"])
    return [merged[k] for k in sorted(merged)]


def _and(condition: str, where: str | None) -> str:
    return f"({condition}) AND ({where})" if where else condition


def _partition_filter(facts: TableFacts, value: str) -> str:
    """The rows of one partition: the partition key equal to the value system.parts prints (a
    literal the server wrote: checked to be one before it goes into a statement)."""
    value = _quoted_times(value)
    if not _LITERAL.match(value):
        raise UsageError(f"cannot read the partition value {value!r} of the source as a literal")
    return f"({facts.partition_key}) = {value}"


_BARE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}(?: \d{2}:\d{2}:\d{2})?$")


def _quoted_times(value: str) -> str:
    """18.16 prints a Date (DateTime) partition value bare, `2025-01-01`: as SQL that is 2023, a
    number. Quoted, it compares with the column (alone, or as an element of a tuple without text)."""
    if _BARE_TIME.match(value):
        return f"'{value}'"
    if value.startswith("(") and value.endswith(")") and "'" not in value:
        items = [v.strip() for v in value[1:-1].split(",")]
        return "(" + ", ".join(f"'{v}'" if _BARE_TIME.match(v) else v for v in items) + ")"
    return value


def _ranges(
    source: Target,
    table: TableName,
    facts: TableFacts,
    key: str,
    rows: int,
    size: int,
    sig: str,
    where: str | None,
    rows_per_range: int,
) -> list[CopyUnit]:
    """Key ranges of a table without partitions (one unit when it is small or has no
    integer-like first sorting column)."""
    whole = CopyUnit(key, "all", "all", _and("1", where), rows, size, sig)
    first = facts.sorting_key.split(",")[0].strip().strip("`")
    types = {c.name: c.type for c in facts.data_columns}
    if rows <= rows_per_range or first not in types or not _RANGED_TYPES.match(types[first]):
        return [whole]
    column = quote_ident(first)
    numeric = f"toInt64({column})" if not types[first].startswith(("UInt64", "Nullable(UInt64")) else column
    bounds = source.rows(
        f"SELECT toString(min({numeric})) AS lo, toString(max({numeric})) AS hi FROM {table.sql}",
        context=f"reading the key bounds of {table}",
    )
    if not bounds or bounds[0]["lo"] in (None, "") or bounds[0]["hi"] in (None, ""):
        return [whole]
    cuts = grid(int(bounds[0]["lo"]), int(bounds[0]["hi"]), -(-rows // rows_per_range))
    units = []
    for i, (lo, hi) in enumerate(cuts):
        terms = []
        if lo is not None:
            terms.append(f"{numeric} >= {lo}")
        if hi is not None:
            terms.append(f"{numeric} < {hi}")
        condition = " AND ".join(terms) or "1"
        if i == 0 and types[first].startswith("Nullable("):
            condition = f"({condition}) OR isNull({column})"
        shown = f"{first} in [{'' if lo is None else lo}, {'' if hi is None else hi})"
        units.append(
            CopyUnit(
                f"{key}&range={'' if lo is None else lo}:{'' if hi is None else hi}",
                "all",
                shown,
                _and(condition, where),
                rows // len(cuts),
                size // len(cuts),
                sig,
                (condition, shown),
            )
        )
    return units


def grid(lo: int, hi: int, count: int) -> list[tuple[int | None, int | None]]:
    """About `count` ranges covering [lo, hi] on a grid of a power of two (stable while the
    bounds stay within it); the first starts at nothing, the last ends at nothing."""
    if count <= 1 or hi <= lo:
        return [(None, None)]
    step = 1
    while step * count < hi - lo + 1:
        step *= 2
    start = (lo // step) * step
    edges = list(range(start + step, hi + 1, step))
    if not edges:
        return [(None, None)]
    bounds: list[int | None] = [None, *edges]
    ends: list[int | None] = [*edges, None]
    return list(zip(bounds, ends, strict=True))


def dest_partitions(dest: Target, table: TableName) -> dict[str, int]:
    """Rows per partition id of the destination table (from its parts: no row read)."""
    found = dest.rows(
        "SELECT partition_id, toString(sum(rows)) AS rows FROM system.parts "
        f"WHERE active AND database = {_database(table)} AND table = {quote_str(table.table)} GROUP BY partition_id",
        context=f"listing the partitions of {table}",
    )
    return {str(r["partition_id"]): int(r["rows"]) for r in found}
