"""server-parse: a server parses local files' bytes itself, and the stage fills provenance.

Each file goes as it is on disk (gzip as the body's Content-Encoding) into a stage table of its own whose
provenance columns are DEFAULT expressions: `_source`, `_source_mtime` and `_load_id` constants, `_source_row` =
`rowNumberInAllBlocks() + 1`. The POST names only the data columns. rowNumberInAllBlocks() counts within one
insert block (measured on 18.16: it starts again at every block the format reader makes, and squashing blocks
afterwards does not help), so `max_insert_block_size` is set above the file's row count (its uncompressed size
bounds it), and parallel parsing is off where the server has it. Before anything moves in, one query checks
every stage's `_source_row` is exactly 1..n; a stage that is not is dropped and its file read here
(client-convert), as is a file the server cannot parse (then the usual fallbacks give bad rows their rejects).

The stages of a batch fill at once, then move in with one ALTER (ATTACH PARTITION ... FROM each), so the books
(ledger, claims) cost what they cost for any batch. The files of every batch go through one set of connections
(`Posts`), earlier batches first, so the server parses as many files at once as keep its cores busy, with no gap
while a batch keeps its books; stages are dropped in the background once their rows are in.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import itertools
import re
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from chute.capabilities import Capabilities
from chute.cores import usable_cores
from chute.errors import ChuteError, CommitUncertain, TargetError, TransientTargetError, UsageError
from chute.load.balance import Share
from chute.load.context import LoadContext
from chute.load.outcome import record_missing
from chute.load.posts import Posts
from chute.load.sizing import uncompressed_size
from chute.load.verify import Fingerprint, Verifier, checked_stages, missing_values
from chute.remote.http import retry
from chute.schema import Column
from chute.sql import TableName, quote_ident, quote_str
from chute.targets.engines import unreplicated
from chute.targets.staging import ATTACH_PER_STATEMENT, NO_DEDUPLICATION, copying_in, execute_ddl, stage_name
from chute.units import Unit

SERVER_READ_SETTINGS = frozenset({"date_time_input_format", "format_csv_delimiter"})
"""Reading settings a server of any version knows, for the paths where it parses."""
TRIM_SETTING = "input_format_csv_trim_whitespaces"
OMITTED_SETTING = "input_format_defaults_for_omitted_fields"
ONE_BLOCK_BYTES = 256 * 2**20
"""Files up to this size uncompressed go in one insert block (held in the server's memory)."""
RETRIES = 4
BACKOFF_SECONDS = 0.5
DROP_THREADS = 2
"""Threads that drop the stages whose rows are in, while the next files are parsed."""
CHECK_THREADS = 2
"""Batches whose values chute checks at once (chute.load.verify)."""
_KEY_NAMES = re.compile(r"\b(_source|_source_mtime|_source_row|_load_id)\b")


def server_time(mtime_ns: int, capabilities: Capabilities) -> str:
    """A time as a literal the server parses: to the nanosecond where it has DateTime64,
    as the embedded path stores it; else to the second (DateTime is all such a table holds)."""
    seconds, fraction = divmod(mtime_ns, 10**9)
    if not capabilities.datetime64:
        return f"toDateTime({seconds}, 'UTC')"
    stamp = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return f"toDateTime64('{stamp:%Y-%m-%d %H:%M:%S}.{fraction:09d}', 9, 'UTC')"


@dataclass(frozen=True)
class ServerInfo:
    """What auto asks of the server once: its cores, and the settings it knows."""

    cores: int
    parallel_parsing: bool
    """It has `input_format_parallel_parsing` (which cuts a body into many blocks)."""
    csv_keeps_spaces: bool = False
    """It has `input_format_csv_trim_whitespaces` (sent as 0); others trim CSV text (18.16 does)."""
    omitted_defaults: bool = False
    """It has `input_format_defaults_for_omitted_fields` (sent as 1); others give a field a record
    lacks its type's default, not the column's DEFAULT expression (18.16 does)."""


@dataclass
class Parsed:
    """What a batch's server-parse write did: rows per committed unit, and units to read here."""

    rows: dict[str, int]
    refused: dict[str, ChuteError]


class ServerParse:
    """Which units a server parses itself (auto's choice and why), and the staged write."""

    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self._server: ServerInfo | None = None
        self._engine: tuple[str, str] | None = None
        self._one_partition = False
        self._lock = threading.Lock()
        self.chosen: dict[str, bool] = {}
        self.why: dict[str, str] = {}
        """Per unit: why its method was chosen (for the report)."""
        self.refused: set[str] = set()
        """Units the server could not parse (or number) in this load: read here from now on."""
        self._posts: Posts | None = None
        self._drops: ThreadPoolExecutor | None = None
        self._dropping: list[Future[None]] = []
        self._batches = itertools.count()
        self.verifier = Verifier(ctx)
        self._checks: ThreadPoolExecutor | None = None
        self.verified: dict[str, list[Column]] = {}
        """Units whose values chute checks after the server parsed them (chute.load.verify)."""
        self.uncounted: set[str] = set()
        """Verified units whose missing values chute did not count (the cheap proof)."""
        self.mix: Share | None = None
        self.mixed: set[str] = set()
        """Units auto lets the server parse, checked, beside those converted here (Methods.balance)."""

    # -- the choice -------------------------------------------------------------

    def server(self) -> ServerInfo:
        """The server's cores (`max_threads`) and whether it parses bodies in parallel (one read)."""
        with self._lock:
            if self._server is None:
                found = {
                    str(r["name"]): str(r["value"])
                    for r in self.ctx.target.rows(
                        "SELECT name, value FROM system.settings "
                        "WHERE name IN ('max_threads', 'input_format_parallel_parsing', "
                        f"{quote_str(TRIM_SETTING)}, {quote_str(OMITTED_SETTING)})"
                    )
                }
                digits = re.findall(r"\d+", found.get("max_threads", ""))
                parallel, trims = "input_format_parallel_parsing" in found, TRIM_SETTING in found
                cores = int(digits[-1]) if digits else 1
                self._server = ServerInfo(cores, parallel, trims, OMITTED_SETTING in found)
            return self._server

    def blocker(self, unit: Unit) -> str | None:
        """Why the server cannot parse `unit` with everything kept (None: it can)."""
        ctx = self.ctx
        fmt = unit.fmt
        if not ctx.is_server():
            return "not a server target"
        if unit.is_range or "://" in unit.key:
            return "only whole local files go as they are"
        if not ctx.target.accepts_raw(fmt, ctx.table):
            return f"the server does not take {fmt.format} ({fmt.compression}) bodies into this table"
        marked = [c for c in ctx.input_columns() if c.null_marker]
        if marked and fmt.format in ("CSV", "TSV"):
            marker = marked[0].null_marker
            return f"column {marked[0].name} writes NULL as {marker!r}, which the server's parser does not know"
        if not ctx.fill_provenance:
            return None
        if not ctx.info.stageable:
            return "the table is not a MergeTree: there is no stage to fill provenance in"
        if ctx.meta is not None and str(ctx.meta.get("engine", "")) == "Distributed":
            return "a Distributed table's shards are filled from rows read here"
        if ctx.extra_filled():
            return "the source adds provenance columns of its own"
        keys = ctx.info.sorting_key + " " + ctx.info.partition_key
        if "CREATE" in keys:  # old servers: the whole DDL stands in for the keys
            keys = keys.split(" ENGINE = ", 1)[-1]
        if _KEY_NAMES.search(keys):
            return "a provenance column is in the table's keys"
        size = uncompressed_size(unit)
        if size is None:
            told = ": its gzip trailer does not tell it (several members, or a file cut short?)"
            told = told if unit.fmt.compression == "gzip" else ""
            return f"its uncompressed size is not known{told} (one insert block must hold the file)"
        if size > ONE_BLOCK_BYTES:
            return f"over {ONE_BLOCK_BYTES // 2**20} MiB uncompressed (the server holds one file as one block)"
        return None

    def choose(self, unit: Unit, server_parses: Callable[[Unit, str], bool]) -> bool:
        """Whether the server parses `unit` (remembered per unit; `why` says why)."""
        with self._lock:
            if unit.key in self.chosen:
                return self.chosen[unit.key]
        chosen, why = self._decide(unit, server_parses)
        with self._lock:
            self.chosen[unit.key], self.why[unit.key] = chosen, why
        return chosen

    def _decide(self, unit: Unit, server_parses: Callable[[Unit, str], bool]) -> tuple[bool, str]:
        ctx = self.ctx
        method = ctx.opts.method
        if method == "client-convert":
            return False, "asked for (--method client-convert)"
        if unit.key in self.refused:
            return False, "the server could not parse or number a file; read here"
        blocker = self.blocker(unit)
        if method == "server-parse":
            if blocker is not None:
                raise UsageError(f"{unit.key}: --method server-parse: {blocker}")
            server_parses(unit, "server-parse")  # the note on values it does not check
            return True, "asked for (--method server-parse)"
        if blocker is not None:
            return False, f"the server cannot parse it with everything kept: {blocker}"
        if not server_parses(unit, "server-parse"):
            if self.mix is not None:
                return False, f"auto: {self.mix.why}"
            return False, "the server's parser would change values unchecked (see notes)"
        if unit.key in self.mixed and self.mix is not None:
            return True, f"auto: {self.mix.why}"
        client = usable_cores()
        if ctx.opts.spare == "server":
            return False, "--spare-server: parsed here, the server only stores"
        if ctx.opts.spare == "client":
            checked = self.verified.get(unit.key)
            also = f"; chute checks {', '.join(c.name for c in checked)} against its own read" if checked else ""
            return True, "--spare-client: the server parses what it can" + also
        server = self.server().cores
        if server * 2 <= client:
            return False, f"the server has {server} cores, this machine {client}: parsed here"
        return True, (
            f"the server parses {unit.fmt.format} ({unit.fmt.compression}) itself with {server} cores "
            f"(this machine {client}); no conversion here"
        )

    def refuse(self, unit: Unit) -> None:
        """The server could not parse or number `unit`: it is read here from now on."""
        with self._lock:
            self.refused.add(unit.key)
            self.chosen[unit.key] = False
            self.why[unit.key] = "the server could not parse it as it is; read here"

    def streams(self, files: int) -> int:
        """Files posted at once: enough to keep the server's cores busy between round trips."""
        cores = self.server().cores if self.ctx.fill_provenance else 1
        return max(1, min(files, max(self.ctx.target.parallel_streams, 2 * cores)))

    def _pools(self) -> tuple[Posts, ThreadPoolExecutor, ThreadPoolExecutor]:
        """The load's posting threads, the threads that drop stages and those that check values
        (started at first use)."""
        threads = self.streams(sys.maxsize)
        with self._lock:
            if self._posts is None or self._drops is None or self._checks is None:
                self._posts = Posts(threads)
                self._drops = ThreadPoolExecutor(DROP_THREADS, thread_name_prefix="chute-drop")
                self._checks = ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="chute-check")
            return self._posts, self._drops, self._checks

    def close(self) -> None:
        """After the load's last batch: the posting threads end, and every stage is dropped."""
        with self._lock:
            posts, drops, self._posts, self._drops = self._posts, self._drops, None, None
            checks, self._checks = self._checks, None
            dropping, self._dropping = self._dropping, []
        if posts is not None:
            posts.close()
        for future in dropping:
            future.result()
        if drops is not None:
            drops.shutdown()
        if checks is not None:
            checks.shutdown()

    # -- the write --------------------------------------------------------------

    def default_values(self, unit: Unit) -> dict[str, str]:
        """The provenance columns' DEFAULT expressions for this unit."""
        return {
            "_source": quote_str(unit.source_name),
            "_source_mtime": server_time(unit.mtime_ns, self.ctx.target.capabilities),
            "_source_row": "rowNumberInAllBlocks() + 1",
            "_load_id": quote_str(self.ctx.load_id),
        }

    def defaults(self, unit: Unit) -> str:
        """`MODIFY COLUMN` commands giving the stage's provenance columns this unit's values."""
        types = {c.name: c.type for c in self.ctx.info.columns}
        values = self.default_values(unit)
        return ", ".join(
            f"MODIFY COLUMN {quote_ident(n)} {types[n]} DEFAULT CAST({v}, {quote_str(types[n])})"
            for n, v in values.items()
        )

    def settings(self, unit: Unit) -> dict[str, str | int | float]:
        ctx = self.ctx
        settings = {k: v for k, v in ctx.format_settings().items() if k in SERVER_READ_SETTINGS}
        settings["input_format_skip_unknown_fields"] = 0
        if unit.fmt.format == "CSV" and self.server().csv_keeps_spaces:
            settings[TRIM_SETTING] = 0
        if self.server().omitted_defaults:
            settings[OMITTED_SETTING] = 1
        if ctx.fill_provenance:
            # One block per file: rows <= bytes (every row ends with a newline, but the last).
            settings["max_insert_block_size"] = (uncompressed_size(unit) or unit.size) + 2
            if self.server().parallel_parsing:
                settings["input_format_parallel_parsing"] = 0
        return settings

    def engine_clause(self) -> tuple[str, str]:
        """(` ENGINE = ...` for `CREATE TABLE stage AS table`: "" unless the table is replicated,
        whose stage is the same engine unreplicated as in chute.targets.staging; the stage's
        whole ENGINE clause), read once."""
        with self._lock:
            if self._engine is None:
                table, meta = self.ctx.table, self.ctx.meta
                if meta is not None and "engine_full" in meta:  # read when the load began
                    found = [meta]
                else:
                    database = quote_str(table.database) if table.database else "currentDatabase()"
                    found = self.ctx.target.rows(
                        f"SELECT engine_full FROM system.tables WHERE database = {database} "
                        f"AND name = {quote_str(table.table)}"
                    )
                full = str(found[0]["engine_full"]) if found else ""
                plain = unreplicated(full)
                self._engine = (f" ENGINE = {plain}" if plain is not None else "", f" ENGINE = {plain or full}")
                # New syntax (ORDER BY) without PARTITION BY: every part is in partition 'all'
                # (the old syntax, MergeTree(date, key, granularity), partitions by month).
                self._one_partition = " ORDER BY " in f" {full} " and "PARTITION BY" not in full
            return self._engine

    def create_stage(self, into: TableName, unit: Unit) -> list[str]:
        """The statements that make `into`, a stage of the table with this unit's defaults.

        Before codecs (19.1) a table's columns are names, types and defaults, all in
        system.columns, so one CREATE with the defaults written in makes a true copy. From
        19.1 on, codecs, TTLs and indices are copied by `CREATE TABLE ... AS` and the
        defaults set after by ALTER (two round trips)."""
        ctx = self.ctx
        engine = self.engine_clause()[1]
        if ctx.target.capabilities.codecs or engine == " ENGINE = " or not ctx.info.columns:
            return self.copy_stage(into, unit)
        values = self.default_values(unit)
        columns = []
        for c in ctx.info.columns:
            if c.name in values:
                columns.append(f"{quote_ident(c.name)} {c.type} DEFAULT CAST({values[c.name]}, {quote_str(c.type)})")
            elif c.default_kind and c.default_expression:
                columns.append(f"{quote_ident(c.name)} {c.type} {c.default_kind} {c.default_expression}")
            else:
                columns.append(f"{quote_ident(c.name)} {c.type}")
        return [f"CREATE TABLE {into.sql} ({', '.join(columns)}){engine}"]

    def copy_stage(self, into: TableName, unit: Unit) -> list[str]:
        """`CREATE TABLE stage AS table`, then the defaults by ALTER."""
        return [
            f"CREATE TABLE {into.sql} AS {self.ctx.table.sql}{self.engine_clause()[0]}",
            f"ALTER TABLE {into.sql} {self.defaults(unit)}",
        ]

    def write(
        self,
        batch: list[Unit],
        before_commit: Callable[[list[Unit]], None],
        open_quote: Callable[[TableName, list[Unit]], None],
    ) -> Parsed:
        """Each unit into its own stage, at once; the rows checked; all moved in by one ALTER.

        Units the server refused (a parse error, row numbers off) are in `refused` and
        nothing of them is in the table. Raises before anything moved in, or
        CommitUncertain when the ALTER failed on the way (some stages may be in).
        """
        ctx = self.ctx
        owner = ctx.claims.load if ctx.claims is not None else ""
        stages: dict[str, TableName] = {}
        refused: dict[str, ChuteError] = {}
        lock = threading.Lock()
        posts, drops, checks = self._pools()
        order = next(self._batches)
        verified = [u for u in batch if u.key in self.verified]
        columns = self.verified[verified[0].key] if verified else []
        # chute's own read of the values the server does not check, while the server parses.
        checking = checks.submit(self.verifier.client, verified, columns) if verified else None

        def make(unit: Unit) -> None:
            # Named as chute.targets.staging names stages: a killed run's are dropped by the next.
            into = TableName(ctx.table.database, stage_name(ctx.table, owner))
            with lock:
                stages[unit.key] = into
            for statement in self.create_stage(into, unit):
                execute_ddl(ctx.target, statement, unit.key)

        def unmake(unit: Unit) -> None:
            with lock:
                stage = stages.pop(unit.key, None)
            self._drop(stage)

        def fill(unit: Unit, made: bool) -> None:
            def once(attempt: int) -> None:
                if attempt or not made:
                    make(unit)
                with lock:
                    into = stages[unit.key]
                ctx.target.insert_file(
                    into,
                    [c.name for c in ctx.input_columns()],
                    unit,
                    ctx.format_name(unit),
                    self.settings(unit),
                    unit.key,
                )

            def again(exc: Exception) -> bool:
                if isinstance(exc, TransientTargetError):
                    unmake(unit)
                    return True
                return False

            try:
                retry(once, RETRIES + 1, BACKOFF_SECONDS, again)
            except ChuteError as exc:
                if not exc.terminal:
                    raise
                with lock:
                    refused[unit.key] = exc

        try:
            # Each stage is made here, then its file waits for a posting thread: those threads
            # only post (the server parses all the time). A stage that could not be made is
            # made again by the posting thread, which keeps its error.
            filling = []
            try:
                for unit in batch:
                    try:
                        make(unit)
                        made = True
                    except ChuteError:
                        unmake(unit)
                        made = False
                    filling.append(posts.submit(order, functools.partial(fill, unit, made)))
                for future in filling:
                    future.result()
            finally:
                for future in filling:  # none still writing into a stage that is dropped
                    future.cancel() or future.exception()
            mine = checking.result() if checking else {}
            with self._lock:  # (the cheap proof reads the checked columns only: chute.load.checks.textproof)
                self.uncounted.update(k for k, f in mine.items() if isinstance(f, Fingerprint) and not f.counted)
            rows = checked_stages(ctx.target, batch, stages, refused, mine, columns)
            for unit in [u for u in batch if rows.get(u.key)]:
                try:  # a CSV quote never closed took the rest of the file as one field
                    open_quote(stages[unit.key], [unit])
                except ChuteError as exc:
                    refused[unit.key], _ = exc, rows.pop(unit.key)
            before_commit([u for u in batch if u.key in rows])
            if ctx.claims is not None:
                ctx.claims.guard()  # last: nothing slow between the check and the ATTACH
            self._move_in({k: stages[k] for k, n in rows.items() if n})
            record_missing(ctx, batch, missing_values(batch, rows, mine))
            return Parsed(rows, refused)
        finally:
            # In the background (`close` waits): the rows are in, or the batch failed. A failure
            # to drop must not look like a failed write (the rows may be in): the next run drops
            # what is left (Stage.drop_stale).
            dropping = [drops.submit(self._drop, stage) for stage in stages.values()]
            with self._lock:
                self._dropping.extend(dropping)

    def _move_in(self, stages: dict[str, TableName]) -> None:
        """Every stage's partitions into the table, in as few ALTERs as there are 100s of them."""
        if not stages:
            return
        ctx = self.ctx
        names = {s.table: s for s in stages.values()}
        database = quote_str(ctx.table.database) if ctx.table.database else "currentDatabase()"
        listed = ", ".join(quote_str(n) for n in names)
        self.engine_clause()
        if self._one_partition:  # nothing to list: a round trip less per batch
            parts: list[dict[str, object]] = [{"table": n, "partition_id": "all"} for n in names]
        else:
            parts = ctx.target.rows(
                "SELECT DISTINCT table, partition_id FROM system.parts WHERE active "
                f"AND database = {database} AND table IN ({listed})"
            )
        commands = [
            f"ATTACH PARTITION ID {quote_str(str(p['partition_id']))} FROM {names[str(p['table'])].sql}" for p in parts
        ]
        if copying_in() and self.engine_clause()[0]:  # rows written again into a replicated table
            self._copy_in(list(names.values()))
            return
        try:
            for i in range(0, len(commands), ATTACH_PER_STATEMENT):
                ctx.target.execute(
                    f"ALTER TABLE {ctx.table.sql} {', '.join(commands[i : i + ATTACH_PER_STATEMENT])}",
                    context=f"moving in {len(stages)} file(s)",
                )
        except TargetError as exc:
            # One ALTER attaches command after command: some stages may be in already,
            # whatever the error (a blind retry or another path could add them twice).
            raise CommitUncertain(str(exc), code=exc.code, name=exc.name) from exc

    def _copy_in(self, stages: list[TableName]) -> None:
        """Every stage's rows into the table by INSERT ... SELECT without deduplication (see
        chute.targets.staging.copied_in); one statement for all."""
        ctx = self.ctx
        select = " UNION ALL ".join(f"SELECT * FROM {s.sql}" for s in stages)
        try:
            ctx.target.execute(
                f"INSERT INTO {ctx.table.sql} {select}", NO_DEDUPLICATION, f"copying in {len(stages)} file(s)"
            )
        except TargetError as exc:
            raise CommitUncertain(str(exc), code=exc.code, name=exc.name) from exc

    def _drop(self, stage: TableName | None) -> None:
        if stage is not None:
            with contextlib.suppress(ChuteError):
                self.ctx.target.execute(f"DROP TABLE IF EXISTS {stage.sql}")
