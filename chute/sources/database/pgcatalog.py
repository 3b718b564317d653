"""PostgreSQL's catalog in one query: column types, the primary key, and the split key's bounds and row estimate.

Planning a PostgreSQL table used three connections (the engine's DESCRIBE, the
catalog through information_schema, the key's bounds): each is a backend the
server forks and a SCRAM handshake on both sides. This query reads pg_catalog
(information_schema's views cost the server more) and, in the same round
trip, the split key's min and max through its index (`query_to_xml` runs the
query on the key the catalog names, so no second connection is needed) and
the table's row estimate.
"""

from __future__ import annotations

import re

from chute.sources.dbplan import pg_str

INTEGER_TYPES = "('pg_catalog.int2'::regtype, 'pg_catalog.int4'::regtype, 'pg_catalog.int8'::regtype)"


def catalog_query(schema: str, table: str, split_by: str | None, bounds: bool) -> str:
    """Rows (id, k, c, v): ("type", column, type name as information_schema's data_type names it, with
    "numeric free" for a numeric without precision), ("key", column, position in the primary key),
    ("declared", column, `numeric(p,s)`) for each numeric with a precision, ("freearray", column, "")
    for each numeric[] without one, and,
    with `bounds`, ("bounds", key column, XML of its min and max) for the integer column `split_by` (else
    the one-column primary key) and ("estimate", "", rows: reltuples scaled to the table's pages now, as
    PostgreSQL's planner does; -1 when never analyzed)."""
    rel = (
        "SELECT c.oid, c.reltuples, c.relpages FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        f"WHERE n.nspname = {pg_str(schema)} AND c.relname = {pg_str(table)}"
    )
    # A domain stands for its base type, as information_schema.columns.data_type says.
    cols = (
        "SELECT a.attname, CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END AS base, "
        "CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END AS mod "
        "FROM pg_catalog.pg_attribute a JOIN rel ON a.attrelid = rel.oid "
        "JOIN pg_catalog.pg_type t ON t.oid = a.atttypid WHERE a.attnum > 0 AND NOT a.attisdropped"
    )
    pk = (
        "SELECT k.ord, a.attname FROM pg_catalog.pg_index i JOIN rel ON i.indrelid = rel.oid "
        "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
        "JOIN pg_catalog.pg_attribute a ON a.attrelid = rel.oid AND a.attnum = k.attnum WHERE i.indisprimary"
    )
    wanted = pg_str(split_by) if split_by is not None else "(SELECT min(attname) FROM pk HAVING count(*) = 1)"
    split = f"SELECT attname AS col FROM cols WHERE attname = {wanted} AND base IN {INTEGER_TYPES}"
    types = (
        "SELECT 'type:' || c.attname AS id, 'type' AS k, c.attname::text AS c, "
        "CASE WHEN b.typcategory = 'A' THEN 'ARRAY' "
        "WHEN b.typnamespace <> 'pg_catalog'::regnamespace THEN 'USER-DEFINED' "
        "WHEN b.oid = 'pg_catalog.numeric'::regtype AND c.mod < 0 THEN 'numeric free' "
        "ELSE pg_catalog.format_type(c.base, NULL) END AS v "
        "FROM cols c JOIN pg_catalog.pg_type b ON b.oid = c.base"
    )
    keys = "SELECT 'key:' || attname, 'key', attname::text, ord::text FROM pk"
    # numeric(p, s) as declared: the engine's reader refuses more than 76 digits or a negative scale.
    declared = (
        "SELECT 'declared:' || c.attname, 'declared', c.attname::text, pg_catalog.format_type(c.base, c.mod) "
        "FROM cols c WHERE c.base = 'pg_catalog.numeric'::regtype AND c.mod >= 0"
    )
    # numeric[] without precision: its elements are measured (chute.sources.database.numerics).
    free_arrays = (
        "SELECT 'freearray:' || c.attname, 'freearray', c.attname::text, '' "
        "FROM cols c WHERE c.base = 'pg_catalog._numeric'::regtype AND c.mod < 0"
    )
    parts = [types, keys, declared, free_arrays]
    if bounds:
        minmax = pg_str("SELECT min(%1$I)::text AS lo, max(%1$I)::text AS hi FROM %2$I.%3$I")
        parts.append(
            "SELECT 'bounds', 'bounds', col::text, pg_catalog.query_to_xml(pg_catalog.format("
            f"{minmax}, col, {pg_str(schema)}, {pg_str(table)}), false, true, '')::text FROM split"
        )
        parts.append(
            "SELECT 'estimate', 'estimate', '', CASE WHEN reltuples < 0 THEN '-1' WHEN relpages > 0 THEN "
            "round(reltuples / relpages * (pg_catalog.pg_relation_size(oid) / "
            "current_setting('block_size')::float8))::bigint::text ELSE round(reltuples)::bigint::text END FROM rel"
        )
    return f"WITH rel AS ({rel}), cols AS ({cols}), pk AS ({pk}), split AS ({split}) " + " UNION ALL ".join(parts)


def parse_bounds(xml: str) -> tuple[int, int] | None:
    """(min, max) from query_to_xml's row (`<lo>1</lo><hi>9</hi>`); None: the table has no row."""
    lo, hi = re.search(r"<lo>(-?\d+)</lo>", xml), re.search(r"<hi>(-?\d+)</hi>", xml)
    if lo is None or hi is None:
        return None
    return int(lo.group(1)), int(hi.group(1))


def unreadable_numerics(declared: dict[str, str]) -> list[str]:
    """`column numeric(p,s)` for the declared numerics the engine's PostgreSQL reader cannot type:
    more than 76 digits (Decimal256's) or a negative scale (PostgreSQL 15)."""
    found = []
    for column, declaration in declared.items():
        match = re.fullmatch(r"numeric\((\d+),\s*(-?\d+)\)", declaration)
        if match and (int(match.group(1)) > 76 or int(match.group(2)) < 0):
            found.append(f"{column} {declaration}")
    return found
