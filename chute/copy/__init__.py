"""`chute copy`: a table from one ClickHouse (server or embedded) to another, resumable and
verified partition by partition.

The flow is in `chute.copy.copier`; the units (partitions, key ranges) and the
ledger's view of them in `chute.copy.plan`; the tables in `chute.copy.tables`;
the methods (pull, stream, files) in `chute.copy.methods` and `chute.copy.files`;
the figures that prove a copy equal in `chute.copy.figures`; a Distributed
destination written by shard in `chute.copy.shards`; copies into one table at
once in `chute.copy.guard`. The ledger, its books and the claims are the
loader's (`chute.load`), kept in the destination.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from chute.calls import public_call
from chute.copy.cluster import CLUSTER_DDL_SETTINGS, check_cluster, sharded_source
from chute.copy.copier import Copier
from chute.copy.files import Files
from chute.copy.guard import RunGuard
from chute.copy.methods import METHODS, Mover, choose
from chute.copy.model import CopyOptions, CopyReport, ProgressCallback, UnitResult
from chute.copy.plan import CopyUnit, dest_partitions, list_units
from chute.copy.shards import DestShards, cluster_ddl
from chute.copy.tables import (
    Mapped,
    TableFacts,
    check_dest,
    create_sql,
    dest_types,
    mapped_columns,
    read_facts,
    source_facts,
)
from chute.errors import UsageError
from chute.load.books import Books
from chute.load.ledger import Ledger
from chute.schema import Column
from chute.sql import TableName, expression, quote_ident
from chute.targets import is_server, open_target
from chute.targets.base import Target
from chute.targets.staging import Stage

__all__ = ["METHODS", "CopyOptions", "CopyReport", "UnitResult", "copy"]


@public_call
def copy(
    table: str,
    source: str,
    dest: str,
    options: CopyOptions | None = None,
    progress: ProgressCallback | None = None,
    on_ddl: Callable[[str], None] | None = None,
    on_plan: Callable[[int, int], None] | None = None,
) -> CopyReport:
    """Copy `table` from `source` to `dest` (each an embedded directory or an http(s):// server),
    exactly once per partition, each partition verified; returns the report (``report.ok`` is
    false when a partition failed: the report names it with both sides' figures)."""
    opts = options or CopyOptions()
    started = time.monotonic()
    src_table = TableName.parse(table)
    dst_table = TableName.parse(opts.dest_table) if opts.dest_table else src_table
    src, dst, same = _open_ends(source, dest, opts)
    if same and src_table == dst_table:
        raise UsageError(f"the source and the destination are the same table {src_table}: give another --as")
    facts = source_facts(src, src_table)
    part_sources = None
    if facts.engine == "Distributed":
        facts, part_sources = sharded_source(src, src_table, facts)
    cluster_shards = 1
    if opts.cluster is not None:
        cluster_shards = check_cluster(dst, opts.cluster)
        if dst_table.database is None:  # (ON CLUSTER names the database on every node)
            dst_table = TableName(str(dst.rows("SELECT currentDatabase() AS d")[0]["d"]), dst_table.table)
    mapped = mapped_columns(facts, dst)
    existing = read_facts(dst, dst_table)
    shards: DestShards | None = None
    if existing is not None and existing.engine == "Distributed":
        shards = DestShards(dst, dst_table)  # (written by shard: its local table is checked)
        existing = shards.local_facts()
    elif existing is not None and cluster_shards > 1:
        raise UsageError(
            f"{dst_table} is one node's table, and cluster {opts.cluster} has {cluster_shards} shards: "
            "copy into the Distributed table over it (or give another --as)"
        )
    report = CopyReport(src.display_name, dst.display_name, str(src_table), str(dst_table), dry_run=opts.dry_run)
    report.notes.extend(mapped.notes)
    columns = _check_or_plan_table(facts, mapped, existing, dst_table, report, opts.cluster)
    statements = [report.ddl] if report.ddl else []
    if existing is None and cluster_shards > 1:
        assert opts.cluster is not None
        local, distributed_ddl = cluster_ddl(dst_table, opts.cluster, expression(opts.shard_by, "--shard-by"))
        statements = [create_sql(facts, mapped, local, opts.cluster), distributed_ddl]
        report.ddl = ";\n".join(statements)
    units = list_units(src, src_table, facts, opts.partitions, opts.where, opts.rows_per_range, part_sources)
    report.method, report.method_reason = choose(opts.method, src, dst, same, columns)
    if (report.method == "files") != bool(opts.via):
        raise UsageError("--method files goes with --via DIR or s3://bucket/prefix/ (where its files go)")
    mover = Mover(src, dst, src_table, columns, mapped.source_types, report.method)
    books = Books(dst, dst_table, opts.cluster)
    ledger = Ledger(dst, dst_table, books)
    # (a server can be written by other runs at once; one process opens an embedded directory)
    guard = RunGuard(dst, dst_table, books) if dst.is_server and not opts.dry_run else None
    copier = Copier(src, dst, src_table, dst_table, columns, mapped.source_types, mover, ledger, opts, guard, shards)
    entries = ledger.latest([u.key for u in units]) if existing is not None and ledger.exists() else {}
    held = (shards.held() if shards is not None else dest_partitions(dst, dst_table)) if entries else {}
    todo, skipped = copier.sort_out(units, entries, held)
    report.units.extend(skipped)
    if opts.dry_run:
        report.units.extend(_planned(u) for u in todo)
        report.units.sort(key=lambda u: u.unit)
        report.seconds = time.monotonic() - started
        return report
    if existing is None:
        _create(dst, dst_table, statements, report, opts.cluster)
        if on_ddl is not None:
            on_ddl(report.ddl)
        if cluster_shards > 1:
            copier.shards = shards = DestShards(dst, dst_table)
    ledger.ensure()
    if on_plan is not None:
        on_plan(len(todo), sum(u.bytes for u in todo))
    if opts.via:
        mover.files = Files(opts.via, opts.s3_endpoint)
    try:
        if guard is None:
            Stage.drop_stale(dst, dst_table)  # those a killed run left
            copier.run(todo, report, progress)
        else:
            # The stages of killed runs go; those of runs alive stay.
            nodes = [(p.target, p.table) for p in shards.places] if shards is not None else []
            guard.start([u.key for u in todo], nodes)
            try:
                with guard.claims.heartbeat():
                    copier.run(todo, report, progress)
            finally:
                guard.finish()
    finally:
        if mover.files is not None:
            mover.files.close()
            report.notes.append(
                f"files in {mover.files.display}: {mover.files.written} written, "
                f"{mover.files.reused} of a killed run sent without reading the source again"
            )
    report.units.sort(key=lambda u: u.unit)
    report.wire_bytes = mover.wire_bytes
    report.seconds = time.monotonic() - started
    return report


def _open_ends(source: str, dest: str, opts: CopyOptions) -> tuple[Target, Target, bool]:
    """The two targets; one for both where they are the same embedded directory."""
    if not source or not dest:
        raise UsageError("give both ends: --from SOURCE --to DEST")
    embedded = not is_server(source) and not is_server(dest)
    if embedded and os.path.realpath(source) != os.path.realpath(dest):
        raise UsageError(
            "both ends are embedded directories, and one process opens one: copy through a server, "
            "or chute export then chute load"
        )
    src = open_target(source, opts.source_password_file, opts.insecure, nodes=opts.nodes, existing=True)
    if embedded:
        return src, src, True
    return src, open_target(dest, opts.dest_password_file, opts.insecure, nodes=opts.dest_nodes), False


def _check_or_plan_table(
    facts: TableFacts,
    mapped: Mapped,
    existing: TableFacts | None,
    dst_table: TableName,
    report: CopyReport,
    cluster: str | None,
) -> list[Column]:
    """The destination's columns: an existing table's (checked), else those of the DDL made."""
    if existing is not None:
        check_dest(facts, mapped, existing, dst_table)
        return dest_types(mapped, existing)
    report.ddl = create_sql(facts, mapped, dst_table, cluster)
    return mapped.columns


def _create(dst: Target, table: TableName, statements: list[str], report: CopyReport, cluster: str | None) -> None:
    settings = CLUSTER_DDL_SETTINGS if cluster is not None else None
    if table.database:
        on_cluster = f" ON CLUSTER {quote_ident(cluster)}" if cluster is not None else ""
        dst.execute(
            f"CREATE DATABASE IF NOT EXISTS {quote_ident(table.database)}{on_cluster}",
            settings,
            context="creating the database",
        )
    for statement in statements:
        dst.execute(statement, settings, context=f"creating {table}")
    report.created_table = True


def _planned(unit: CopyUnit) -> UnitResult:
    return UnitResult(unit.key, unit.partition, "copy", rows=unit.rows, bytes=unit.bytes, reason="not copied yet")
