"""The arguments of `chute load`: the largest command, in a module of its own."""

from __future__ import annotations

from typing import Any

from chute.cli.arguments import TARGET_HELP, command, target_options
from chute.load import DEFAULT_BATCH_BYTES, DEFAULT_BATCH_FILES, METHODS, ON_CHANGE
from chute.load.claims import DEFAULT_LEASE_SECONDS


def load_parser(sub: Any) -> None:
    p = command(
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
    target_options(p, TARGET_HELP)
    p.add_argument("--connections", type=int, default=2, help="parallel connections to a server (default 2)")
    p.add_argument("--format", help="json, csv, tsv, parquet, native, orc, avro, arrow (default: by extension)")
    p.add_argument("--compression", help="gzip, zstd, xz, lz4, none (default: by extension; bz2 files fail: no reader)")
    p.add_argument("--delimiter", help="CSV field delimiter, one character")
    header = p.add_mutually_exclusive_group()
    header.add_argument(
        "--header",
        dest="header",
        action="store_true",
        default=None,
        help="CSV/TSV: the first line names the columns (default: detected by the rows' types; a file whose "
        "every column is text is read without one)",
    )
    header.add_argument("--no-header", dest="header", action="store_false", help="CSV/TSV: every line is a row")
    p.add_argument("--workers", type=int, help="engine threads (default: the cores this process may use)")
    p.add_argument(
        "--worker-id",
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
        "--batch-files",
        type=int,
        default=DEFAULT_BATCH_FILES,
        help=f"files per insert batch at most (default {DEFAULT_BATCH_FILES}; into a server, a worker alone on a job "
        "takes its files in two batches, else in eight)",
    )
    p.add_argument(
        "--method",
        choices=METHODS,
        default="auto",
        help="server targets: client-convert (the engine here parses and sends Native), server-parse (files "
        "sent as they are, the server parses them, provenance from the stage's defaults), server-side (the "
        "server reads http(s) URLs and s3:// objects itself), or auto (picks from formats, sizes and cores; "
        "the report says which ran and why); convert and pass-through are the old names",
    )
    spare = p.add_mutually_exclusive_group()
    spare.add_argument(
        "--spare-server",
        dest="spare",
        action="store_const",
        const="server",
        help="with --method auto: parse here, leave the server's cores to its queries",
    )
    spare.add_argument(
        "--spare-client",
        dest="spare",
        action="store_const",
        const="client",
        help="with --method auto: let the server parse every file it can (chute checks its integers and dates)",
    )
    p.add_argument(
        "--cluster",
        metavar="NAME",
        help="the server's cluster: a new table is made on every node (NAME_local replicated, the table "
        "Distributed), and so are the ledger and rejects; s3:// sources are read by its nodes (s3Cluster)",
    )
    p.add_argument(
        "--shard-by",
        metavar="EXPR",
        default="rand()",
        help="with --cluster: the sharding key of the Distributed table chute makes (default rand())",
    )
    p.add_argument(
        "--insert-via-distributed",
        action="store_true",
        help="into a Distributed table sharded by a key: send each batch once, to the target node, whose "
        "Distributed engine routes the rows into each shard's stage (every node of every shard must answer)",
    )
    p.add_argument(
        "--allow-missing-shards",
        action="store_true",
        help="into a Distributed table with a random key (rand()): load into the shards chute reaches when "
        "another does not answer (a note names it); without it the load fails",
    )
    p.add_argument(
        "--node",
        action="append",
        default=[],
        metavar="URL",
        help="a node of the cluster, http(s)://host:port (repeatable): where a Distributed table's shards are "
        "written (default: the cluster's hosts at the target's port)",
    )
    p.add_argument("--design", help="a new table's layout: 'auto' (measured, see `chute design`) or FILE.sql")
    p.add_argument(
        "--max-errors",
        help="bad rows allowed per file: a count (10) or a share (0.1%%); default: a file fails when more than "
        "100 and more than 10%% of its rows are bad",
    )
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
        "past a quarter of it, big text files load in ranges of a sixteenth of it",
    )
    p.add_argument("--json", action="store_true", help='print one JSON object as the report ("ok": false on failure)')
    p.add_argument(
        "--quiet", "-q", action="store_true", help="only errors and warnings: no progress, no DDL, no report"
    )
