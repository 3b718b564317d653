"""`chute load`: one bounded load, or loads one after another with --follow."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from chute.cli.common import EXIT_FAILED, EXIT_OK, parse_size
from chute.errors import UsageError
from chute.load import LoadOptions, load
from chute.report import LoadReport, render_text


def load_command(args: argparse.Namespace) -> int:
    from chute.progress import Progress

    options = _load_options(args)
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
    return _told(args, report)


def _load_options(args: argparse.Namespace) -> LoadOptions:
    options = LoadOptions(
        format=args.format,
        compression=args.compression,
        delimiter=args.delimiter,
        header=args.header,
        workers=args.workers,
        order_by=args.order_by,
        partition_by=args.partition_by,
        provenance=not args.no_provenance,
        add_columns=args.add_columns,
        on_change=args.on_change,
        batch_mb=args.batch_mb,
        batch_files=args.batch_files,
        password_file=args.password_file,
        insecure=args.insecure,
        connections=args.connections,
        max_errors=args.max_errors,
        strict=args.strict,
        design=args.design,
        method=args.method,
        spare=args.spare,
        cluster=args.cluster,
        shard_by=args.shard_by,
        insert_via_distributed=args.insert_via_distributed,
        allow_missing_shards=args.allow_missing_shards,
        nodes=tuple(args.node),
        s3_endpoint=args.s3_endpoint,
        split_by=args.split_by,
        where=args.where,
        cursor=args.cursor,
        worker_id=args.worker_id,
        lease_seconds=args.lease_seconds,
    )
    if args.memory_limit:
        options = dataclasses.replace(options, memory_limit=parse_size(args.memory_limit, "--memory-limit"))
    if args.split_size:
        options = dataclasses.replace(options, split_size=parse_size(args.split_size, "--split-size"))
    return options


def _told(args: argparse.Namespace, report: LoadReport) -> int:
    """The report as asked (JSON, text, or nothing), failures and rejects on stderr; the exit code."""
    failures = [
        f.error if f.source in f.error else f"{f.source}: {f.error}" for f in report.files if f.state == "failed"
    ]
    if args.json:
        fields = report.to_dict()
        if failures:
            more = f" (and {len(failures) - 1} more failed)" if len(failures) > 1 else ""
            fields["error"] = failures[0] + more
        print(json.dumps(fields, indent=2))
    elif not args.quiet:
        _print_report(report)
    for failure in failures:
        print(f"chute: error: {failure}", file=sys.stderr)
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
    lines = []
    for label, value in render_text(report):
        if label == "skipped":  # a command to copy: one line, never cut
            lines.append(f"{label}: {value}")
            continue
        table.add_row(label, value)
    console = Console(file=sys.stdout, soft_wrap=True)
    console.print(table)
    for line in lines:
        console.print(line, markup=False, highlight=False)
    for note in report.notes:
        console.print(f"note: {note}", markup=False)
