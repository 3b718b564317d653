"""The command line: the parser of every command, with one-line errors."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn

from chute import __version__
from chute.cli.arguments import ENDS_HELP, TARGET_HELP, command, target_options
from chute.cli.load_arguments import load_parser


class ArgsError(Exception):
    """The command line did not parse; the message is one line."""


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line, with a guess for a mistyped option.

    argparse prints the whole usage and exits; this parser raises ``ArgsError``, and
    ``main`` prints one line (or a JSON object under ``--json``) and exits with 2.
    """

    argv: Sequence[str] = ()
    known: Sequence[str] = ()
    """The option strings the command line may use (this command's and the global ones)."""
    suggested: Sequence[str] = ()
    """The ones a guess may name: the command's own (`--version` goes before a command)."""
    command: str = ""

    def error(self, message: str) -> NoReturn:
        raise ArgsError(self._unknowncommand() or self._unknown_option() or _command_guess(self, message) or message)

    def _unknowncommand(self) -> str | None:
        """A mistyped command is named first: its options are unknown only because the command is."""
        commands = list(subparsers(self))
        word = next((w for w in self.argv if not w.startswith("-")), "")
        if not commands or not word or word in commands:
            return None
        return guess_command(word, commands)

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
            if self.command == "query" and name == "--json":
                return "unknown option --json: chute query prints JSON with --format JSON (or JSONEachRow)"
            options = [o for o in self.suggested or self.known if o.startswith("--")]
            close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
            return f"unknown option {name}" + (f" (did you mean {close[0]}?)" if close else " (see --help)")
        return None


def _command_guess(parser: argparse.ArgumentParser, message: str) -> str | None:
    """'unknown command lod; did you mean load?' for a mistyped command."""
    commands = list(subparsers(parser))
    if not message.startswith("argument COMMAND: invalid choice") or not commands:
        return None
    word = message.split("'")[1] if "'" in message else ""
    return guess_command(word, commands)


def guess_command(word: str, commands: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(word, commands, n=1)
    return f"unknown command {word}" + (f"; did you mean {close[0]}?" if close else f": one of {', '.join(commands)}")


def _option_strings(parser: argparse.ArgumentParser) -> list[str]:
    return [s for action in parser._actions for s in action.option_strings]


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def arm(parser: Parser, argv: Sequence[str]) -> None:
    """Tell every parser the command line and the options its command knows."""
    commands = subparsers(parser)
    chosen = next((w for w in argv if not w.startswith("-")), "")
    parser.argv = argv
    parser.known = _option_strings(parser) + (_option_strings(commands[chosen]) if chosen in commands else [])
    parser.suggested = _option_strings(commands[chosen]) if chosen in commands else _option_strings(parser)
    parser.command = chosen if chosen in commands else ""
    for name, sub in commands.items():
        if isinstance(sub, Parser):
            sub.argv, sub.known = argv, _option_strings(sub) + _option_strings(parser)
            sub.suggested, sub.command = _option_strings(sub), name


def build_parser() -> Parser:
    parser = Parser(prog="chute", description="Fast, exactly-once bulk loads into ClickHouse.")
    parser.add_argument("--version", action="version", version=f"chute {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    load_parser(sub)
    _export_parser(sub)
    _copy_parser(sub)
    _design_parser(sub)
    _bench_parser(sub)
    _status_parser(sub)
    _forget_parser(sub)
    _query_parser(sub)
    _time_queries_parser(sub)
    for each in sub.choices.values():  # after the command too (`chute load ... --debug`)
        each.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    return parser


def _export_parser(sub: Any) -> None:
    e = command(
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
    e.add_argument("--workers", type=int, help="partitions written at once (default: the cores this process may use)")
    e.add_argument("--s3-endpoint", help="s3:// destinations: an S3-compatible endpoint, http(s)://host:port")
    target_options(e, "where the table is: " + TARGET_HELP)
    e.add_argument("--json", action="store_true", help="print one JSON object as the report")
    e.add_argument("--quiet", "-q", action="store_true", help="no progress, only errors")


def _copy_parser(sub: Any) -> None:
    c = command(
        sub,
        "copy",
        "copy a table between servers and embedded databases, partition by partition, verified",
        """
chute copy events --from http://old:8123/db --to http://new:8123/db
chute copy events --from http://old:8123/db --to ./local.db --partitions 202401,202402 --dry-run
chute copy events --from ./local.db --to http://new:8123/db --as events_2024
""",
        "Each partition is copied once (a ledger in the destination), its row count and checksum compared "
        "on both sides; a re-run copies only what is missing or changed in the source.",
    )
    c.add_argument("table", metavar="TABLE", help="the source table, table or db.table")
    c.add_argument("--from", dest="source", required=True, metavar="SOURCE", help="where the table is: " + ENDS_HELP)
    c.add_argument("--to", dest="dest", required=True, metavar="DEST", help="where it goes: " + ENDS_HELP)
    c.add_argument("--as", dest="as_table", metavar="NAME", help="the destination table (default: the same name)")
    c.add_argument("--partitions", metavar="P1,P2", help="only these partitions (ids or values, comma-separated)")
    c.add_argument("--where", metavar="EXPR", help="only the rows matching this SQL condition (run on the source)")
    c.add_argument(
        "--method",
        default="auto",
        choices=("auto", "pull", "stream", "files"),
        help="pull (the destination reads the source), stream (chute passes the Native blocks through), "
        "files (each partition through a file in --via), "
        "auto (pull where the destination reaches the source and it has no password, else stream)",
    )
    c.add_argument(
        "--via",
        metavar="DIR|s3://BUCKET/PREFIX/",
        help="with --method files: where each partition's file goes (removed once it is in the destination)",
    )
    c.add_argument("--s3-endpoint", help="an s3:// --via: an S3-compatible endpoint, http(s)://host:port")
    c.add_argument(
        "--dry-run", action="store_true", help="list the partitions, rows, sizes and the method; write nothing"
    )
    c.add_argument(
        "--workers", type=int, help="partitions copied at once (default 4 into a server, 2 into an embedded database)"
    )
    c.add_argument("--tries", type=int, default=3, help="copies of a partition whose figures differ before it fails")
    c.add_argument(
        "--cluster",
        metavar="NAME",
        help="the destination's cluster: a missing table is made on every node, replicated (over several shards: "
        "<table>_local, and <table> Distributed over it, written by shard)",
    )
    c.add_argument(
        "--shard-by",
        default="rand()",
        metavar="EXPR",
        help="with --cluster over several shards: the sharding key of the Distributed table made (default rand(): "
        "a whole partition to one shard)",
    )
    c.add_argument(
        "--node",
        action="append",
        metavar="URL",
        help="a node of the source's cluster, http(s)://host:port (repeatable): where a Distributed source's "
        "shards are listed (default: the cluster's hosts at the source's port)",
    )
    c.add_argument(
        "--to-node",
        action="append",
        metavar="URL",
        help="a node of the destination's cluster, http(s)://host:port (repeatable): where a Distributed "
        "destination's shards are written (default: the cluster's hosts at the destination's port)",
    )
    c.add_argument("--from-password-file", metavar="FILE", help="file holding the source server's password")
    c.add_argument("--to-password-file", metavar="FILE", help="file holding the destination server's password")
    c.add_argument("--insecure", action="store_true", help="do not verify TLS certificates (https ends)")
    c.add_argument("--json", action="store_true", help='print one JSON object as the report ("ok": false on failure)')
    c.add_argument("--quiet", "-q", action="store_true", help="no progress, only errors")


def _design_parser(sub: Any) -> None:
    d = command(
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
    d.add_argument(
        "--target", help="embedded directory where the sample is measured (default ./chute.db if there, else memory)"
    )
    d.add_argument("--sample-rows", type=int, default=300_000, help="rows to sample (default 300000)")
    d.add_argument("--format", help="input format, as for load (default: by extension)")
    d.add_argument("--compression", help="input compression, as for load (default: by extension)")
    d.add_argument("--delimiter", help="CSV field delimiter, one character")
    d.add_argument("--enums", action="store_true", help="allow Enum8 for strings with a few values")
    d.add_argument("--no-provenance", action="store_true", help="leave the provenance columns out")
    d.add_argument("--time-budget", type=float, default=60.0, help="seconds to spend measuring (default 60)")


def _bench_parser(sub: Any) -> None:
    b = command(
        sub,
        "bench",
        "time every load method that fits your data and target",
        """
chute bench data/ --target http://localhost:8123
chute bench 'data/*.parquet' --chart bench.html
""",
    )
    b.add_argument("sources", nargs="+", metavar="SOURCE", help="files, directories or globs to load, as for load")
    target_options(b, "embedded directory or http(s):// server (scratch tables, dropped afterwards)")
    b.add_argument("--format", help="input format, as for load (default: by extension)")
    b.add_argument("--compression", help="input compression, as for load (default: by extension)")
    b.add_argument(
        "--chart",
        metavar="FILE",
        help="write a chart: .html, or .png, .svg, .pdf (these need matplotlib: chute[chart])",
    )
    b.add_argument("--json", action="store_true", help="print one JSON object as the report")


def _status_parser(sub: Any) -> None:
    s = command(
        sub,
        "status",
        "the ledger: state of every loaded file",
        """
chute status                          # every table of ./chute.db
chute status data/people.csv -t people # one file in full: when, its size and mtime, why a load skips it
chute status --table events --target http://localhost:8123 --json
chute status --table events --target http://node1:8123 --node http://node3:8123   # rows per shard and replica
""",
    )
    s.add_argument(
        "sources",
        nargs="*",
        metavar="FILE",
        help="only these files (paths, directories, globs, URLs, as loaded), each in full: when and by which "
        "load, the size and mtime recorded, and whether a load skips it now",
    )
    s.add_argument("--table", "-t", help="only this table (default: all tables)")
    target_options(s, TARGET_HELP)
    s.add_argument(
        "--node",
        action="append",
        default=[],
        metavar="URL",
        help="another node of the cluster, http(s)://host:port (repeatable): its replicas are counted too",
    )
    s.add_argument(
        "--json",
        action="store_true",
        help='print the rows as one JSON array; for a replicated or Distributed table, {"units": [...], '
        '"replicas": [...]}',
    )


def _forget_parser(sub: Any) -> None:
    f = command(
        sub,
        "forget",
        "forget loaded files, so that the next load loads them again",
        """
chute forget data/people.csv --table people   # then: chute load data/ --table people --header
chute forget 'logs/2026-11-*.json.gz' -t logs --target http://localhost:8123
""",
        "Their rows (found by _source) and rejected rows are deleted and the ledger marks them "
        "forgotten: the next load loads them once, as new files. Files are matched against the "
        "ledger (chute status lists it), so a file that is gone can be forgotten too.",
    )
    f.add_argument(
        "sources", nargs="+", metavar="FILE", help="files, directories or globs (** and {a,b}), or URLs, as loaded"
    )
    f.add_argument("--table", "-t", required=True, help="the table they were loaded into (table or db.table)")
    target_options(f, TARGET_HELP)
    f.add_argument(
        "--keep-rows",
        action="store_true",
        help="only the ledger forgets; the rows stay (a table without provenance columns: delete them yourself)",
    )
    f.add_argument("--json", action="store_true", help="print one JSON object as the report")


def _query_parser(sub: Any) -> None:
    q = command(
        sub,
        "query",
        "run SQL in the target",
        """
chute query 'SELECT count() FROM events'
chute query 'SELECT * FROM events LIMIT 10' --format JSONEachRow --target http://localhost:8123
""",
    )
    q.add_argument("sql", metavar="SQL", help="one SQL statement")
    target_options(q, TARGET_HELP)
    q.add_argument(
        "--format", default=None, help="engine output format (default PrettyCompact on a terminal, TSV otherwise)"
    )


def _time_queries_parser(sub: Any) -> None:
    tq = command(
        sub,
        "time-queries",
        "time every .sql file in a directory, from the engine's query log",
        """
chute time-queries queries/ --tries 5
chute time-queries queries/ --target http://localhost:8123 --json
""",
    )
    tq.add_argument("directory", metavar="DIR_OF_SQL", help="one query per .sql file, run in name order")
    target_options(tq, TARGET_HELP)
    tq.add_argument("--tries", type=int, default=3, help="measured runs per query, after one warm-up (default 3)")
    tq.add_argument("--json", action="store_true", help="print one JSON object as the report")
