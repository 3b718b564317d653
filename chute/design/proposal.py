"""The proposal: a design run from the files to a measured CREATE TABLE."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Mapping, Sequence

from chute.design.layout import Measurer, TypedColumn, create_table_ddl, key_candidates, partition, pick_winner
from chute.design.model import ColumnChoice, LayoutTrial, Proposal, Request
from chute.design.sample import SCRATCH_PREFIX, Sample, Scratch, load_sample
from chute.design.types import HEADROOM, TypeChooser, Typed, cast, unwrap
from chute.engine import MEMORY, Engine, open_engine
from chute.errors import SchemaError, SourceError, UsageError
from chute.schema import PROVENANCE_COLUMNS, marker_comment
from chute.sniff import read_head
from chute.sources import Unit
from chute.sources.files import FileSource
from chute.sql import TableName, quote_ident

DEFAULT_SAMPLE_ROWS = 300_000


def _codec_reason(sizes: Mapping[str, int], chosen: str, layout: str) -> str:
    default = sizes.get("", 0)
    best = sizes.get(chosen, default)
    label = chosen or "LZ4 (default)"
    ranked = sorted(sizes.items(), key=lambda kv: kv[1])[:3]
    tried = ", ".join(f"{c or 'LZ4'} {b:,}" for c, b in ranked)
    ratio = default / best if best else 1.0
    return f"{label}: {best:,} bytes vs LZ4 {default:,} ({ratio:.1f}x) under {layout}; best tried: {tried}"


def _with_stats(typed: Typed, file_nulls: bool) -> Typed:
    """A scalar column the sample holds no NULL in, though a Parquet file's statistics count
    some: Nullable after all (its rows past the sample have them)."""
    if not file_nulls or "Nullable(" in typed.type or typed.type.startswith(("Array(", "Map(", "Tuple(")):
        return typed
    inner, low = unwrap(typed.type, "LowCardinality")
    full = f"LowCardinality(Nullable({inner}))" if low else f"Nullable({typed.type})"
    reason = f"{typed.reason}; Nullable: the file's statistics count NULLs the sample does not hold"
    return dataclasses.replace(
        typed, type=full, convert=lambda v: f"CAST({typed.convert(v)} AS {full})", reason=reason, nulls=1
    )


def _choose_columns(engine: Engine, sample: Sample, enums: bool, provenance: bool) -> list[TypedColumn]:
    chooser = TypeChooser(engine, sample.complete, enums)
    table = quote_ident(sample.table)
    columns = [
        TypedColumn(n, t, _with_stats(chooser.choose(n, t, table), n in sample.stats_nulls)) for n, t in sample.columns
    ]
    if provenance:
        columns += [
            TypedColumn(n, t, Typed(t, cast(t), "provenance column, filled by chute.load"))
            for n, t in PROVENANCE_COLUMNS
        ]
    return columns


def propose(
    engine: Engine,
    table_expressions: list[str],
    table: str,
    sample_rows: int = DEFAULT_SAMPLE_ROWS,
    format_settings: Mapping[str, str | int | float] | None = None,
    time_budget_s: float = 60,
    *,
    enums: bool = False,
    provenance: bool = False,
) -> Proposal:
    """Measure a layout for `table` on a sample of the files in `table_expressions`.

    Each expression is an engine table function call such as
    ``FileSource(...).table_expression(unit, None)``; `format_settings` are the
    settings the load will read them with. `enums` allows Enum8 for strings
    with few values (a new value then fails the load); `provenance` adds the
    columns chute.load fills. At least one layout is measured however small
    `time_budget_s` is. Scratch tables are dropped before returning.
    """
    if not table_expressions:
        raise UsageError("design: no source given")
    if sample_rows < 1:
        raise UsageError("design: --sample-rows must be at least 1")
    if not time_budget_s > 0:  # (NaN too)
        raise UsageError(f"design: --time-budget must be more than 0 seconds, not {time_budget_s:g}")
    request = Request(
        list(table_expressions),
        TableName.parse(table),
        sample_rows,
        dict(format_settings or {}),
        time.monotonic(),
        time_budget_s,
        enums,
        provenance,
    )
    scratch = Scratch(engine)
    scratch.drop_all(SCRATCH_PREFIX)  # left by a killed run: chDB gives this process the directory alone
    try:
        proposal = _propose(engine, scratch, request)
    except BaseException:
        with contextlib.suppress(Exception):  # the first error is the one to report
            scratch.drop_all()
        raise
    scratch.drop_all()
    return proposal


def _propose(engine: Engine, scratch: Scratch, request: Request) -> Proposal:
    sample = load_sample(engine, scratch, request)
    if not sample.rows:
        raise SourceError("design: the files hold no rows to sample")
    if request.provenance and not sample.provenance:
        raise SchemaError("design: input fields clash with provenance columns; design without provenance")
    notes = list(sample.notes)
    columns = _choose_columns(engine, sample, request.enums, request.provenance)
    measurer = Measurer(engine, scratch, sample, columns)
    trials: list[LayoutTrial] = []
    for label, key in key_candidates(engine, sample, columns):
        if trials and time.monotonic() > request.layout_deadline:
            notes.append(f"time budget of {request.budget:g} s reached: layout {label!r} was not measured")
            continue
        trials.append(measurer.layout(label, key))
    winner, why = pick_winner(trials, {quote_ident(c.name) for c in columns if c.is_time})
    partition_by, partition_reason = partition(engine, sample, columns, winner.order_by)
    choices = tuple(
        ColumnChoice(
            c.name,
            c.inferred,
            c.typed.type,
            winner.codecs[c.name],
            c.typed.reason,
            _codec_reason(measurer.codec_sizes[winner.name][c.name], winner.codecs[c.name], winner.name),
            c.typed.null_marker,
        )
        for c in columns
    )
    triples = [(c.name, c.type, c.codec) for c in choices]
    final_bytes = measurer.final(triples, winner.order_by, partition_by)
    if not sample.complete:
        notes.append(
            f"the sample is the first rows of {sample.files_read} of {len(request.expressions)} files: integer "
            f"types keep {HEADROOM}x headroom; a null outside it loads as the type's default"
        )
    return Proposal(
        table=str(request.table),
        ddl=create_table_ddl(
            request.table,
            triples,
            winner.order_by,
            partition_by,
            {c.name: marker_comment(c.null_marker) for c in choices if c.null_marker},
        ),
        columns=choices,
        layouts=tuple(trials),
        winner=winner.name,
        why=why,
        order_by=winner.order_by,
        partition_by=partition_by,
        partition_reason=partition_reason,
        sample_rows=sample.rows,
        sample_complete=sample.complete,
        files_sampled=sample.files_read,
        files_total=len(request.expressions),
        final_bytes_on_disk=final_bytes,
        seconds=time.monotonic() - request.started,
        notes=tuple(notes),
    )


def design_sources(
    sources: Sequence[str],
    table: str,
    target: str | None = None,
    sample_rows: int = DEFAULT_SAMPLE_ROWS,
    format: str | None = None,
    compression: str | None = None,
    *,
    delimiter: str | None = None,
    enums: bool = False,
    provenance: bool = False,
    time_budget_s: float = 60,
) -> Proposal:
    """Propose a layout for loading `sources` into `table`, measured in the target's engine.

    Files are found as `chute.load` finds them; the target is `target`,
    ``$CHUTE_TARGET`` or ``./chute.db`` where it exists, else the engine in memory. Nothing is
    created but scratch tables, which are dropped again. Raises UsageError/SourceError for bad requests.
    """
    from chute.targets import DEFAULT_TARGET, target_spec

    if delimiter is not None and len(delimiter) != 1:
        raise UsageError("--delimiter must be a single character")
    name = TableName.parse(table)
    if name.table.startswith("_chute_"):
        raise UsageError(f"table names starting with _chute_ are reserved: {table}")
    source = FileSource([sources] if isinstance(sources, str) else list(sources), format, compression)
    units = [u for u in source.units() if u.size > 0]
    if not units:
        raise SourceError("design: every file is empty; nothing to measure")
    spec = target_spec(target) or DEFAULT_TARGET
    if "://" in spec:
        raise UsageError("design measures in the embedded engine: give a directory as the target")
    settings: dict[str, str | int | float] = {
        "date_time_input_format": "best_effort",
        "input_format_csv_detect_header": 1,
    }
    if not target_spec(target) and not os.path.exists(spec):
        spec = MEMORY  # (nothing to measure beside: no ./chute.db made in the user's directory)
    engine = open_engine(spec)
    try:
        found = delimiter or _sniffed_delimiter(engine, source, units)
        if found:
            settings["format_csv_delimiter"] = found
        expressions = [source.table_expression(u, None) for u in units]
        proposal = propose(
            engine,
            expressions,
            str(name),
            sample_rows,
            settings,
            time_budget_s,
            enums=enums,
            provenance=provenance,
        )
    finally:
        source.close()
    if found and not delimiter:
        note = f"CSV fields separated by {found!r}, as the first lines show (--delimiter overrides)"
        proposal = dataclasses.replace(proposal, notes=(*proposal.notes, note))
    return proposal


def _sniffed_delimiter(engine: Engine, source: FileSource, units: list[Unit]) -> str | None:
    """The delimiter of the first CSV file, found as `chute load` finds it (None: a comma)."""
    first = next((u for u in units if u.fmt.format == "CSV"), None)
    if first is None:
        return None
    lines = source.table_expression(first, "line String", "LineAsString")
    found = read_head(engine, lines, f"design: {first.key}").delimiter()
    if found == "\t":  # the engine reads no CSV with tabs
        raise SourceError(f"{first.key}: fields separated by tabs: give --format tsv")
    return found if found != "," else None
