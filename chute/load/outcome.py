"""How units end: per-unit results, the ledger rows that make them final, error labels."""

from __future__ import annotations

from dataclasses import dataclass, field

from chute.errors import ChuteError
from chute.load.checks.missing import column_names
from chute.load.context import LoadContext
from chute.report import FileResult, FileState
from chute.units import Unit


@dataclass
class Plan:
    """The units to load (after the ledger), those whose earlier rows go first, every result."""

    load: list[Unit] = field(default_factory=list)
    replace: set[str] = field(default_factory=set)
    results: dict[str, FileResult] = field(default_factory=dict)


def fail(ctx: LoadContext, unit: Unit, message: str, plan: Plan, rejected: int = 0) -> None:
    """The unit failed: its result says why, and the ledger (a re-run tries it again)."""
    message = ctx.source.scrub(message)  # a second line of defence: no source secret in the report or ledger
    result = plan.results[unit.key]
    result.state = FileState.FAILED
    result.error = message
    result.rows_rejected = rejected
    ctx.ledger.record([unit], "failed", ctx.load_id, errors={unit.key: message}, rejected={unit.key: rejected})


def done(
    ctx: LoadContext, units: list[Unit], plan: Plan, rows: dict[str, int], rejected: dict[str, int] | None = None
) -> None:
    """The units' rows are in the table: their results, then the ledger's `done`."""
    for unit in units:
        result = plan.results[unit.key]
        result.state = FileState.LOADED
        result.rows_loaded = rows.get(unit.key, 0)
        result.rows_rejected = (rejected or {}).get(unit.key, 0)
        result.rows_defaulted, mask = ctx.missing.get(unit.key, (0, 0))
        if mask:
            with ctx.lock:
                named = ctx.report.defaulted_columns
                named += [n for n in column_names(mask, ctx.input_columns()) if n not in named]
    ctx.ledger.record(units, "done", ctx.load_id, rows=rows, rejected=rejected)
    units_done(ctx, units)


def units_done(ctx: LoadContext, units: list[Unit]) -> None:
    """Tell the source (Kafka commits its group's offsets for information)."""
    ctx.source.unit_done(units)


def batch_label(batch: list[Unit]) -> str:
    """How errors of a batch name it: by its files, never as "a batch"."""
    if len(batch) == 1:
        return batch[0].key
    return f"{batch[0].key} (with {len(batch) - 1} more file{'s' if len(batch) > 2 else ''})"


def told_of(exc: ChuteError, batch: list[Unit], unit: Unit) -> ChuteError:
    """A batch's error, told as the error of the one file the engine named in it."""
    label = batch_label(batch)
    if str(exc).startswith(label):
        exc.args = (unit.key + str(exc)[len(label) :],)
    return exc


def record_missing(ctx: LoadContext, batch: list[Unit], found: dict[str, tuple[int, int]] | None) -> None:
    """A committed batch's missing values (keyed by `_source`, or "" for the whole stage) as the
    load's, per unit key (chute.load.outcome.done reports them)."""
    if not found:
        return
    keys = {u.source_name: u.key for u in batch}
    with ctx.lock:
        if any(rows for rows, _ in found.values()):
            ctx.missing_formats.update(u.fmt.format for u in batch)
        for source, (rows, mask) in found.items():
            key = batch[0].key if len(batch) == 1 else keys.get(source, source)
            ctx.missing[key] = (rows, mask)  # (a batch written again replaces what it counted)
