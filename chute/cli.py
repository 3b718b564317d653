"""The `chute` command: parses flags, calls the library, prints the report."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Sequence

from chute import __version__
from chute.api import DEFAULT_BATCH_BYTES, ON_CHANGE, LoadOptions, load
from chute.claims import DEFAULT_LEASE_SECONDS
from chute.errors import ChuteError, SourceError, UsageError
from chute.inspect import query, status
from chute.report import LoadReport, render_text

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chute", description="Fast, exactly-once bulk loads into ClickHouse.")
    parser.add_argument("--version", action="version", version=f"chute {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("load", help="load files into a table, exactly once")
    p.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="files, directories, globs (** and {a,b}); s3://bucket/prefix/**; http(s):// URLs; "
        "postgresql:// or mysql://user@host:port/db/table",
    )
    p.add_argument("--table", "-t", required=True, help="table or db.table")
    p.add_argument(
        "--target",
        help="embedded database directory, or http(s)://[user[:password]@]host:port[/database] "
        "(default $CHUTE_TARGET, else a server from $CLICKHOUSE_HOST, else ./chute.db)",
    )
    p.add_argument("--password-file", help="file holding the server password")
    p.add_argument("--insecure", action="store_true", help="do not verify TLS certificates (https targets)")
    p.add_argument("--connections", type=int, default=2, help="parallel connections to a server (default 2)")
    p.add_argument("--format", help="json, csv, tsv, parquet, native, orc, avro, arrow (default: by extension)")
    p.add_argument("--compression", help="gzip, zstd, bz2, xz, lz4, none (default: by extension)")
    p.add_argument("--delimiter", help="CSV field delimiter")
    p.add_argument("--workers", type=int, help="engine threads (default: all cores)")
    p.add_argument(
        "--worker-id",
        "--workers-id",
        dest="worker_id",
        metavar="NAME",
        help="this process's name in the claims of a server target, where several chute processes share "
        "one job (default host:pid)",
    )
    p.add_argument(
        "--lease-seconds",
        type=int,
        default=DEFAULT_LEASE_SECONDS,
        help=f"how long a claim of a worker that stopped answering holds its files (default {DEFAULT_LEASE_SECONDS})",
    )
    p.add_argument("--order-by", default="tuple()", help="ORDER BY of a new table (default tuple())")
    p.add_argument("--partition-by", help="PARTITION BY of a new table")
    p.add_argument("--no-provenance", action="store_true", help="no _source/_source_mtime/_source_row/_load_id")
    p.add_argument("--add-columns", action="store_true", help="add input fields the table lacks")
    p.add_argument("--on-change", choices=ON_CHANGE, default="skip", help="a loaded file changed (default skip)")
    p.add_argument("--batch-mb", type=int, default=DEFAULT_BATCH_BYTES // 2**20, help="bytes per insert batch")
    p.add_argument(
        "--method",
        choices=("auto", "convert", "pass-through", "server-side"),
        default="auto",
        help="server targets: convert to Native in the engine, send files as they are (no provenance), "
        "or let the server read http(s) URLs and s3:// objects itself (auto picks what applies)",
    )
    p.add_argument(
        "--cluster",
        metavar="NAME",
        help="s3:// sources into a server: the nodes of this cluster read the objects (s3Cluster); server-side only",
    )
    p.add_argument("--design", help="a new table's layout: 'auto' (measured, see `chute design`) or FILE.sql")
    p.add_argument("--max-errors", help="bad rows allowed per file: a count (10) or a share (0.1%%); default no limit")
    p.add_argument("--strict", action="store_true", help="no bad row allowed: such a file fails whole")
    p.add_argument(
        "--split-size",
        help="load uncompressed CSV/TSV/JSON-lines files bigger than twice this as byte ranges of about this "
        "size, each resumable (default a sixteenth of --memory-limit, not into partitioned tables; 0 = never)",
    )
    p.add_argument("--split-by", help="database sources: the column whose ranges make the units (default: primary key)")
    p.add_argument(
        "--where", help="database sources: a filter every unit applies (ClickHouse SQL over the source's columns)"
    )
    p.add_argument("--cursor", help="database sources: a growing column (updated_at); load rows past the last loaded")
    p.add_argument("--group", help="kafka sources: a consumer group whose offsets chute commits (information only)")
    p.add_argument("--start", help="kafka sources: where unknown partitions start: earliest (default), latest, a time")
    p.add_argument(
        "--avro-schema", metavar="FILE", help="kafka sources, --format avro|avro-confluent: the writer's .avsc schema"
    )
    p.add_argument("--batch-messages", type=int, help="kafka sources: messages per unit (default about 16 MiB)")
    p.add_argument(
        "--follow",
        action="store_true",
        help="kafka sources: keep loading new messages until SIGINT/SIGTERM (each pass a bounded load)",
    )
    p.add_argument("--s3-endpoint", help="s3:// sources: an S3-compatible endpoint, http(s)://host:port")
    p.add_argument(
        "--memory-limit",
        help="memory for one batch, e.g. 1GB (default a quarter of RAM); sorting by partition spills to disk "
        "past half of it, big text files load in ranges of a sixteenth of it",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object as the report")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress, no DDL, only errors")

    e = sub.add_parser("export", help="write a table or query to files, one per partition, in parallel")
    e.add_argument("source", metavar="TABLE_OR_QUERY", help="db.table, or a SELECT")
    e.add_argument(
        "dest", metavar="DEST", help="a local directory or s3://bucket/prefix/ (re-runs skip finished partitions)"
    )
    e.add_argument("--format", default="native", help="native (default), parquet, csv, tsv, jsonl")
    e.add_argument("--compression", default="zstd", help="zstd (default), lz4, gzip, none")
    e.add_argument("--partition-by", help="SQL expression: one file per value (e.g. toYYYYMM(ts))")
    e.add_argument("--max-file-size", help="start a new file past this size (e.g. 256MB, 1GB)")
    e.add_argument("--workers", type=int, help="partitions written at once (default: all cores)")
    e.add_argument("--s3-endpoint", help="s3:// destinations: an S3-compatible endpoint, http(s)://host:port")
    e.add_argument("--target")
    e.add_argument("--password-file")
    e.add_argument("--insecure", action="store_true")
    e.add_argument("--json", action="store_true", help="print one JSON object as the report")
    e.add_argument("--quiet", "-q", action="store_true")

    d = sub.add_parser("design", help="propose a table layout, measured on a sample")
    d.add_argument("sources", nargs="+", metavar="SOURCE")
    d.add_argument("--table", "-t", default="data", help="table name in the proposal (default data)")
    d.add_argument("--target", help="embedded directory where the sample is measured (default ./chute.db)")
    d.add_argument("--sample-rows", type=int, default=300_000)
    d.add_argument("--format")
    d.add_argument("--compression")
    d.add_argument("--delimiter")
    d.add_argument("--enums", action="store_true", help="allow Enum8 for strings with a few values")
    d.add_argument("--no-provenance", action="store_true", help="leave the provenance columns out")
    d.add_argument("--time-budget", type=float, default=60.0, help="seconds to spend measuring (default 60)")

    b = sub.add_parser("bench", help="time every load method that fits your data and target")
    b.add_argument("sources", nargs="+", metavar="SOURCE")
    b.add_argument("--target", help="embedded directory or http(s):// server (scratch tables, dropped afterwards)")
    b.add_argument("--format")
    b.add_argument("--compression")
    b.add_argument("--password-file")
    b.add_argument("--insecure", action="store_true")
    b.add_argument("--chart", help="write a chart: .png (needs matplotlib) or .html")
    b.add_argument("--json", action="store_true")

    s = sub.add_parser("status", help="the ledger: state of every loaded file")
    s.add_argument("--table", "-t")
    s.add_argument("--target")
    s.add_argument("--password-file")
    s.add_argument("--insecure", action="store_true")
    s.add_argument("--json", action="store_true")

    q = sub.add_parser("query", help="run SQL in the target")
    q.add_argument("sql")
    q.add_argument("--target")
    q.add_argument("--password-file")
    q.add_argument("--insecure", action="store_true")
    q.add_argument(
        "--format", default=None, help="engine output format (default PrettyCompact on a terminal, TSV otherwise)"
    )

    tq = sub.add_parser("time-queries", help="time every .sql file in a directory, from the engine's query log")
    tq.add_argument("directory", metavar="DIR_OF_SQL", help="one query per .sql file, run in name order")
    tq.add_argument("--target")
    tq.add_argument("--tries", type=int, default=3, help="measured runs per query, after one warm-up (default 3)")
    tq.add_argument("--password-file")
    tq.add_argument("--insecure", action="store_true")
    tq.add_argument("--json", action="store_true", help="print one JSON object as the report")
    return parser


ALLOCATOR_CONF = "background_thread:true,dirty_decay_ms:1000"
"""The engine's allocator (jemalloc, read from JE_MALLOC_CONF when the engine loads): hand freed
pages back within a second, not five, so the process's RSS follows what the engine holds
(a 7 M-row Parquet load under --memory-limit 1GB: 0.7 GiB peak instead of 0.75-1 GiB)."""


def main(argv: Sequence[str] | None = None) -> int:
    if "chdb" not in sys.modules:  # the command owns its process; a user's setting wins
        os.environ.setdefault("JE_MALLOC_CONF", ALLOCATOR_CONF)
    args = _parser().parse_args(argv)
    try:
        if args.command == "load":
            return _load(args)
        if args.command == "status":
            return _status(args)
        if args.command == "bench":
            return _bench(args)
        if args.command == "design":
            return _design(args)
        if args.command == "export":
            return _export(args)
        if args.command == "time-queries":
            return _time_queries(args)
        fmt = args.format or ("PrettyCompact" if sys.stdout.isatty() else "TSV")
        sys.stdout.write(query(args.sql, args.target, fmt, args.password_file, args.insecure))
        return EXIT_OK
    except ChuteError as exc:
        if args.debug:
            raise
        print(f"chute: error: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, (UsageError, SourceError)) else EXIT_FAILED
    except KeyboardInterrupt:
        print("chute: interrupted; re-run the same command to finish the load", file=sys.stderr)
        return 130


def _load(args: argparse.Namespace) -> int:
    from chute.progress import Progress

    options = LoadOptions(
        format=args.format,
        compression=args.compression,
        delimiter=args.delimiter,
        workers=args.workers,
        order_by=args.order_by,
        partition_by=args.partition_by,
        provenance=not args.no_provenance,
        add_columns=args.add_columns,
        on_change=args.on_change,
        batch_bytes=max(1, args.batch_mb) * 2**20,
        password_file=args.password_file,
        insecure=args.insecure,
        connections=args.connections,
        max_errors=args.max_errors,
        strict=args.strict,
        design=args.design,
        method=args.method,
        cluster=args.cluster,
        s3_endpoint=args.s3_endpoint,
        split_by=args.split_by,
        where=args.where,
        cursor=args.cursor,
        worker_id=args.worker_id,
        lease_seconds=args.lease_seconds,
    )
    if args.memory_limit:
        options = dataclasses.replace(options, memory_limit=parse_size(args.memory_limit))
    if args.split_size:
        options = dataclasses.replace(options, split_bytes=parse_size(args.split_size))
    sources = list(args.sources)
    if any(s.lower().startswith("kafka://") for s in sources):
        from chute.sources.kafka import with_options

        sources = with_options(
            sources, group=args.group, start=args.start, batch=args.batch_messages, schema=args.avro_schema
        )
    elif args.follow or args.group or args.start or args.batch_messages or args.avro_schema:
        raise UsageError("--follow, --group, --start, --batch-messages and --avro-schema are for kafka:// sources")
    if args.follow:
        return _follow(args, sources, options)
    show = not args.quiet and not args.json
    with Progress(enabled=show and sys.stderr.isatty()) as progress:
        report = load(
            sources,
            args.table,
            target=args.target,
            options=options,
            progress=progress.update,
            on_plan=progress.start,
            on_ddl=(lambda ddl: print(f"created table:\n{ddl}", file=sys.stderr)) if show else None,
        )
    if args.json:
        print(report.to_json())
    elif not args.quiet:
        _print_report(report)
    for f in report.files:
        if f.state == "failed":
            print(
                f"chute: error: {f.error}" if f.source in f.error else f"chute: error: {f.source}: {f.error}",
                file=sys.stderr,
            )
    if report.rows_rejected:
        rows = "row" if report.rows_rejected == 1 else "rows"
        message = f"{report.rows_rejected} {rows} rejected; see table {report.table}_rejects"
        print(f"chute: warning: {message}", file=sys.stderr)
    return EXIT_OK if report.ok else EXIT_FAILED


def _follow(args: argparse.Namespace, sources: list[str], options: LoadOptions) -> int:
    """Bounded loads one after another until SIGINT/SIGTERM; one line per pass that loaded rows."""
    from chute.sources.kafka import follow

    failed = False

    def one(patterns: list[str]) -> LoadReport:
        return load(patterns, args.table, target=args.target, options=options)

    def on_pass(report: LoadReport) -> None:
        nonlocal failed
        failed = failed or not report.ok
        if args.json:
            print(report.to_json(), flush=True)
        elif not args.quiet and (report.rows_loaded or report.rows_rejected or not report.ok):
            print(
                f"{report.rows_loaded:,} rows loaded, {report.rows_rejected:,} rejected, "
                f"{report.files_failed} units failed ({report.seconds:.2f} s)",
                flush=True,
            )

    follow(sources, one, on_pass=on_pass)
    return EXIT_FAILED if failed else EXIT_OK


def _print_report(report: LoadReport) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for label, value in render_text(report):
        table.add_row(label, value)
    console = Console(file=sys.stdout, soft_wrap=True)
    console.print(table)
    for note in report.notes:
        console.print(f"note: {note}", markup=False)


def _export(args: argparse.Namespace) -> int:
    from chute.export import ExportOptions, export
    from chute.report import human_bytes

    options = ExportOptions(
        format=args.format,
        compression=args.compression,
        partition_by=args.partition_by,
        max_file_bytes=parse_size(args.max_file_size) if args.max_file_size else None,
        workers=args.workers,
        password_file=args.password_file,
        insecure=args.insecure,
        s3_endpoint=args.s3_endpoint,
    )
    show = not args.quiet and not args.json and sys.stderr.isatty()

    def say(partitions: int, rows: int, written: int) -> None:
        if show:
            print(
                f"\rchute export: {partitions} partitions, {rows:,} rows, {human_bytes(written)}",
                end="",
                file=sys.stderr,
            )

    report = export(args.source, args.dest, args.target, options, progress=say)
    if show:
        print(file=sys.stderr)
    if args.json:
        print(report.to_json())
    elif not args.quiet:
        skipped = f", {report.partitions_skipped} already written (skipped)" if report.partitions_skipped else ""
        rate = f"{report.rows_written / report.seconds:,.0f} rows/s" if report.seconds > 0 else ""
        print(
            f"exported {report.rows_written:,} rows to {len(report.files)} files in {report.dest} "
            f"({human_bytes(report.bytes_written)}, {report.seconds:.2f} s, {rate}); "
            f"{report.partitions_written} of {report.partitions_total} partitions written{skipped}"
        )
        print(f"manifest: {report.manifest}")
    return EXIT_OK


def parse_size(text: str) -> int:
    """Bytes from '256MB', '1GB', '1.5G', '1000' (binary multiples, as ClickHouse prints them)."""
    import re

    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if not match:
        raise UsageError(f"invalid size {text!r}: use e.g. 256MB or 1GB")
    factor = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[match.group(2)]
    return int(float(match.group(1)) * factor)


def _design(args: argparse.Namespace) -> int:
    from chute.design import design_sources, render_text

    proposal = design_sources(
        args.sources,
        args.table,
        args.target,
        args.sample_rows,
        args.format,
        args.compression,
        delimiter=args.delimiter,
        enums=args.enums,
        provenance=not args.no_provenance,
        time_budget_s=args.time_budget,
    )
    print(render_text(proposal))
    return EXIT_OK


def _bench(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from chute.bench import HEADERS, bench, render_rows, write_chart

    console = Console(file=sys.stderr)
    options = LoadOptions(
        format=args.format, compression=args.compression, password_file=args.password_file, insecure=args.insecure
    )
    quiet = args.json or not sys.stderr.isatty()
    with console.status("benchmarking", spinner="dots") if not quiet else contextlib.nullcontext() as status:

        def say(message: str) -> None:
            if status is not None:
                status.update(message)
            elif not args.json:
                print(f"chute bench: {message}", file=sys.stderr)

        report = bench(args.sources, args.target, options, progress=say)
    if args.chart:
        write_chart(report, args.chart)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return EXIT_OK
    table = Table(*HEADERS, title=f"{report.rows:,} rows into {report.target}")
    for row in render_rows(report):
        table.add_row(*row)
    Console(soft_wrap=False).print(table)
    if args.chart:
        print(f"chart: {args.chart}")
    return EXIT_OK


def _time_queries(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from chute.report import human_bytes
    from chute.timing import time_queries

    console = Console(file=sys.stderr)
    quiet = args.json or not sys.stderr.isatty()
    with console.status("timing queries", spinner="dots") if not quiet else contextlib.nullcontext() as progress:
        report = time_queries(
            args.directory,
            args.target,
            args.tries,
            args.password_file,
            args.insecure,
            progress=progress.update if progress is not None else None,
        )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        digits = 3 if report.resolution_s >= 1e-3 else 6

        def seconds(value: float | None) -> str:
            return "" if value is None else f"{value:.{digits}f}"

        table = Table(
            "query",
            "state",
            "min s",
            "median s",
            "max s",
            "rows read",
            "peak memory",
            title=f"{report.tries} tries after {report.warmup} warm-up, from {report.source} of {report.target}",
        )
        for q in report.queries:
            table.add_row(
                q.name,
                q.state,
                seconds(q.min_s),
                seconds(q.median_s),
                seconds(q.max_s),
                "" if q.read_rows is None else f"{q.read_rows:,}",
                "" if q.memory_bytes is None else human_bytes(q.memory_bytes),
            )
        table.add_row("total", "", "", seconds(report.total_median_s), "", "", "", style="bold")
        Console(soft_wrap=False).print(table)
        if report.failed:
            print(f"total: sum of medians of the queries that ran; {report.failed} failed, not counted")
        step = "millisecond" if report.resolution_s >= 1e-3 else "microsecond"
        print(f"runs tagged /* chute-time-queries:{report.run_id}:... */ in the log; times to the {step}")
    for q in report.queries:
        if q.state == "failed":
            print(f"chute: error: {q.error}", file=sys.stderr)
    return EXIT_OK if report.ok else EXIT_FAILED


def _status(args: argparse.Namespace) -> int:
    rows = status(args.table, args.target, args.password_file, args.insecure)
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        print("nothing loaded yet")
        return EXIT_OK
    from rich.console import Console
    from rich.table import Table

    table = Table("table", "source", "state", "rows loaded", "rows rejected", "at", "last error")
    for r in rows:
        table.add_row(
            r["table"],
            os.path.relpath(r["source"]) if len(r["source"]) > 60 else r["source"],
            r["state"],
            f"{int(r['rows_loaded']):,}",
            f"{int(r['rows_rejected']):,}",
            r["at"],
            r["last_error"][:80],
        )
    Console(soft_wrap=False).print(table)
    claimed = [r for r in rows if r.get("claimed_by")]
    if claimed:
        claims = Table("worker", "source", "claimed since", "lease ends", title="live claims (loading now)")
        for r in claimed:
            claims.add_row(r["claimed_by"], r["source"], r["claimed_since"], r["lease_end"])
        Console(soft_wrap=False).print(claims)
    return EXIT_OK


def entry() -> None:
    raise SystemExit(main())


if __name__ == "__main__":
    entry()
