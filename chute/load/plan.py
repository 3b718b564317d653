"""Units -> what to load: against the ledger, then in batches (one INSERT each)."""

from __future__ import annotations

import random

from chute.load.context import LoadContext
from chute.load.ledger import FORGOTTEN, LedgerEntry, many_objects
from chute.load.methods import Methods
from chute.load.outcome import Plan, fail
from chute.load.sizing import ROW_SIZED_FORMATS
from chute.report import FileResult, FileState
from chute.units import Unit

SHARED_BATCHES = 8
"""Where other workers hold claims on the table when a load plans (a server target), its units
go in at least this many batches (claims are taken a batch at a time), so each gets some."""
ALONE_BATCHES = 2
"""The same where no other worker holds a claim then: fewer, bigger batches, still two, so that
a worker that starts later takes one. Each batch's rows arrive in the target as parts of their
own, which the server merges while the load goes on: 20 files of the streams set in 7 batches
cost the server 0.8-0.95x a raw POST's CPU, in 2 batches 0.5x (bench/README.md)."""
SHARED_PARSED_BATCHES = 4
"""The same for files a server parses (server-parse): a batch's files go at once, so fewer,
bigger batches keep a later worker's share and cut the books' round trips (about ten a batch)."""
PARSED_BATCH_FILES = 64
"""Files a server parses go at most this many to a batch: each is a request of its own."""
SERVER_NAME_BYTES = 128 * 2**10
"""The names of one batch's units, in bytes, at most, into a server: its claims and books name
every unit of the batch in a statement, which an old server parses up to 256 KiB
(`max_query_size`). This engine parses longer ones (chute.engine.BIG_QUERIES)."""


def plan_units(
    ctx: LoadContext, units: list[Unit], ledger: dict[str, LedgerEntry], unchanged: set[str] | None = None
) -> Plan:
    """New units load; loaded ones are skipped (or reloaded as --on-change says); started
    (interrupted) or failed ones load again after what got in of them is removed. `unchanged`:
    the units already compared with `ledger` and found as it recorded them (else compared here)."""
    with many_objects():
        return _planned(ctx, units, ledger, unchanged)


def _planned(ctx: LoadContext, units: list[Unit], ledger: dict[str, LedgerEntry], unchanged: set[str] | None) -> Plan:
    plan = Plan()
    results, entry_of, skipped = plan.results, ledger.get, FileState.SKIPPED  # (bound once: a unit a file)
    for unit in units:
        key = unit.key
        entry = entry_of(key)
        # Database units count rows in `size`, not bytes: they add nothing to "bytes in".
        sized_in_rows = unit.fmt.format in ROW_SIZED_FORMATS
        result = results[key] = FileResult(key, skipped, bytes_in=0 if sized_in_rows else unit.size)
        if entry is None or entry.state == FORGOTTEN:  # (chute forget deleted its rows)
            plan.load.append(unit)
        elif entry.state == "done" and (key in unchanged if unchanged is not None else unit.matches(entry.identity)):
            result.rows_loaded = 0
        elif entry.state == "done":
            _changed(ctx, unit, plan, result)
        else:  # started (interrupted) or failed: remove whatever got in, load again
            plan.load.append(unit)
            plan.replace.add(unit.key)
    return plan


def _changed(ctx: LoadContext, unit: Unit, plan: Plan, result: FileResult) -> None:
    """A loaded unit whose size or mtime changed: --on-change."""
    if ctx.opts.on_change == "skip":
        ctx.report.notes.append(f"{unit.key}: changed since it was loaded; skipped (--on-change)")
    elif ctx.opts.on_change == "error":
        result.state = FileState.FAILED
        result.error = "changed since it was loaded (size, mtime or content); use --on-change reload"
    else:
        plan.load.append(unit)
        plan.replace.add(unit.key)


def place_range(ctx: LoadContext, unit: Unit, plan: Plan) -> bool:
    """The row number a range starts after: the rows of the file's earlier ranges.

    Ranges of a file load in order; a range whose predecessors did not all
    load cannot number its rows and waits for the next run.
    """
    before = 0
    for other in ctx.ranges_of.get(unit.origin, []):
        if other.start >= unit.start:
            break
        result = plan.results.get(other.key)
        entry = ctx.ledger_latest.get(other.key)
        if result is not None and result.state == "loaded":
            before += result.rows_loaded + result.rows_rejected
        elif result is not None and result.state == "skipped" and entry and entry.state == "done":
            before += entry.rows_loaded + entry.rows_rejected
        else:
            fail(ctx, unit, f"{unit.origin}: bytes {unit.start}-{unit.end} wait for an earlier part of the file", plan)
            return False
    ctx.row_offsets[unit.key] = before
    return True


def batches(ctx: LoadContext, methods: Methods, units: list[Unit]) -> list[list[Unit]]:
    """Units of one format, together up to --batch-mb (or less, where the source says:
    Kafka) and the file count; units a server reads itself, units read by one thread and
    byte ranges go alone.

    Many small files go in few batches: each batch costs about a dozen statements
    (stage, checks, books) whatever its size, so the count is high (--batch-files,
    default 10,000) and the bytes bound it for bigger files."""
    found: list[list[Unit]] = []
    current: list[Unit] = []
    size = names = 0
    files = ctx.opts.batch_files
    batch_bytes = min(ctx.opts.batch_bytes, ctx.source.batch_bytes or ctx.opts.batch_bytes)
    name_bytes = SERVER_NAME_BYTES if ctx.target.is_server else None
    if ctx.claims is not None:
        # Other workers may share the job: enough batches for each to take some.
        parsed = bool(units) and ctx.fill_provenance and all(methods.pass_through([u]) for u in units)
        if parsed:
            share = SHARED_PARSED_BATCHES
        elif ctx.claims.others_working():
            share = SHARED_BATCHES
        else:
            share = ALONE_BATCHES
        files = min(files, max(1, -(-len(units) // share)))
    parsed_files = min(files, PARSED_BATCH_FILES)
    together = ctx.fill_provenance
    stageable = ctx.info.stageable
    first_passed = first_alone = False
    for unit in units:
        # What decides about a unit, asked once per unit (20,000 files: 0.4 s when asked per pair).
        passed = methods.pass_through([unit])
        server_side = methods.server_side_possible(unit)
        if current and (
            unit.fmt != current[0].fmt
            or len(current) >= files
            or size + unit.size > batch_bytes
            or (name_bytes is not None and names + len(unit.key) > name_bytes)
            or (passed and len(current) >= parsed_files)
            or not (together or (stageable and not passed))
            or server_side
            or first_alone
            or passed != first_passed
            or ctx.serial(unit)
            or unit.is_range
            or ctx.text_reads.get(unit.key) != ctx.text_reads.get(current[0].key)
        ):
            found.append(current)
            current, size, names = [], 0, 0
        if not current:
            first_passed, first_alone = passed, server_side or unit.is_range
        current.append(unit)
        size += unit.size
        names += len(unit.key)
    if current:
        found.append(current)
    return found


def rotated(found: list[list[Unit]]) -> list[list[Unit]]:
    """The batches from a random one on, where several workers may take the same job: each
    starts elsewhere, so they rarely want the same unit at once. A file's byte ranges stay
    in order (a rotation starts at a whole file or a file's first range)."""
    starts = [i for i, b in enumerate(found) if not b[0].is_range or b[0].start == 0]
    if len(starts) < 2:
        return found
    at = random.choice(starts)
    return found[at:] + found[:at]
