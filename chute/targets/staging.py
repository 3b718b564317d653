"""All-or-nothing batches: insert into a stage table, then ATTACH its partitions.

ATTACH PARTITION ... FROM hard-links parts (no copy) and works on every server
version chute supports (18.16 and later) and in the embedded engine. Tables
that are not MergeTree get plain inserts (no stage).
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol

from chute.engine import Settings, StatementResult
from chute.errors import AttachedLate, ChuteError, CommitUncertain, TransientTargetError
from chute.sql import TableName, quote_ident, quote_str
from chute.targets.engines import unreplicated

STAGE_PREFIX = "_chute_stage_"
MASK_COLUMN = "_chute_missing"
"""A stage's extra column: per row, a bit mask of its input columns whose value was missing
and took the default (chute.load.checks.missing). Counted and dropped before the rows move in."""
SOURCE_COLUMN = "_chute_source"
"""A stage's extra column where the table keeps no `_source`: per row, the file it came from, so
that a batch of several files is counted per file. Counted and dropped before the rows move in."""
_NAME_PART = r"(?:`(?:[^`\\]|\\.)*`|[^\s`.(]+)"
_CREATE_NAME = re.compile(rf"^CREATE TABLE {_NAME_PART}(?:\.{_NAME_PART})?\s*")
_COMMIT_LOCK = threading.Lock()
ATTACH_PER_STATEMENT = 100  # 18.16 and the embedded engine both take several commands in one ALTER

_COPY_IN: contextvars.ContextVar[bool] = contextvars.ContextVar("chute_copy_in", default=False)
NO_DEDUPLICATION: Settings = {"insert_deduplicate": 0}


@contextlib.contextmanager
def copied_in() -> Iterator[None]:
    """Commits in this block copy a replicated table's stage in (`INSERT ... SELECT`, without
    deduplication) instead of attaching its parts.

    For a write again, in the same load, of rows that were committed (or perhaps) and then
    removed: a replicated table keeps, in ZooKeeper, a block id per attached part made of
    the part's checksums (`<partition>_replace_from_<hash>`) and skips an ATTACH of a part
    it has seen, even after the rows were deleted. The same rows under the same `_load_id`
    make the same part: attached again, they would silently not be there. (A new load
    writes another `_load_id`, so its parts are new.)"""
    token = _COPY_IN.set(True)
    try:
        yield
    finally:
        _COPY_IN.reset(token)


def copying_in() -> bool:
    """Whether commits here copy a replicated table's stage in (see `copied_in`)."""
    return _COPY_IN.get()


CommitCheck = Callable[[TableName | None, dict[str, int]], None]
"""Called with the stage table (None without one) and its row counts just before
the rows are moved in: it may check or fix the staged rows; raising aborts."""


class _Sql(Protocol):
    def execute(self, sql: str, settings: Settings | None = None, context: str = "") -> StatementResult: ...

    def rows(self, sql: str, settings: Settings | None = None, context: str = "") -> list[dict[str, Any]]: ...


def _database(table: TableName) -> str:
    return quote_str(table.database) if table.database else "currentDatabase()"


PART_WRITER_SETTINGS = frozenset(
    {
        "max_compress_block_size",
        "min_compress_block_size",
        "min_bytes_for_full_part_storage",
        "min_bytes_for_wide_part",
        "ratio_of_defaults_for_sparse_serialization",
        "write_marks_for_substreams_in_compact_parts",
        "string_serialization_version",
        "serialization_info_version",
        "compress_marks",
        "compress_primary_key",
    }
)
"""Settings of how an insert writes parts. The engine's MergeTree writer takes them from
the table, not the query: a target that stages applies them to its stage table."""
_QUOTED_OR_SETTINGS = re.compile(r"'(?:[^'\\]|\\.)*'|`(?:[^`\\]|\\.)*`|\bSETTINGS\b")
_SETTING = re.compile(r"\s*(\w+) = ('(?:[^'\\]|\\.)*'|[-\w.]+),?")


def _table_settings(ddl: str) -> dict[str, str]:
    """The SETTINGS clause of a CREATE TABLE as the engine wrote it: name -> SQL literal.
    Quoted text (a COMMENT that reads `x = 1`, a name) is skipped, never read as a setting."""
    keyword = [m for m in _QUOTED_OR_SETTINGS.finditer(ddl) if m.group() == "SETTINGS"]
    settings: dict[str, str] = {}
    at = keyword[-1].end() if keyword else len(ddl)
    while (found := _SETTING.match(ddl, at)) is not None:
        settings[found.group(1)] = found.group(2)
        at = found.end()
    return settings


def _literal(value: int | float | str) -> str:
    if isinstance(value, str):
        return quote_str(value)
    return repr(value) if isinstance(value, float) and not value.is_integer() else str(int(value))


_STAGE_SUFFIX = re.compile(r"^[0-9a-f]{12}(?:_[0-9a-f]{8})?$")
"""What follows `_chute_stage_<table>_` in a stage's name: a stage of `t` is never taken
for one of `t_x`."""


def execute_ddl(db: _Sql, sql: str, context: str) -> None:
    """A stage's DDL. 18.16 refuses to create a table with LowCardinality columns (`[44] ...
    LowCardinality type is not allowed`) unless the query allows the then experimental type, a
    setting later servers no longer know: so it is sent only after that refusal."""
    try:
        db.execute(sql, context=context)
    except ChuteError as exc:
        if "LowCardinality" not in str(exc) or exc.code != 44:
            raise
        db.execute(sql, {"allow_experimental_low_cardinality_type": 1}, context=context)


def stage_name(target: TableName, owner: str = "") -> str:
    """`_chute_stage_<table>_<owner>_<random>` (`<random>` alone without an owner)."""
    if owner:
        return f"{STAGE_PREFIX}{target.table}_{owner}_{uuid.uuid4().hex[:8]}"
    return f"{STAGE_PREFIX}{target.table}_{uuid.uuid4().hex[:12]}"


def stage_owner(suffix: str) -> str:
    """The owner tag of a stage from its name's suffix ("" for a stage without one)."""
    return suffix.split("_", 1)[0] if "_" in suffix else ""


def default_commands(filled: Mapping[str, str]) -> list[str]:
    """The ALTER commands that make a table fill `filled` (column -> SQL) itself."""
    return [f"MODIFY COLUMN {quote_ident(name)} DEFAULT {expression}" for name, expression in filled.items()]


def unsent(columns: Sequence[str], selects: Sequence[str], filled: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """The columns and SELECTs to send where the receiving table fills `filled` itself: one
    value a batch, not a value a row (a load id is 33 bytes a row to encode, compress, send
    and parse)."""
    if not filled:
        return list(columns), list(selects)
    sent = [c for c in columns if c not in filled]
    listed = ", ".join(quote_ident(c) for c in sent)
    return sent, [f"SELECT {listed} FROM ({select})" for select in selects]


class Stage:
    """A stage table for one batch; `table` is None when the target cannot stage."""

    def __init__(
        self,
        db: _Sql,
        target: TableName,
        context: str,
        drop_sync: bool = True,
        hold_merges: bool = False,
        modern: bool = False,
        part_settings: Mapping[str, int | float | str] | None = None,
        swap_if_empty: bool = False,
        owner: str = "",
        guard: Callable[[], None] | None = None,
        missing: dict[str, tuple[int, int]] | None = None,
        mutate: Callable[[TableName, str, str], None] | None = None,
        name: str | None = None,
        defaults: Mapping[str, str] | None = None,
        tagged: bool = False,
        moving: Callable[[TableName], contextlib.AbstractContextManager[object]] | None = None,
    ) -> None:
        self.db = db
        self.moving = moving
        """Held around the move into the target (the embedded target: no mutation of it runs meanwhile,
        as attaching parts cancels one; chute.targets.mutations)."""
        self.tagged = tagged
        """The stage has SOURCE_COLUMN: rows are counted per its values (see `checked`)."""
        self.defaults: dict[str, str] = {}
        """Column -> SQL expression the stage fills it with (set where it stages): the caller
        leaves these columns out of its inserts (`defaults` as given: the wish)."""
        self._wanted_defaults = dict(defaults or {})
        self.name = name
        """The stage's name where it is given (one name on every shard: see Shards.write_routed)."""
        self.missing = missing
        """Where given: the stage has MASK_COLUMN, and after the commit this holds per source
        (as the counts) the rows with a missing value and the OR of their masks."""
        self._found: list[dict[str, Any]] = []
        """What `checked` counted: rows and missing values per source, for `move_in`."""
        self.mutate = mutate
        """How the target runs an ALTER that may be a mutation, waiting for it (dropping MASK_COLUMN)."""
        self.owner = owner
        """A tag of the load that owns the stage (in its name): other workers keep it while it lives."""
        self.guard = guard
        """Called just before rows move into the target (and before a stageless write): raises
        when this worker may no longer commit (its claims ended)."""
        self.hold_merges = hold_merges
        self.part_settings = dict(part_settings or {})
        self.drop_suffix = " SYNC" if drop_sync else ""
        self.target = target
        self.context = context
        self.table: TableName | None = None
        self.modern = modern
        """A modern engine: ATTACH PARTITION ALL moves every partition in one statement."""
        self.swap_if_empty = swap_if_empty
        """Nothing else writes the target: if it has no parts, the stage takes its place (EXCHANGE)."""
        self.target_ddl: str | None = None
        """The target's definition (name left out) when the stage's is the same: a swap keeps it."""
        self.replicated = False
        """The target is a Replicated*MergeTree (its ATTACHes are deduplicated: see `copied_in`)."""

    def __enter__(self) -> Stage:
        engine = self.db.rows(
            f"SELECT engine, engine_full FROM system.tables WHERE database = {_database(self.target)} "
            f"AND name = {quote_str(self.target.table)}"
        )
        if engine and "MergeTree" in engine[0]["engine"]:
            self.table = TableName(self.target.database, self.name or stage_name(self.target, self.owner))
            # A replicated target's stage is the same engine unreplicated: a copy of its
            # engine would claim the target's own ZooKeeper path and replica name.
            plain = unreplicated(str(engine[0]["engine_full"]))
            self.replicated = plain is not None
            how = f" ENGINE = {plain}" if plain is not None else ""
            execute_ddl(self.db, f"CREATE TABLE {self.table.sql} AS {self.target.sql}{how}", self.context)
            if self.swap_if_empty:
                target_ddl, stage_ddl = self._definition(self.target), self._definition(self.table)
                self.target_ddl = target_ddl if target_ddl is not None and target_ddl == stage_ddl else None
            if self.part_settings:
                # How the insert writes its parts (a table setting; the target's own stay as they are).
                assignments = ", ".join(f"{quote_ident(k)} = {_literal(v)}" for k, v in self.part_settings.items())
                self.db.execute(f"ALTER TABLE {self.table.sql} MODIFY SETTING {assignments}", context=self.context)
            commands = default_commands(self._wanted_defaults)
            if self.tagged:
                commands.append(f"ADD COLUMN {quote_ident(SOURCE_COLUMN)} String")
            if self.missing is not None:
                commands.append(f"ADD COLUMN {quote_ident(MASK_COLUMN)} UInt64")
            if commands:
                self.db.execute(f"ALTER TABLE {self.table.sql} {', '.join(commands)}", context=self.context)
                self.defaults = dict(self._wanted_defaults)
            if self.hold_merges:
                # Merging parts that move into the target anyway would take cores from the load.
                self.db.execute(f"SYSTEM STOP MERGES {self.table.sql}", context=self.context)
        elif self.guard is not None:
            self.guard()  # no stage: the rows go straight in, so check before they are sent
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.table is not None:
            # A failure here must not look like a failed write: the rows may be in the target
            # already, and a retry would add them twice. A stage left behind is dropped by the
            # next run (drop_stale).
            with contextlib.suppress(ChuteError):
                self.db.execute(f"DROP TABLE IF EXISTS {self.table.sql}{self.drop_suffix}")

    def commit(
        self, count_by_source: bool, rows_written: int | None = None, before_commit: CommitCheck | None = None
    ) -> dict[str, int]:
        """Count the stage's rows, move them into the target; rows per source."""
        if self.table is None:
            counts = {"": rows_written or 0}
            if before_commit:
                before_commit(None, counts)
            return counts
        return self.move_in(self.checked(count_by_source, before_commit))

    def checked(self, count_by_source: bool, before_commit: CommitCheck | None = None) -> dict[str, int]:
        """The stage's rows (per source), once the checks before a commit passed."""
        self._found = []
        if self.table is None:  # nothing staged (not a MergeTree): nothing counted here
            counts = {"": 0}
        else:
            mask = quote_ident(MASK_COLUMN)
            missing = f", countIf({mask} != 0) AS m, groupBitOr({mask}) AS c" if self.missing is not None else ""
            if count_by_source:
                source = quote_ident(SOURCE_COLUMN) if self.tagged else "_source"
                sql = f"SELECT {source} AS s, count() AS n{missing} FROM {self.table.sql} GROUP BY {source}"
                self._found = list(self.db.rows(sql))
            else:
                self._found = [
                    {"s": "", **r} for r in self.db.rows(f"SELECT count() AS n{missing} FROM {self.table.sql}")
                ]
            counts = {str(r["s"]): int(r["n"]) for r in self._found}
        if before_commit:
            before_commit(self.table, counts)
        return counts

    def move_in(self, counts: dict[str, int]) -> dict[str, int]:
        """Move the checked rows (`counts`, from `checked`) into the target."""
        if (self.missing is not None or self.tagged) and self.table is not None:
            self._drop_extra_columns()
        if self.guard is not None:
            self.guard()  # last: nothing slow may run between the check and the ATTACH
        # One commit at a time in this process: a swap must not race another batch's ATTACH
        # (rows attached to the table just before it is swapped out would be dropped with it).
        with _COMMIT_LOCK if self.modern else contextlib.nullcontext():
            moved = self._move_in(counts)
        if self.guard is not None:
            # The ATTACH may have waited on the wire past the claim's end (checked just before
            # it): then another worker may have loaded the same units meanwhile.
            try:
                self.guard()
            except ChuteError as exc:
                raise AttachedLate(f"{exc} (this worker's rows went in late)") from exc
        if self.missing is not None:
            found = self._found
            self.missing.update({str(r["s"]): (int(r["m"]), int(r["c"])) for r in found if int(r["m"])})
        return moved

    def _drop_extra_columns(self) -> None:
        """The stage as its target again: without MASK_COLUMN and SOURCE_COLUMN (a mutation on
        newer engines, which hard-links the other columns' files)."""
        assert self.table is not None
        extra = ([SOURCE_COLUMN] if self.tagged else []) + ([MASK_COLUMN] if self.missing is not None else [])
        command = ", ".join(f"DROP COLUMN {quote_ident(c)}" for c in extra)
        if self.mutate is not None:
            self.mutate(self.table, command, self.context)
        else:
            self.db.execute(f"ALTER TABLE {self.table.sql} {command}", context=self.context)

    def _move_in(self, counts: dict[str, int]) -> dict[str, int]:
        assert self.table is not None
        if self._swapped():
            return counts
        if self.replicated and copying_in():
            try:
                self.db.execute(
                    f"INSERT INTO {self.target.sql} SELECT * FROM {self.table.sql}", NO_DEDUPLICATION, self.context
                )
            except TransientTargetError as exc:
                raise CommitUncertain(str(exc), code=exc.code, name=exc.name) from exc
            return counts
        if self.modern:
            # One statement for every partition: no partition list to read first.
            partitions = [{"partition_id": ""}] if sum(counts.values()) else []
        else:
            partitions = self.db.rows(
                "SELECT DISTINCT partition_id FROM system.parts WHERE active "
                f"AND database = {_database(self.table)} AND table = {quote_str(self.table.table)}"
            )
        try:
            # Many partitions (days of unsorted events) go in a few statements, not one each.
            for i in range(0, len(partitions), ATTACH_PER_STATEMENT):
                commands = ", ".join(
                    f"ATTACH PARTITION ID {quote_str(part['partition_id'])} FROM {self.table.sql}"
                    if part["partition_id"]
                    else f"ATTACH PARTITION ALL FROM {self.table.sql}"
                    for part in partitions[i : i + ATTACH_PER_STATEMENT]
                )
                with self.moving(self.target) if self.moving else contextlib.nullcontext():
                    self.db.execute(f"ALTER TABLE {self.target.sql} {commands}", context=self.context)
        except TransientTargetError as exc:
            # Some partitions may be in already: a blind retry could add them twice.
            raise CommitUncertain(str(exc), code=exc.code, name=exc.name) from exc
        return counts

    def _definition(self, table: TableName) -> str | None:
        """`CREATE TABLE` of a table without its name: equal for a table and a true copy."""
        found = self.db.rows(
            f"SELECT create_table_query AS q FROM system.tables WHERE database = {_database(table)} "
            f"AND name = {quote_str(table.table)}"
        )
        return _CREATE_NAME.sub("", found[0]["q"], count=1) if found else None

    def _swapped(self) -> bool:
        """Put the stage in the place of a target with no parts (EXCHANGE TABLES: no part moves).

        Moving the parts of a stage costs a directory and a hard link per file:
        0.5 s for the 800 parts of 2 M rows over 400 days. A first load into an
        empty table needs none of it. Only where the stage is a true copy of the
        target (same definition once the part-writer settings are put back), no
        view reads from the target, and the caller said nothing else writes it.
        """
        if self.table is None or self.target_ddl is None:
            return False
        target_where = f"database = {_database(self.target)} AND table = {quote_str(self.target.table)}"
        parts = self.db.rows(f"SELECT count() AS n FROM system.parts WHERE {target_where} AND active")
        dependents = self.db.rows(
            f"SELECT length(dependencies_table) AS n FROM system.tables WHERE database = {_database(self.target)} "
            f"AND name = {quote_str(self.target.table)}"
        )
        if int(parts[0]["n"]) or not dependents or int(dependents[0]["n"]):
            return False
        if self.part_settings:
            # The target's own values (or the defaults) back on the stage: they are part of its definition.
            # (The values are literals as the engine itself wrote them in the table's definition.)
            explicit = _table_settings(self.target_ddl)
            reset = [k for k in self.part_settings if k not in explicit]
            keep = [f"{quote_ident(k)} = {explicit[k]}" for k in self.part_settings if k in explicit]
            if keep:
                self.db.execute(f"ALTER TABLE {self.table.sql} MODIFY SETTING {', '.join(keep)}", context=self.context)
            if reset:
                names = ", ".join(quote_ident(k) for k in reset)
                self.db.execute(f"ALTER TABLE {self.table.sql} RESET SETTING {names}", context=self.context)
        if self._definition(self.table) != self.target_ddl:
            return False
        if self.hold_merges:
            self.db.execute(f"SYSTEM START MERGES {self.table.sql}", context=self.context)
        try:
            self.db.execute(f"EXCHANGE TABLES {self.table.sql} AND {self.target.sql}", context=self.context)
        except ChuteError:
            return False  # an engine or database that cannot exchange: the parts move instead
        return True

    @staticmethod
    def drop_stale(db: _Sql, target: TableName, live_owners: Callable[[], set[str]] | None = None) -> None:
        """Drop stage tables left by a run that was killed: all of the table's stages, or,
        where other workers may load the table now, those whose owner is not `live_owners()`.
        The stages are listed before the owners are asked: a stage made after the listing
        is not dropped, and one listed had its owner's claims made before it."""
        prefix = f"{STAGE_PREFIX}{target.table}_"
        rows = db.rows(
            f"SELECT name FROM system.tables WHERE database = {_database(target)} "
            f"AND startsWith(name, {quote_str(prefix)})"
        )
        stages = [str(r["name"]) for r in rows if _STAGE_SUFFIX.match(str(r["name"])[len(prefix) :])]
        if not stages:
            return
        live = live_owners() if live_owners is not None else set()
        for name in stages:
            if stage_owner(name[len(prefix) :]) not in live:
                db.execute(f"DROP TABLE IF EXISTS {TableName(target.database, name).sql}")

    @staticmethod
    def stats(db: _Sql, table: TableName, table_totals: bool = True) -> tuple[int, int]:
        """(rows, bytes on disk): rows counted; bytes from system.tables where it keeps them
        (`table_totals`: it may), else the parts."""
        found: list[dict[str, Any]] = []
        if table_totals:
            try:
                # Rows counted: the parts' counts (total_rows) include rows a lightweight DELETE removed.
                found = db.rows(
                    f"SELECT (SELECT count() FROM {table.sql}) AS rows, total_bytes AS bytes FROM system.tables "
                    f"WHERE database = {_database(table)} AND name = {quote_str(table.table)}"
                )
            except ChuteError:  # old servers: no such columns
                found = []
        if found and found[0]["rows"] is not None and found[0]["bytes"] is not None:
            return int(found[0]["rows"]), int(found[0]["bytes"])
        parts = db.rows(
            f"SELECT (SELECT count() FROM {table.sql}) AS rows, sum(bytes_on_disk) AS bytes FROM system.parts "
            f"WHERE active AND database = {_database(table)} AND table = {quote_str(table.table)}"
        )
        return int(parts[0]["rows"]), int(parts[0]["bytes"] or 0)
