"""The load's table: inferred and created where it is missing, its facts read where it stands,
and the per-file checks that need no row parsing (header line, delimiter, fields)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import Any

from chute.capabilities import TYPE_DEPTH_MAX, type_depth
from chute.engine import Settings
from chute.errors import ChuteError, SchemaError, SourceError, TargetError, UsageError
from chute.load.checks.typed import WIDE_READ_FORMATS, lossy
from chute.load.context import LoadContext
from chute.load.headers import Headers
from chute.load.inference import Inferrer
from chute.load.options import layout_refused
from chute.load.outcome import Plan
from chute.parquetmeta import not_nullable, null_free
from chute.schema import (
    INFER_FILES,
    INFER_MORE_ROWS,
    PROVENANCE_NAMES,
    Column,
    create_table_sql,
    describe,
    spread,
    union_columns,
    unnamed,
    with_provenance,
    without_nullable,
)
from chute.sql import TableName, quote_ident, quote_str
from chute.targets.base import Target
from chute.targets.engines import distributed
from chute.units import Unit

DDL_TIMEOUT_SECONDS = 30
"""How long an `ON CLUSTER` statement waits for every node (a node that is down runs it when
it is back; the default wait is 3 minutes)."""
SELF_DESCRIBING = frozenset({"Parquet", "ORC", "Arrow", "ArrowStream", "Avro", "Native"})
"""Formats that describe themselves: reading their schema costs no row parsing."""


def table_meta(target: Target, table: TableName) -> dict[str, Any] | None:
    """The table's row of system.tables (engine, keys, DDL), None when it does not exist."""
    database = quote_str(table.database) if table.database else "currentDatabase()"
    # Old servers lack the key columns: all columns there, the few needed elsewhere.
    modern = target.capabilities.version >= (20, 1, 0)
    columns = "engine, engine_full, partition_key, sorting_key, create_table_query" if modern else "*"
    try:
        found = target.rows(
            f"SELECT {columns} FROM system.tables WHERE database = {database} AND name = {quote_str(table.table)}"
        )
    except ChuteError:
        return None
    return found[0] if found else None


def partitioned(meta: dict[str, Any] | None) -> bool:
    """Whether an existing table has a PARTITION BY (old servers: from its DDL)."""
    if meta is None:
        return False
    if "partition_key" in meta:
        return bool(meta["partition_key"])
    return "PARTITION BY" in str(meta.get("create_table_query", "")).upper()


class TableSetup:
    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self.headers = Headers(ctx)
        self.inferrer = Inferrer(ctx, self.headers)

    def settle(self, plan: Plan, on_ddl: Callable[[str], None] | None) -> bool:
        """Create the table where it is missing (and there is something to load); then what
        the load needs to know of it goes into `ctx.info`. False: no table (nothing to load)."""
        ctx = self.ctx
        existing = ctx.target.table_columns(ctx.table)
        if existing is None and plan.load:
            existing = self.create(plan, on_ddl)
        deep = [c.name for c in existing or [] if type_depth(c.type) > TYPE_DEPTH_MAX]
        if deep and plan.load:
            raise SchemaError(
                f"table {ctx.table}: column {', '.join(deep)} nests its type deeper than {TYPE_DEPTH_MAX} levels, "
                "which the engine does not read back from the table's parts at its next start (the rows "
                "would be lost): make it String (each value's JSON text), then load"
            )
        ctx.set_info(columns=tuple(existing or []))
        present = PROVENANCE_NAMES & {c.name for c in existing or []}
        if present and present != PROVENANCE_NAMES and ctx.opts.provenance:
            missing = ", ".join(sorted(PROVENANCE_NAMES - present))
            ctx.report.notes.append(
                f"table {ctx.table} has {', '.join(sorted(present))} but not {missing}: chute writes provenance "
                "only into all four, so these keep their defaults (add the others to the table to have them filled)"
            )
        composite = [
            c.name
            for c in existing or []
            if re.search(r"\b(Tuple|Map|Nested)\(", c.type) and re.search(r"\b(U?Int\d+|Float32|Decimal|Date)", c.type)
        ]
        if composite and plan.load:
            ctx.report.notes.append(
                f"columns {', '.join(composite)}: numbers, dates and times inside tuples and maps are taken as the "
                "engine's reader makes them, unchecked (300 into a UInt8 there is 44); arrays are checked"
            )
        if plan.load and not ctx.opts.provenance:
            declared = ctx.source.declared_columns(plan.load[0])
            if declared and {c.name for c in declared} >= PROVENANCE_NAMES:
                ctx.set_info(provenance_as_data=True)
        if existing is None:
            return False
        meta = ctx.meta if ctx.meta is not None else table_meta(ctx.target, ctx.table)
        stageable = meta is not None and "MergeTree" in meta["engine"]
        if meta is not None and meta["engine"] == "Distributed":
            # Rows go to each shard's own table (its stage there): its keys are what count. Row
            # numbers are never mended in a shard's stage (it holds part of a file's rows).
            local = distributed(str(meta.get("engine_full", "")))
            local_meta = (
                table_meta(ctx.target, TableName(local.database or ctx.table.database, local.table)) if local else None
            )
            meta = local_meta or meta
        if meta is not None and "MergeTree" not in str(meta["engine"]) and meta["engine"] != "Distributed":
            raise UsageError(
                f"table {ctx.table} is a {meta['engine']} table: chute loads exactly once only into MergeTree "
                "tables (and Distributed tables over them), whose parts it can stage, count and take out "
                "again after a crash; load into a MergeTree table (materialized views on it can feed others)"
            )
        ctx.set_info(
            stageable=stageable,
            # Old servers have no sorting_key column: the whole DDL then stands in (cautious).
            sorting_key=str(meta.get("sorting_key", meta.get("create_table_query", ""))) if meta else "",
            # Old servers do not say; their inserts have no partition limit either.
            partition_key=str(meta.get("partition_key", "")) if meta else "",
        )
        return True

    def infer(self, unit: Unit, sample_rows: int | None = None) -> list[Column]:
        return self.inferrer.infer(unit, sample_rows)

    def designed_ddl(self, plan: Plan) -> str:
        """The CREATE TABLE of --design: measured now ("auto") or from a saved file."""
        from chute.design import load_ddl_file, propose

        assert self.ctx.opts.design is not None
        if self.ctx.opts.design != "auto":
            return load_ddl_file(self.ctx.opts.design, table=str(self.ctx.table))
        if not self.ctx.target.capabilities.codecs:
            raise UsageError(
                f"--design auto proposes column codecs, which server {self.ctx.target.capabilities.version_text} "
                "does not have (19.1+); create the table yourself or drop --design"
            )
        expressions = [self.ctx.source.table_expression(u, None) for u in plan.load if u.size > 0]
        if not expressions:
            raise SourceError("--design auto: every file is empty; nothing to measure")
        proposal = propose(
            self.ctx.target.engine,
            expressions,
            str(self.ctx.table),
            format_settings=self.ctx.format_settings(),
            provenance=self.ctx.opts.provenance,
        )
        return proposal.ddl

    def create(self, plan: Plan, on_ddl: Callable[[str], None] | None) -> list[Column] | None:
        """Infer the schema from the first readable unit and create the table."""
        if self.ctx.opts.design:
            first_csv = next((u for u in plan.load if u.fmt.format == "CSV" and u.size > 0), None)
            if first_csv is not None:  # its delimiter, for the measured sample too
                with contextlib.suppress(ChuteError):  # (the file's pre-check will say what is wrong)
                    self.headers.head(first_csv)
            return self._created(self.designed_ddl(plan), on_ddl, " (--design)")
        last_error: ChuteError | None = None
        readable = [u for u in plan.load if u.size > 0 and not self.ctx.source.unreadable(u)]
        for at, unit in enumerate(readable):
            # A text file among others of its format is read first as briefly as they are
            # (INFER_MORE_ROWS): the engine's full sample (25,000 rows) and its screening cost
            # about a sixth of a 1 M-row JSON load's CPU (docs/internals/load-speed.md).
            quick = unit.fmt.is_text and any(
                not u.is_range and u.fmt.format == unit.fmt.format for u in readable[at + 1 :]
            )
            try:
                columns, sampled = self._sampled(unit, quick, readable[at + 1 :])
                later = [found for _, found in sampled[1:]]
                if quick and not settled(columns, later):
                    columns = self.infer(unit)  # the samples disagree: the first file's full sample
                    sampled[0] = (unit, columns)
            except ChuteError as exc:
                last_error = exc
                continue
            columns = self._with_later_fields(unit, columns, later)
            if unit.fmt.format == "Parquet" and self.ctx.source.declared_columns(unit) is None:
                # (a manifest's types are the exact ones: never narrowed)
                columns = self._parquet_nullability(columns, sampled)
            if unit.fmt.format in ("CSV", "TSV"):
                columns = self.headers.named_if_all_text(unit, columns)
            return self._created(self._inferred_ddl(unit, columns), on_ddl)
        if last_error is not None:
            raise last_error
        return None

    def _sampled(
        self, first: Unit, quick: bool, rest: list[Unit]
    ) -> tuple[list[Column], list[tuple[Unit, list[Column]]]]:
        """The first unit's columns (its error raised), and every unit read with its columns:
        the first, then up to INFER_FILES - 1 files spread over the rest (INFER_MORE_ROWS rows of
        each; a file that cannot be read here is left to its load). Read side by side on the
        load's cores where the engine reads the files itself and no file's read depends on
        another's (CSV/TSV: the first decides the delimiter): each read keeps one core busy."""
        later = self._later_units(first, rest)
        # (CSV/TSV: the first file's first lines decide the delimiter and header for the rest, in order)
        ordered = self.ctx.source.batch_bytes or first.fmt.format in ("CSV", "TSV")
        threads = 1 if ordered else self.ctx.workers
        outcomes = self.ctx.target.engine.side_by_side(
            lambda u: self.infer(u, INFER_MORE_ROWS if u is not first or quick else None), [first, *later], threads
        )
        columns = outcomes[0].result()
        sampled = [(first, columns)]
        for unit, outcome in zip(later, outcomes[1:], strict=True):
            if isinstance(outcome.exception(), ChuteError):
                continue
            found = outcome.result()
            if unnamed(found) and not unnamed(columns):
                continue  # a file without a header: its fields are the named ones, by place
            sampled.append((unit, found))
        return columns, sampled

    def _later_units(self, first: Unit, rest: list[Unit]) -> list[Unit]:
        """Up to INFER_FILES - 1 files of the first's format spread over the rest. A source that
        fetches its units' bytes itself (Kafka: `batch_bytes`) is sampled within its first batch
        only: units spread over a whole topic would all be fetched before the first row loads."""
        # Byte ranges of a big file are not files of their own: read without its header they
        # would name their fields c1, c2, ...
        rest = [u for u in rest if not u.is_range]
        if self.ctx.source.batch_bytes:
            rest = _first_batch(first, rest, self.ctx.source.batch_bytes)
        return [
            unit
            for index in spread(len(rest), INFER_FILES - 1)[: INFER_FILES - 1]
            if (unit := rest[index]).fmt.format == first.fmt.format and self.ctx.source.declared_columns(unit) is None
        ]

    def _with_later_fields(self, first: Unit, columns: list[Column], later: list[list[Column]]) -> list[Column]:
        """The first file's columns and the later files' (`_sampled`) as one list
        (schema.union_columns): a field that appears only in later files is a column too."""
        kept: list[tuple[str, str, str]] = []
        merged = union_columns(self.ctx.target.engine, [columns, *later], kept)
        final = {c.name: c.type for c in merged}
        for name, other in dict.fromkeys((n, o) for n, _, o in kept):
            self.ctx.note(f"column {name} {final[name]}: files hold {other} values too, rejected where they do not fit")
        types = {c.name: c.type for c in columns}
        for c in merged:
            if c.name not in types:
                self.ctx.report.notes.append(f"column {c.name} {c.type}: a field of later files, not of {first.key}")
            elif without_nullable(c.type) != without_nullable(types[c.name]):
                self.ctx.report.notes.append(
                    f"column {c.name} {c.type}: {types[c.name]} in {first.key}, another type in later files"
                )
        return merged

    def _parquet_nullability(self, columns: list[Column], sampled: list[tuple[Unit, list[Column]]]) -> list[Column]:
        """Parquet columns not Nullable where every sampled file holds no NULL in them, by its
        statistics (pyarrow declares every column optional): a required column, or an optional
        one without NULLs (list elements too). Files whose statistics cannot be read leave the
        columns as they are."""
        ctx = self.ctx
        per_file = []
        try:
            for unit, described in sampled:
                metadata = ctx.source.table_expression(unit, None, "ParquetMetadata")

                def data(structure: str, unit: Unit = unit) -> str:
                    return ctx.source.table_expression(unit, structure, "Parquet")

                per_file.append((unit.key, described, null_free(ctx.target.engine, metadata, described, data)))
        except ChuteError:
            return columns
        columns, note = not_nullable(columns, per_file)
        ctx.report.notes.extend([note] if note else [])
        return columns

    def _inferred_ddl(self, unit: Unit, columns: list[Column]) -> str:
        """CREATE TABLE for the columns inferred from `unit`, with provenance and types the target has."""
        ctx = self.ctx
        clash = [c.name for c in columns if c.name in PROVENANCE_NAMES | ctx.extra_names]
        if clash and ctx.opts.provenance:
            raise UsageError(f"{unit.key}: input fields {clash} clash with provenance columns; use --no-provenance")
        # An export of a table with provenance: with --no-provenance those columns are data.
        ctx.set_info(provenance_as_data=bool(clash))
        if ctx.opts.provenance:
            columns = with_provenance(columns, ctx.extra_provenance)
        adapted = self.adapted(columns)
        if not unit.fmt.is_text:
            # A typed file's reader takes no JSON object as text: such a fallback would make a
            # table the file cannot be read into, on every run. (An array, tuple or map is read
            # as itself and written as its JSON text: Reads.composites_as_text.)
            for before, after in zip(columns, adapted, strict=True):
                as_text = after.type in ("String", "Nullable(String)") and after.type != before.type
                if as_text and re.search(r"\b(Object|Variant|Dynamic)\(|\bJSON\b", before.type):
                    raise UsageError(
                        f"{unit.key}: column {before.name}: {before.type} of a {unit.fmt.format} file has no "
                        f"type on this server to be read into; create table {ctx.table} yourself, or load "
                        "into a newer server"
                    )
        return create_table_sql(
            ctx.table,
            adapted,
            ctx.opts.order_by,
            ctx.opts.partition_by,
            codecs=ctx.target.capabilities.codecs and ctx.opts.provenance,
        )

    def _created(self, ddl: str, on_ddl: Callable[[str], None] | None, how: str = "") -> list[Column] | None:
        statements = [ddl]
        if self.ctx.opts.cluster is not None and self.ctx.target.is_server:
            statements = self._on_cluster(ddl, self.ctx.opts.cluster)
            ddl = ";\n".join(statements)
        for statement in statements:
            try:
                self.ctx.target.execute(
                    statement,
                    {"distributed_ddl_task_timeout": DDL_TIMEOUT_SECONDS},
                    f"creating table {self.ctx.table}{how}",
                )
            except TargetError as exc:
                raise layout_refused(self.ctx.opts, exc) or exc from None
        self.ctx.report.ddl = ddl
        if on_ddl:
            on_ddl(ddl)
        return self.ctx.target.table_columns(self.ctx.table)

    def _on_cluster(self, ddl: str, cluster: str) -> list[str]:
        """The table as chute makes it on a cluster: `<table>_local`, a ReplicatedMergeTree on
        every node (`{shard}`/`{replica}` macros), and `<table>`, a Distributed table over it
        sharded by --shard-by; both `ON CLUSTER`."""
        ctx = self.ctx
        db = ctx.table.database or str(ctx.target.rows("SELECT currentDatabase() AS d")[0]["d"])
        table = TableName(db, ctx.table.table)
        local = TableName(db, f"{ctx.table.table}_local")
        name = r"(?:`(?:[^`\\]|\\.)*`|[^\s(.`]+)"
        head = re.match(rf"\s*CREATE TABLE (?:IF NOT EXISTS )?{name}(?:\.{name})?\s*", ddl)
        engine = re.search(r"\bENGINE\s*=\s*(\w*)MergeTree(?:\(\s*\))?(?=\s|$)", ddl)
        if head is None or engine is None:
            raise UsageError(
                f"--cluster: chute makes tables of the MergeTree family without engine parameters on a cluster; "
                f"create {ctx.table} yourself (a Distributed table over a Replicated one), then load"
            )
        on = f"ON CLUSTER {quote_ident(cluster)}"
        path = quote_str(f"/clickhouse/tables/{{shard}}/{db}/{local.table}")
        replicated = f"ENGINE = Replicated{engine.group(1)}MergeTree({path}, '{{replica}}')"
        body = ddl[head.end() : engine.start()] + replicated + ddl[engine.end() :]
        distributed_engine = (
            f"Distributed({quote_ident(cluster)}, {quote_ident(db)}, {quote_ident(local.table)}, {ctx.opts.shard_by})"
        )
        return [
            f"CREATE TABLE IF NOT EXISTS {local.sql} {on}\n{body}",
            f"CREATE TABLE IF NOT EXISTS {table.sql} {on} AS {local.sql}\nENGINE = {distributed_engine}",
        ]

    def adapted(self, columns: list[Column]) -> list[Column]:
        """`columns` with types the target has; each changed type gets a note in the report."""
        adapted = []
        for c in columns:
            ours = c.name in PROVENANCE_NAMES | self.ctx.extra_names
            type_sql, why = self.ctx.target.capabilities.adapt_type_noted(c.type, data=not ours)
            if why and not ours:
                inferred = re.sub(r"\s+", " ", c.type).replace("( ", "(")
                inferred = inferred if len(inferred) <= 120 else inferred[:100] + "..."
                self.ctx.report.notes.append(f"column {c.name}: {inferred} is created as {type_sql} ({why})")
            adapted.append(Column(c.name, type_sql, comment=c.comment))
        return adapted

    def _redefine_distributed(self, cluster: str, settings: Settings | None) -> None:
        """A Distributed table takes the columns of its shards' tables: made again on every node
        (18.16 takes no ALTER ... ON CLUSTER of a Distributed table over replicated shards)."""
        ctx = self.ctx
        meta = table_meta(ctx.target, ctx.table)
        if meta is None:
            return
        layout = distributed(str(meta["engine_full"]))
        assert layout is not None
        local = TableName(layout.database or ctx.table.database, layout.table)
        on = f"ON CLUSTER {quote_ident(cluster)}"
        context = f"adding columns to {ctx.table}"
        ctx.target.execute(f"DROP TABLE IF EXISTS {ctx.table.sql} {on}", settings, context)
        ctx.target.execute(
            f"CREATE TABLE IF NOT EXISTS {ctx.table.sql} {on} AS {local.sql} ENGINE = {meta['engine_full']}",
            settings,
            context,
        )

    def _altered_tables(self) -> tuple[list[TableName], str | None]:
        """The tables a new column goes to (a Distributed table's shards' tables first), and
        the cluster whose every node takes the ALTER (--cluster, or the Distributed table's)."""
        ctx = self.ctx
        meta = table_meta(ctx.target, ctx.table)
        layout = distributed(str(meta.get("engine_full", ""))) if meta and meta["engine"] == "Distributed" else None
        cluster = ctx.opts.cluster if ctx.target.is_server else None
        if layout is None:
            return [ctx.table], cluster
        local = TableName(layout.database or ctx.table.database, layout.table)
        return [local, ctx.table], cluster or layout.cluster

    def check_fields(self, unit: Unit) -> None:
        """Input fields the table lacks: an error naming them, or new columns."""
        sample = None if unit.fmt.format in SELF_DESCRIBING else 1000
        expression = self.ctx.source.table_expression(unit, None)
        kept: set[str] | None = None
        header: list[str] | None = None
        if unit.fmt.format in ("CSV", "TSV"):
            delimiter = self.ctx.opts.delimiter or ("," if unit.fmt.format == "CSV" else "\t")
            header = self.headers.head(unit).fields(delimiter)
            named = self.headers.named_fields(unit, header)
            if named != header:
                # A header ending with a delimiter: the engine's inference takes it for data (c1, c2, ...).
                kept = set(named)
                expression = self.ctx.source.table_expression(unit, None, f"{unit.fmt.format}WithNames")
        fields = describe(
            self.ctx.target.engine,
            expression,
            context=f"{unit.key}: cannot read the schema",
            sample_rows=sample,
            format_settings=self.ctx.format_settings(),
        )
        if unit.fmt.format in WIDE_READ_FORMATS:
            types = {c.name: c.type for c in self.ctx.info.columns}
            changed = frozenset(f.name for f in fields if f.name in types and lossy(f.type, types[f.name]))
            if changed:
                with self.ctx.lock:
                    self.ctx.text_reads[unit.key] = changed
        if kept is not None:
            fields = [f for f in fields if f.name in kept]
        elif header is not None and _positional(fields, header):
            return  # no header line: its fields have no names to add (they load by position)
        known = {c.name for c in self.ctx.info.columns}
        extra = [f for f in fields if f.name not in known]
        if not extra:
            return
        if not self.ctx.opts.add_columns:
            names = ", ".join(f.name for f in extra)
            raise SchemaError(
                f"{unit.key}: input fields not in table {self.ctx.table}: {names} (use --add-columns to add them)"
            )
        tables, cluster = self._altered_tables()
        on = f" ON CLUSTER {quote_ident(cluster)}" if cluster else ""
        settings = {"distributed_ddl_task_timeout": DDL_TIMEOUT_SECONDS} if cluster else None
        for col in extra:
            for table in tables:
                if cluster and table == self.ctx.table and len(tables) > 1:
                    self._redefine_distributed(cluster, settings)
                    continue
                add = f"ALTER TABLE {table.sql}{on} ADD COLUMN {{}}{quote_ident(col.name)} {col.type}"
                try:
                    self.ctx.target.execute(add.format("IF NOT EXISTS "), settings, f"adding column {col.name}")
                except ChuteError as exc:
                    if exc.code != 62:  # 18.16 has no IF NOT EXISTS here
                        raise
                    self.ctx.target.execute(add.format(""), settings, f"adding column {col.name}")
            self.ctx.report.notes.append(f"added column {col.name} {col.type} (from {unit.key})")
        self.ctx.set_info(columns=tuple(self.ctx.target.table_columns(self.ctx.table) or self.ctx.columns))


def _positional(fields: list[Column], header: list[str]) -> bool:
    """The engine named a CSV/TSV file's fields c1, c2, ...: it found no header line."""
    names = [f.name for f in fields]
    return names == [f"c{i}" for i in range(1, len(names) + 1)] and names != header


def _first_batch(first: Unit, rest: list[Unit], limit: int) -> list[Unit]:
    """The units of `rest` that fit, after `first`, in `limit` bytes (by their sizes)."""
    size = first.size
    for count, unit in enumerate(rest):
        size += unit.size
        if size > limit:
            return rest[:count]
    return rest


def settled(first: list[Column], later: list[list[Column]]) -> bool:
    """Whether a short sample of the first file is enough: other files were sampled, and each
    found the same fields of the same types (in any order). Where they agree, the first file's
    full sample would only repeat them; where any differs, or none was read, it is read in full."""
    types = {c.name: c.type for c in first}
    return bool(later) and all({c.name: c.type for c in found} == types for found in later)
