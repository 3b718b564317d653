"""The measuring commands: `chute design`, `chute bench` and `chute time-queries`."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from chute.cli.common import EXIT_FAILED, EXIT_OK
from chute.load import LoadOptions


def design_command(args: argparse.Namespace) -> int:
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


def bench_command(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from chute.bench import HEADERS, bench, check_chart, render_rows, write_chart

    if args.chart:
        check_chart(args.chart)
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


def time_queries_command(args: argparse.Namespace) -> int:
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
