"""`chute.load()`: plan units against the ledger, load them in batches, report.

Python plans and keeps the books; the engine does every row: it reads and
parses each file, casts to the table's types through the file() structure,
adds the provenance columns, and writes the parts. The parts of a load live in
this package, one concern a module (see chute/load/loader.py for the flow).
"""

from __future__ import annotations

import dataclasses
import os
import resource
import time
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any

from chute.calls import public_call
from chute.engine import MEMORY, Engine, say_doing, shared_engine
from chute.errors import ChuteError, UsageError
from chute.load.books import Books
from chute.load.context import LoadContext
from chute.load.forget import ForgetReport, forget
from chute.load.ledger import Ledger, LedgerEntry, known_spelling, many_objects
from chute.load.loader import Loader
from chute.load.methods import check_cluster
from chute.load.options import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_FILES,
    DEFAULT_SHARD_BY,
    METHOD_ALIASES,
    METHODS,
    ON_CHANGE,
    SPARE,
    LoadOptions,
    ProgressCallback,
    default_memory_limit,
)
from chute.load.rejects import ErrorBudget, refuse_rejects_clash, refuse_reserved
from chute.load.shapes import mixed_files
from chute.load.table import partitioned, table_meta
from chute.report import LoadReport
from chute.schema import Column
from chute.scratch import sweep as sweep_scratch
from chute.sources import DATABASE_SCHEMES, SourceOptions, open_source, source_scheme
from chute.sources.base import Source
from chute.sql import TableName, expression, quote_ident, quote_str
from chute.targets import DEFAULT_TARGET, is_server, open_target, target_spec
from chute.targets.base import Target
from chute.units import Unit

__all__ = [
    "DEFAULT_BATCH_BYTES",
    "DEFAULT_BATCH_FILES",
    "METHODS",
    "ON_CHANGE",
    "ForgetReport",
    "LoadOptions",
    "ProgressCallback",
    "default_memory_limit",
    "forget",
    "load",
]


@public_call
def load(
    sources: Sequence[str] | str,
    table: str,
    target: str | None = None,
    options: LoadOptions | Mapping[str, Any] | None = None,
    progress: ProgressCallback | None = None,
    on_plan: Callable[[int, int], None] | None = None,
    on_ddl: Callable[[str], None] | None = None,
) -> LoadReport:
    """Load files into `table`, exactly once; returns the report.

    Raises a ChuteError (UsageError, SourceError, SchemaError, TargetError) when the
    request is wrong or the target cannot be used: TransientTargetError, whose
    ``terminal`` is false, is worth a retry of the call. Files that fail while loading
    are reported in the returned report (``report.ok`` is false) and leave nothing
    of themselves behind.
    """
    opts = _options(options)
    _check_options(opts)
    if opts.method in METHOD_ALIASES:
        opts = dataclasses.replace(opts, method=METHOD_ALIASES[opts.method])
    patterns = [sources] if isinstance(sources, str) else list(sources)
    _check_applies(opts, source_scheme(patterns), is_server(target))
    started = time.monotonic()
    sweep_scratch()
    table_name = _table_name(table)
    early = _listed_first(patterns, target, opts, table_name)
    tgt = open_target(
        target,
        opts.password_file,
        opts.insecure,
        opts.connections,
        opts.nodes,
        opts.insert_via_distributed,
        allow_missing_shards=opts.allow_missing_shards,
        cluster=opts.cluster,
    )
    if opts.cluster is not None and not tgt.is_server:
        raise UsageError("--cluster needs a server target (--target http(s)://host:port)")
    table_name, spelled = known_spelling(tgt, table_name)
    said = [spelled] if spelled else []
    say_doing(f"loading {table_name}")
    if opts.cluster is not None and table_name.database:
        _cluster_database(tgt, table_name.database, opts.cluster)
    ledger = Ledger(tgt, table_name, Books(tgt, table_name, opts.cluster))
    has_ledger = ledger.exists()
    if not has_ledger and ledger.books.replicated:
        ledger.ensure()  # this replica's copy of the books, caught up, before the plan reads them
        has_ledger = True
    latest = ledger.latest() if has_ledger else {}
    refuse_rejects_clash(tgt, table_name, ledger.name if has_ledger else None)
    meta = table_meta(tgt, table_name)
    # A table that is not there while the ledger has units in it was dropped: they load again
    # (Loader writes their `dropped` rows), so an incremental source must plan them this run.
    gone = meta is None
    # (zip and attrgetter: C-level, not a Python step per entry; a re-run lists 100,000 and more)
    states = repeat("dropped", len(latest)) if gone else map(attrgetter("state"), latest.values())
    known = tuple(zip(latest, states, strict=True))
    # (rows per loaded unit: a database source's planner compares them; files need none)
    counted = (
        tuple((k, e.rows_loaded + e.rows_rejected) for k, e in latest.items() if e.state == "done")
        if source_scheme(patterns) in DATABASE_SCHEMES
        else ()
    )
    # (files: their recorded identities spare a re-run the reading of their fingerprints)
    identities = (
        tuple((k, e.identity) for k, e in latest.items() if e.state == "done")
        if source_scheme(patterns) == "file" and not gone
        else ()
    )
    unchanged: set[str] | None = None
    """Units found as the ledger recorded them (when told here: planning takes them as such)."""
    if early is not None:  # (a new directory: no ledger, no table, nothing else to know first)
        source, units = early
    else:
        source = open_source(patterns, _source_options(opts, tgt, known, partitioned(meta), counted, identities))
        with many_objects():  # (a unit a file: 100,000 and more)
            units = source.units()
        columns = tgt.table_columns(table_name) if meta is not None else None
        if source_scheme(patterns) in EARLY_SCHEMES:  # (files and objects: a database or topic is one shape)
            if not gone:  # (a dropped table's units all load again: nothing is unchanged)
                unchanged = {u.key for u in units if _unchanged(latest.get(u.key), u)}
            pending = [u for u in units if u.key not in unchanged] if unchanged else units
            try:
                _refuse_mixed(tgt.engine, source, pending, opts, table_name, columns, target)
            except BaseException:
                source.close()
                raise
    check_cluster(opts, tgt, source, units)
    # The books' place depends on the table: where it was there already, as found above.
    books = ledger.books if meta is not None else None
    loader = Loader(LoadContext(tgt, source, table_name, opts, progress, meta, books=books))
    try:
        report = loader.run(units, on_plan, on_ddl, latest, unchanged)
    except ChuteError as exc:
        if isinstance(exc.partial, LoadReport):  # (the files and rows committed before it stopped)
            _finish(exc.partial, source, tgt, started, said)
        raise
    finally:
        source.close()
    return _finish(report, source, tgt, started, said)


def _finish(report: LoadReport, source: Source, tgt: Target, started: float, said: list[str]) -> LoadReport:
    report.notes[:0] = said
    report.notes.extend(source.notes)
    report.notes.extend(tgt.notes)
    report.seconds = time.monotonic() - started
    report.bytes_sent = tgt.bytes_sent
    report.server_round_trips = tgt.round_trips
    report.peak_rss_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return report


EARLY_SCHEMES = frozenset({"file", "s3", "http", "hdfs"})
"""Sources listed (and their files' fields read) before a new embedded directory is made."""


def _listed_first(
    patterns: list[str], target: str | None, opts: LoadOptions, table: TableName
) -> tuple[Source, list[Unit]] | None:
    """Into an embedded directory that does not exist yet (or is empty): the files, listed and
    checked to fit one table before it is made, so that a load refused for its sources (none
    found, files of several kinds) makes no database. None for other targets and sources."""
    if is_server(target) or source_scheme(patterns) not in EARLY_SCHEMES:
        return None
    path = target_spec(target) or DEFAULT_TARGET
    if path == MEMORY or (os.path.exists(path) and not (os.path.isdir(path) and not os.listdir(path))):
        return None
    exclude = (os.path.abspath(path),)
    options = dataclasses.replace(_source_options(opts, None, (), False), exclude=exclude)
    source = open_source(patterns, options)
    try:
        units = source.units()
        _refuse_mixed(shared_engine(), source, units, opts, table, None, target)
    except BaseException:
        source.close()
        raise
    return source, units


def _unchanged(entry: LedgerEntry | None, unit: Unit) -> bool:
    return entry is not None and entry.state == "done" and unit.matches(entry.identity)


def _refuse_mixed(
    engine: Engine,
    source: Source,
    units: list[Unit],
    opts: LoadOptions,
    table: TableName,
    columns: list[Column] | None,
    target: str | None,
) -> None:
    """UsageError, before anything is made, when the files cannot go into one table (chute.load.shapes)."""
    if opts.design is not None:
        return  # (the layout is the user's: the load says which files do not fit it)
    why = mixed_files(engine, source, units, opts, str(table), columns, target)
    if why is not None:
        raise UsageError(why)


def _options(given: object) -> LoadOptions:
    """`options=` as a LoadOptions; a mapping (an orchestrator's task parameters, JSON) is read as
    its fields. Anything else is a UsageError, not an AttributeError deep in the load."""
    if given is None:
        return LoadOptions()
    if isinstance(given, LoadOptions):
        return given
    if isinstance(given, Mapping):
        known = {f.name for f in dataclasses.fields(LoadOptions)}
        unknown = sorted(str(k) for k in given if k not in known)
        if unknown:
            raise UsageError(
                f"unknown load option(s) {', '.join(unknown)}: LoadOptions takes {', '.join(sorted(known))}"
            )
        return LoadOptions(**given)
    raise UsageError(f"options= takes a chute.LoadOptions (or a dict of its fields), not {type(given).__name__}")


def _check_options(opts: LoadOptions) -> None:
    """A wrong request fails before anything is opened, in one line."""
    if opts.method not in METHODS:
        raise UsageError(f"--method must be one of {', '.join(METHODS)}")
    if opts.batch_files < 1:
        raise UsageError(f"batch files must be at least 1, not {opts.batch_files}")
    if opts.spare is not None and opts.spare not in SPARE:
        raise UsageError(f"spare must be one of {', '.join(SPARE)}")
    if opts.spare is not None and opts.method != "auto":
        raise UsageError(
            f"--spare-{opts.spare} chooses a method for --method auto; it does not go with --method {opts.method}"
        )
    if opts.on_change not in ON_CHANGE:
        raise UsageError(f"--on-change must be one of {', '.join(ON_CHANGE)}")
    if opts.delimiter is not None and len(opts.delimiter) != 1:
        raise UsageError("--delimiter must be a single character")
    ErrorBudget.parse(opts.max_errors)
    if opts.strict and opts.max_errors not in (None, ""):
        raise UsageError("--strict allows no bad row; it does not go with --max-errors")
    if opts.cluster is not None and not opts.cluster.strip():
        raise UsageError("--cluster needs a cluster name")
    expression(opts.order_by, "--order-by")
    expression(opts.shard_by, "--shard-by")
    for given, option in ((opts.partition_by, "--partition-by"), (opts.where, "--where")):
        if given is not None:
            expression(given, option)
    if opts.shard_by != DEFAULT_SHARD_BY and opts.cluster is None:
        raise UsageError("--shard-by is the key of the table --cluster makes; it goes with --cluster")


def _check_applies(opts: LoadOptions, scheme: str, server: bool) -> None:
    """Options for another kind of source or target are refused, not ignored (before anything
    is opened: a refused load makes no database)."""
    given = [
        flag
        for flag, value in (("--where", opts.where), ("--cursor", opts.cursor), ("--split-by", opts.split_by))
        if value
    ]
    if given and scheme not in DATABASE_SCHEMES:
        flags = " and ".join(", ".join(given).rsplit(", ", 1))
        verb = "is" if len(given) == 1 else "are"
        raise UsageError(f"{flags} {verb} for database sources (postgresql://, mysql://), not {scheme} sources")
    if opts.s3_endpoint and scheme != "s3":
        raise UsageError(f"--s3-endpoint is for s3:// sources, not {scheme} sources")
    if server:
        return
    if opts.nodes:
        raise UsageError("--node needs a server target (--target http(s)://host:port)")
    if opts.password_file and scheme not in (*DATABASE_SCHEMES, "kafka"):
        raise UsageError("--password-file is for server targets, database and kafka sources; the target is a directory")
    for flag, said in (
        ("--insecure", opts.insecure),
        ("--connections", opts.connections != LoadOptions.connections),
        ("--worker-id", opts.worker_id is not None),
        ("--insert-via-distributed", opts.insert_via_distributed),
        ("--allow-missing-shards", opts.allow_missing_shards),
    ):
        if said:
            raise UsageError(f"{flag} needs a server target (--target http(s)://host:port); the target is a directory")


def _cluster_database(tgt: Target, database: str, cluster: str) -> None:
    """The table's database on every node of the cluster, where this one lacks it: the books
    are made `ON CLUSTER` in it before the table is."""
    known = tgt.rows(f"SELECT count() AS n FROM system.databases WHERE name = {quote_str(database)}")
    if not int(known[0]["n"]):
        tgt.notes.append(f"database {database} did not exist: created on every node of {cluster}")
        tgt.execute(
            f"CREATE DATABASE IF NOT EXISTS {quote_ident(database)} ON CLUSTER {quote_ident(cluster)}",
            {"distributed_ddl_task_timeout": 30},
        )


def _table_name(table: str) -> TableName:
    name = TableName.parse(table)
    if name.table.startswith("_chute_"):
        raise UsageError(f"table names starting with _chute_ are reserved: {table}")
    refuse_reserved(name)
    return name


def _source_options(
    opts: LoadOptions,
    target: Target | None,
    known: tuple[tuple[str, str], ...],
    table_partitioned: bool,
    counted: tuple[tuple[str, int], ...] = (),
    identities: tuple[tuple[str, str], ...] = (),
) -> SourceOptions:
    exclude = [target.engine.path] if target is not None and target.engine.path != MEMORY else []
    return SourceOptions(
        opts.format,
        opts.compression,
        tuple(exclude),
        s3_endpoint=opts.s3_endpoint,
        split_bytes=opts.range_bytes(bool(opts.partition_by) or table_partitioned),
        split_by=opts.split_by,
        where=opts.where,
        cursor=opts.cursor,
        password_file=opts.password_file,
        loaded=known,
        loaded_rows=counted,
        loaded_identities=identities,
    )
