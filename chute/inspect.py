"""Looking into a target: the ledger (`status`) and free SQL (`query`)."""

from __future__ import annotations

from typing import Any

from chute.ledger import Ledger
from chute.sql import TableName, quote_str
from chute.targets import open_target


def status(
    table: str | None = None, target: str | None = None, password_file: str | None = None, insecure: bool = False
) -> list[dict[str, Any]]:
    """The current ledger state of every file, for one table or all of them."""
    tgt = open_target(target, password_file, insecure)
    ledger = Ledger(tgt, TableName.parse(table) if table else TableName(None, "_"))
    if not ledger.exists():
        return []
    where = f"WHERE `table` = {quote_str(table)}" if table else ""
    return tgt.rows(
        "SELECT `table`, unit AS source, argMax(state, seq) AS state, argMax(rows_loaded, seq) AS rows_loaded, "
        "argMax(rows_rejected, seq) AS rows_rejected, argMax(load_id, seq) AS load_id, "
        "toString(max(at)) AS at, argMax(error, seq) AS last_error "
        f"FROM {ledger.name.sql} {where} GROUP BY `table`, unit ORDER BY `table`, unit",
        context="reading the ledger",
    )


def query(
    sql: str,
    target: str | None = None,
    fmt: str = "PrettyCompact",
    password_file: str | None = None,
    insecure: bool = False,
) -> str:
    """Run SQL in the target and return its output in the ClickHouse format `fmt`."""
    tgt = open_target(target, password_file, insecure)
    return tgt.text(sql, fmt, context="query failed")
