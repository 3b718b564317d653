"""Looking into a target: the ledger (`status`) and free SQL (`query`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from chute.calls import public_call
from chute.errors import TargetError, UsageError
from chute.load.claims import CLAIMS_TABLE, host_identity, process_gone
from chute.load.ledger import Ledger, known_spelling
from chute.report import UnitState
from chute.sql import TableName, one_statement, quote_str
from chute.targets import Target, open_target
from chute.targets.server import ServerTarget

READONLY = 164


SHOWN_TABLES = 20
"""The loaded tables an unknown table's error names (the rest counted): one line, not a wall."""


@public_call
def status(
    table: str | None = None,
    target: str | None = None,
    password_file: str | None = None,
    insecure: bool = False,
    nodes: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The current ledger state of every file, for one table or all of them, with the worker
    that holds it now (a live claim)."""
    return status_and_placement(table, target, password_file, insecure, nodes, placement=False)[0]


def status_and_placement(
    table: str | None = None,
    target: str | None = None,
    password_file: str | None = None,
    insecure: bool = False,
    nodes: Sequence[str] = (),
    placement: bool = True,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(every unit's state as `status` gives it, where the table's rows are: one entry per
    replica of each shard, with its rows; empty for a table on one node). A Distributed
    table's books are read where its loads keep them (its first shard)."""
    tgt = open_target(target, password_file, insecure, nodes=nodes, existing=True)
    name = TableName.parse(table) if table else None
    if name is not None:
        name = known_spelling(tgt, name)[0]
        table = str(name)
    books = tgt.books_target(name) if name is not None else tgt
    units = _units(books, table)
    if name is not None and not units and tgt.table_columns(name) is None:
        loaded = _loaded_tables(books)
        shown = ", ".join(loaded[:SHOWN_TABLES]) + (
            f", and {len(loaded) - SHOWN_TABLES} more" if len(loaded) > SHOWN_TABLES else ""
        )
        known = f" (tables loaded there: {shown})" if loaded else " (nothing loaded there yet)"
        raise UsageError(f"no table {table} in {tgt.display_name}{known}")
    where: list[dict[str, Any]] = []
    if placement and name is not None and isinstance(tgt, ServerTarget):
        where = tgt.placement(name)
    return units, where


def _loaded_tables(tgt: Target) -> list[str]:
    """The tables the ledger of `tgt` names."""
    ledger = Ledger(tgt, TableName(None, "_"))
    if not ledger.exists():
        return []
    found = tgt.rows(f"SELECT DISTINCT `table` FROM {ledger.name.sql} ORDER BY `table`", context="reading the ledger")
    return [str(r["table"]) for r in found]


def _units(tgt: Target, table: str | None) -> list[dict[str, Any]]:
    ledger = Ledger(tgt, TableName.parse(table) if table else TableName(None, "_"))
    if not ledger.exists():
        return []
    where = f"WHERE `table` = {quote_str(table)}" if table else ""
    rows = tgt.rows(
        "SELECT `table`, unit AS source, argMax(state, seq) AS state, argMax(rows_loaded, seq) AS rows_loaded, "
        "argMax(rows_rejected, seq) AS rows_rejected, argMax(load_id, seq) AS load_id, "
        "toString(max(at)) AS at, argMax(error, seq) AS last_error, argMax(identity, seq) AS identity, "
        "argMax(size, seq) AS size, toString(argMax(mtime, seq)) AS mtime "
        f"FROM {ledger.name.sql} {where} GROUP BY `table`, unit ORDER BY `table`, unit",
        context="reading the ledger",
    )
    gone = {t for t in {str(r["table"]) for r in rows} if tgt.table_columns(TableName.parse(t)) is None}
    for row in rows:
        row["state"] = _state(row["state"])
        if row["state"] == UnitState.DONE and row["table"] in gone:
            # Its table was dropped by hand since: its rows went with it, and the next load
            # loads it again (and then writes `dropped` into the ledger itself).
            row["state"] = UnitState.DROPPED
        row["claimed_by"] = row["claimed_since"] = row["lease_end"] = ""
    claims = live_claims(tgt, ledger.name.database, table)
    by_unit = {(r["table"], r["source"]): r for r in rows}
    for claim in claims:
        found = by_unit.get((claim["table"], claim["unit"]))
        if found is not None:
            row = found
        else:  # claimed, not yet started
            row = {
                "table": claim["table"],
                "source": claim["unit"],
                "state": UnitState.CLAIMED,
                "rows_loaded": 0,
                "rows_rejected": 0,
                "load_id": "",
                "at": claim["since"],
                "last_error": "",
                "identity": "",
                "size": 0,
                "mtime": "",
            }
            by_unit[(claim["table"], claim["unit"])] = row
            rows.append(row)
        row["claimed_by"], row["claimed_since"], row["lease_end"] = (
            claim["worker"],
            claim["since"],
            claim["lease_until"],
        )
    return rows


def _state(text: str) -> UnitState | str:
    """The ledger's state as a `UnitState` (a state a newer chute wrote stays text)."""
    try:
        return UnitState(text)
    except ValueError:
        return text


def live_claims(tgt: Target, database: str | None, table: str | None) -> list[dict[str, Any]]:
    """The live claims of workers loading now (see chute/load/claims.py): worker, unit, since,
    lease end. Claims of processes of this host that are gone (killed) are left out."""
    claims = TableName(database, CLAIMS_TABLE)
    if tgt.table_columns(claims) is None:
        return []
    where = f"WHERE `table` = {quote_str(table)}" if table else ""
    found = tgt.rows(
        "SELECT `table`, unit, any(worker) AS worker, any(host) AS host, any(process) AS process, "
        "toString(min(at)) AS since, toString(max(lease_end)) AS lease_until "
        f"FROM {claims.sql} {where} GROUP BY `table`, unit, token "
        "HAVING max(lease_end) > now() AND countIf(state != 'held') = 0 ORDER BY `table`, unit",
        context="reading claims",
    )
    here = host_identity()
    return [c for c in found if not (c["host"] == here and process_gone(str(c["process"])))]


@public_call
def query(
    sql: str,
    target: str | None = None,
    format: str | None = None,
    password_file: str | None = None,
    insecure: bool = False,
    *,
    fmt: str | None = None,
) -> str:
    """Run SQL in the target and return its output in the ClickHouse format `format` (as
    `chute query --format`); default TSV, plain text for programs (PrettyCompact's table when
    standard output is a terminal). `fmt` is the earlier name of `format`. An embedded target
    must hold a database already, or be an empty directory (to make tables in first)."""
    if fmt is not None:
        import warnings

        if format is not None:
            raise UsageError("query takes format or fmt (its earlier name), not both")
        warnings.warn("chute.query(fmt=...) is now format=...", DeprecationWarning, stacklevel=2)
        format = fmt
    if format is None:
        format = "PrettyCompact" if sys.stdout.isatty() else "TSV"
    tgt = open_target(target, password_file, insecure, existing=True, empty_ok=True)
    try:
        return tgt.text(one_statement(sql), format, context="query failed")
    except TargetError as exc:
        engine = getattr(tgt, "engine", None)
        if exc.code == READONLY and engine is not None and engine.read_only:
            raise UsageError(
                f"{tgt.display_name} cannot be written (a read-only mount or another user's files): "
                "it is open for reading only"
            ) from None
        raise
