"""Waiting for a mutation (`ALTER ... DELETE`) on servers before 20.1, which have no
`mutations_sync`: polled until `system.mutations` says it is done, or its parts do.

18.16 may keep a replicated mutation at `is_done = 0` after a replica restarted, its parts all
mutated (seen in the kill trials: `parts_to_do` 1 and an empty replication queue, for good).
So a mutation is also done when no active part of its partitions has a `data_version` below
its block number: each part it applies to has been rewritten past it.

The embedded engine cancels a running mutation's part when partitions are attached to the same
table (another batch's commit): the waiting statement fails ([341 UNFINISHED] ... Cancelled
mutating parts), yet the mutation stays queued and runs again; `outlasting_cancels` waits for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from chute.errors import ChuteError, TargetError
from chute.sql import TableName, quote_str

MUTATION_TIMEOUT_SECONDS = 600.0
Rows = Callable[..., list[dict[str, Any]]]
CANCELLED = "Cancelled mutating parts"
"""The engine's reason for a mutation it stopped to attach parts: it runs again by itself."""


def parts_mutated(pending: list[dict[str, Any]], oldest: dict[str, int]) -> bool:
    """Whether no active part is older than a pending mutation (`p`, `b`: its partitions and their
    block numbers; `oldest`: the least data_version of each partition's active parts). A plain
    MergeTree's mutation has one number for every partition, named ''."""
    for mutation in pending:
        for partition, block in zip(mutation["p"], mutation["b"], strict=True):
            name = str(partition)
            versions = list(oldest.values()) if name == "" else [oldest[name]] if name in oldest else []
            if any(v < int(block) for v in versions):
                return False
    return True


def wait_for_mutations(rows: Rows, table: TableName, context: str) -> None:
    """Until every mutation of `table` is done (TargetError after MUTATION_TIMEOUT_SECONDS)."""
    database = quote_str(table.database) if table.database else "currentDatabase()"
    where = f"database = {database} AND table = {quote_str(table.table)}"
    deadline = time.monotonic() + MUTATION_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        pending = rows(
            "SELECT block_numbers.partition_id AS p, block_numbers.number AS b FROM system.mutations "
            f"WHERE {where} AND is_done = 0",
            context=context,
        )
        if not pending:
            return
        found = rows(
            f"SELECT partition_id, min(data_version) AS v FROM system.parts WHERE {where} AND active "
            "GROUP BY partition_id",
            context=context,
        )
        if parts_mutated(pending, {str(r["partition_id"]): int(r["v"]) for r in found}):
            return
        time.sleep(0.2)
    raise TargetError(f"{context}: the server did not finish the delete in {MUTATION_TIMEOUT_SECONDS:.0f} s")


def outlasting_cancels(run: Callable[[], object], rows: Rows, table: TableName, context: str) -> None:
    """Run a mutation that waits for itself (`run`); where the engine cancelled it for a moment
    (CANCELLED), wait until it and those before it are done. A re-run after kill -9 failed so
    ("removing earlier rows ... UNFINISHED"), while another batch's rows moved in."""
    try:
        run()
    except ChuteError as exc:
        if CANCELLED not in str(exc):
            raise
        wait_for_mutations(rows, table, context)
