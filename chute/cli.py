"""The `chute` command: parses flags, calls the library, prints the report."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import textwrap
from collections.abc import Sequence
from typing import Any, NoReturn

from chute import __version__
from chute.errors import ChuteError, SourceError, UsageError
from chute.inspect import query, status
from chute.load import DEFAULT_BATCH_BYTES, ON_CHANGE, LoadOptions, load
from chute.load.claims import DEFAULT_LEASE_SECONDS
from chute.report import LoadReport, render_text

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class ArgsError(Exception):
    """The command line did not parse; the message is one line."""


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line, with a guess for a mistyped option.

    argparse prints the whole usage and exits; this parser raises ``ArgsError``, and
    ``main`` prints one line (or a JSON object under ``--json``) and exits with 2.
    """

    argv: Sequence[str] = ()
    known: Sequence[str] = ()
    """The option strings the command line may use (this command's and the global ones)."""

    def error(self, message: str) -> NoReturn:
        raise ArgsError(self._unknown_option() or _command_guess(self, message) or message)

    def _unknown_option(self) -> str | None:
        """'unknown option --tabel (did you mean --table?)' for the first option nobody knows."""
        import difflib

        for word in self.argv:
            if word == "--":
                break
            name = word.split("=", 1)[0]
            if not name.startswith("-") or name == "-" or name.lstrip("-").replace(".", "").isdigit():
                continue
            if any(o == name or (name.startswith("--") and o.startswith(name)) for o in self.known):
                continue
            close = difflib.get_close_matches(name, [o for o in self.known if o.startswith("--")], n=1, cutoff=0.6)
            return f"unknown option {name}" + (f" (did you mean {close[0]}?)" if close else " (see --help)")
        return None


def _command_guess(parser: argparse.ArgumentParser, message: str) -> str | None:
    """'unknown command 'lod' (did you mean load?)' for a mistyped command."""
    import difflib

    commands = list(_subparsers(parser))
    if not message.startswith("argument COMMAND: invalid choice") or not commands:
        return None
    word = message.split("'")[1] if "'" in message else ""
    close = difflib.get_close_matches(word, commands, n=1)
    return f"unknown command {word!r}" + (
        f" (did you mean {close[0]}?)" if close else f": one of {', '.join(commands)}"
    )


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    return [s for action in parser._actions for s in action.option_strings]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _arm(parser: _Parser, argv: Sequence[str]) -> None:
    """Tell every parser the command line and the options its command knows."""
    commands = _subparsers(parser)
    chosen = next((w for w in argv if not w.startswith("-")), "")
    parser.argv = argv
    parser.known = _option_strings(parser) + (_option_strings(commands[chosen]) if chosen in commands else [])
    for sub in commands.values():
        if isinstance(sub, _Parser):
            sub.argv, sub.known = argv, _option_strings(sub) + _option_strings(parser)


def _command(sub: Any, name: str, summary: str, examples: str, description: str = "") -> argparse.ArgumentParser:
    """A subcommand with its one-line summary, a description and examples."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=textwrap.fill(f"{summary[0].upper()}{summary[1:]}. {description}".strip(), 79),
        epilog="examples:\n" + "".join(f"  {line}\n" for line in examples.strip().splitlines()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def _target_options(p: argparse.ArgumentParser, target_help: str) -> None:
    p.add_argument("--target", help=target_help)
    p.add_argument("--password-file", metavar="FILE", help="file holding the server password (server targets)")
    p.add_argument("--insecure", action="store_true", help="do not verify TLS certificates (https targets)")


TARGET_HELP = (
    "embedded database directory, or http(s)://[user[:password]@]host:port[/database] "
    "(default $CHUTE_TARGET, else a server from $CLICKHOUSE_HOST, else ./chute.db)"
)


def _parser() -> _Parser:
    parser = _Parser(prog="chute", description="Fast, exactly-once bulk loads into ClickHouse.")
    parser.add_argument("--version", action="version", version=f"chute {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _load_parser(sub)
    _export_parser(sub)
    _design_parser(sub)
    _bench_parser(sub)
    _status_parser(sub)
    _query_parser(sub)
    _time_queries_parser(sub)
    return parser


def _load_parser(sub: Any) -> None:
    p = _command(
        sub,
        "load",
        "load files into a table, exactly once",
        """
chute load data/ --table events              # every known file under data/, into ./chute.db
chute load 'logs/**/*.json.gz' -t logs --target http://localhost:8123
chute load s3://bucket/events/ -t events --s3-endpoint http://127.0.0.1:9000
chute load postgresql://me@db:5432/shop/orders -t orders --cursor updated_at
chute load kafka://broker:9092/clicks -t clicks --follow
""",
        "Re-running the same command loads only what is new: the ledger in the target remembers "
        "every file (path, size, mtime) that was loaded.",
    )
    p.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="files, directories, globs (** and {a,b}); s3://bucket/prefix/**; http(s):// URLs; "
        "hdfs://namenode:port/path; postgresql:// or mysql://user@host:port/db/table; "
        "kafka://broker:port/topic",
    )
    p.add_argument("--table", "-t", required=True, help="table or db.table")
    _target_options(p, TARGET_HELP)
    p.add_argument("--connections", type=int, default=2, help="parallel connections to a server (default 2)")
    p.add_argument("--format", help="json, csv, tsv, parquet, native, orc, avro, arrow (default: by extension)")
    p.add_argument("--compression", help="gzip, zstd, bz2, xz, lz4, none (default: by extension)")
    p.add_argument("--delimiter", help="CSV field delimiter, one character")
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
    p.add_argument(
        "--batch-mb",
        type=int,
        default=DEFAULT_BATCH_BYTES // 2**20,
        help=f"MiB of input per insert batch (default {DEFAULT_BATCH_BYTES // 2**20})",
    )
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
    p.add_argument("--json", action="store_true", help='print one JSON object as the report ("ok": false on failure)')
    p.add_argument("--quiet", "-q", action="store_true", help="no progress, no DDL, only errors")


def _export_parser(sub: Any) -> None:
    e = _command(
        sub,
        "export",
        "write a table or query to files, one per partition, in parallel",
        """
chute export events out/ --partition-by 'toYYYYMM(ts)'
chute export 'SELECT * FROM events WHERE day = today()' s3://bucket/daily/ --format parquet
""",
    )
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
    _target_options(e, "where the table is: " + TARGET_HELP)
    e.add_argument("--json", action="store_true", help="print one JSON object as the report")
    e.add_argument("--quiet", "-q", action="store_true", help="no progress, only errors")


def _design_parser(sub: Any) -> None:
    d = _command(
        sub,
        "design",
        "propose a table layout, measured on a sample",
        """
chute design data/ --table events > events.sql      # then: chute load data/ -t events --design events.sql
chute design 'logs/*.csv.gz' --enums --time-budget 30
""",
    )
    d.add_argument("sources", nargs="+", metavar="SOURCE", help="files, directories or globs to sample, as for load")
    d.add_argument("--table", "-t", default="data", help="table name in the proposal (default data)")
    d.add_argument("--target", help="embedded directory where the sample is measured (default ./chute.db)")
    d.add_argument("--sample-rows", type=int, default=300_000, help="rows to sample (default 300000)")
    d.add_argument("--format", help="input format, as for load (default: by extension)")
    d.add_argument("--compression", help="input compression, as for load (default: by extension)")
    d.add_argument("--delimiter", help="CSV field delimiter, one character")
    d.add_argument("--enums", action="store_true", help="allow Enum8 for strings with a few values")
    d.add_argument("--no-provenance", action="store_true", help="leave the provenance columns out")
    d.add_argument("--time-budget", type=float, default=60.0, help="seconds to spend measuring (default 60)")


def _bench_parser(sub: Any) -> None:
    b = _command(
        sub,
        "bench",
        "time every load method that fits your data and target",
        """
chute bench data/ --target http://localhost:8123
chute bench 'data/*.parquet' --chart bench.html
""",
    )
    b.add_argument("sources", nargs="+", metavar="SOURCE", help="files, directories or globs to load, as for load")
    _target_options(b, "embedded directory or http(s):// server (scratch tables, dropped afterwards)")
    b.add_argument("--format", help="input format, as for load (default: by extension)")
    b.add_argument("--compression", help="input compression, as for load (default: by extension)")
    b.add_argument("--chart", metavar="FILE", help="write a chart: .png (needs matplotlib) or .html")
    b.add_argument("--json", action="store_true", help="print one JSON object as the report")


def _status_parser(sub: Any) -> None:
    s = _command(
        sub,
        "status",
        "the ledger: state of every loaded file",
        """
chute status                          # every table of ./chute.db
chute status --table events --target http://localhost:8123 --json
""",
    )
    s.add_argument("--table", "-t", help="only this table (default: all tables)")
    _target_options(s, TARGET_HELP)
    s.add_argument("--json", action="store_true", help="print the rows as one JSON array")


def _query_parser(sub: Any) -> None:
    q = _command(
        sub,
        "query",
        "run SQL in the target",
        """
chute query 'SELECT count() FROM events'
chute query 'SELECT * FROM events LIMIT 10' --format JSONEachRow --target http://localhost:8123
""",
    )
    q.add_argument("sql", metavar="SQL", help="one SQL statement")
    _target_options(q, TARGET_HELP)
    q.add_argument(
        "--format", default=None, help="engine output format (default PrettyCompact on a terminal, TSV otherwise)"
    )


def _time_queries_parser(sub: Any) -> None:
    tq = _command(
        sub,
        "time-queries",
        "time every .sql file in a directory, from the engine's query log",
        """
chute time-queries queries/ --tries 5
chute time-queries queries/ --target http://localhost:8123 --json
""",
    )
    tq.add_argument("directory", metavar="DIR_OF_SQL", help="one query per .sql file, run in name order")
    _target_options(tq, TARGET_HELP)
    tq.add_argument("--tries", type=int, default=3, help="measured runs per query, after one warm-up (default 3)")
    tq.add_argument("--json", action="store_true", help="print one JSON object as the report")


ALLOCATOR_CONF = "background_thread:true,dirty_decay_ms:1000"
"""The engine's allocator (jemalloc, read from JE_MALLOC_CONF when the engine loads): hand freed
pages back within a second, not five, so the process's RSS follows what the engine holds
(a 7 M-row Parquet load under --memory-limit 1GB: 0.7 GiB peak instead of 0.75-1 GiB)."""


def main(argv: Sequence[str] | None = None) -> int:
    if "chdb" not in sys.modules:  # the command owns its process; a user's setting wins
        os.environ.setdefault("JE_MALLOC_CONF", ALLOCATOR_CONF)
    words = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    _arm(parser, words)
    try:
        args = parser.parse_args(words)
    except ArgsError as exc:
        return _fail(str(exc), EXIT_USAGE, as_json="--json" in words)
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
        code = EXIT_USAGE if isinstance(exc, (UsageError, SourceError)) else EXIT_FAILED
        return _fail(str(exc), code, as_json=bool(getattr(args, "json", False)))
    except KeyboardInterrupt:
        print("chute: interrupted; re-run the same command to finish the load", file=sys.stderr)
        return 130


def _fail(message: str, code: int, as_json: bool) -> int:
    """One line on stderr; under --json also one object on stdout, so a script always gets JSON."""
    if as_json:
        print(json.dumps({"ok": False, "error": message}, indent=2))
    print(f"chute: error: {message}", file=sys.stderr)
    return code


def _load(args: argparse.Namespace) -> int:
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

    console = Console(soft_wrap=False)
    tables: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        tables.setdefault(str(r["table"]), []).append(r)
    for name, of_table in tables.items():
        _print_status_table(console, name, of_table)
    claimed = [r for r in rows if r.get("claimed_by")]
    if claimed:
        from rich import box
        from rich.table import Table

        prefix, names = _distinct_parts([str(r["source"]) for r in claimed], max(16, console.width - 60))
        console.print("live claims (loading now)" + (f", sources under {prefix}" if prefix else ""), markup=False)
        claims = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for column in ("worker", "source", "since", "lease ends"):
            claims.add_column(column, no_wrap=True)
        for r, source in zip(claimed, names, strict=True):
            claims.add_row(str(r["claimed_by"]), source, str(r["claimed_since"]), str(r["lease_end"]))
        console.print(claims)
    return EXIT_OK


def _print_status_table(console: Any, name: str, rows: list[dict[str, Any]]) -> None:
    """One table's ledger rows; long source paths shown by what tells them apart."""
    from rich import box
    from rich.table import Table

    errors = any(r["last_error"] for r in rows)
    loaded = [f"{int(r['rows_loaded']):,}" for r in rows]
    at = [str(r["at"])[:19] for r in rows]  # to the second
    # The widths of the other columns (state, loaded, rejected, at, last error if any), 3 apart.
    others = [7, max(6, *map(len, loaded)), 8, max(map(len, at)), *([16] if errors else [])]
    budget = console.width - sum(others) - 3 * (len(others) + 1)
    prefix, names = _distinct_parts([str(r["source"]) for r in rows], max(16, budget))
    console.print(
        f"table {name}" + (f", sources under {prefix}" if prefix else ""), markup=False, highlight=False, soft_wrap=True
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("source", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("loaded", justify="right", no_wrap=True)
    table.add_column("rejected", justify="right", no_wrap=True)
    table.add_column("at", no_wrap=True)
    if errors:
        table.add_column("last error", overflow="fold", ratio=1)
    for r, source, count, when in zip(rows, names, loaded, at, strict=True):
        cells = [source, str(r["state"]), count, f"{int(r['rows_rejected']):,}", when]
        table.add_row(*cells, *([str(r["last_error"])[:200]] if errors else []))
    console.print(table)


def _distinct_parts(sources: list[str], width: int) -> tuple[str, list[str]]:
    """The directory all sources share (shown once), and what tells each apart.

    What is left is cut from the left ("…") to `width`, so a file's name stays in view.
    """
    split = [s.split("/") for s in sources]
    shared = 0
    while all(len(parts) > shared + 1 and parts[shared] == split[0][shared] for parts in split):
        shared += 1
    prefix = "/".join(split[0][:shared]) + "/" if shared else ""
    if len(prefix) < 2:
        prefix = ""
    names = [s[len(prefix) :] for s in sources]
    return prefix, [n if len(n) <= width else "…" + n[-(width - 1) :] for n in names]


def entry() -> None:
    raise SystemExit(main())


if __name__ == "__main__":
    entry()
