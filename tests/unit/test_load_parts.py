"""The loader's parts on their own, without an engine: planning, batching, sizing,
the SELECT a batch is read with, and the recovery's decisions."""

from __future__ import annotations

from typing import Any

import pytest

from chute.capabilities import EMBEDDED
from chute.errors import ChuteError, SourceError, TargetError, TransientTargetError
from chute.formats import FileFormat
from chute.load.context import LoadContext, TableInfo
from chute.load.ledger import LedgerEntry
from chute.load.methods import Methods
from chute.load.options import LoadOptions
from chute.load.outcome import Plan
from chute.load.plan import ALONE_BATCHES, SHARED_BATCHES, batches, place_range, plan_units, rotated
from chute.load.reads import Reads
from chute.load.recovery import Recovery, Step
from chute.load.sizing import Sizing
from chute.report import FileResult
from chute.schema import PROVENANCE_COLUMNS, Column
from chute.sources.base import SourceBase
from chute.sql import TableName
from chute.units import Unit

JSON_GZ = FileFormat("JSONEachRow", "gzip")
CSV = FileFormat("CSV", "none")
PARQUET = FileFormat("Parquet", "none")


class FakeTarget:
    """Only what planning and SQL building ask of a target; no statement is ever run."""

    display_name = "fake"
    capabilities = EMBEDDED
    parallel_streams = 1
    parallel_inserts = True
    bytes_sent = 0
    shared = False
    is_server = False

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the parts under test must not use the target's {name}")


class FakeSource(SourceBase):
    def needs_serial_read(self, unit: Unit) -> bool:
        return False

    def row_number_expression(self, unit: Unit) -> str:
        return "_row_number + 1"

    def table_expression(self, unit: Unit, structure: str | None, fmt_name: str | None = None) -> str:
        return f"file({unit.key!r}, {fmt_name or unit.fmt.format!r}, {structure!r})"

    def combined_expression(self, units: list[Unit], structure: str, fmt_name: str | None = None) -> None:
        return None

    def unchanged(self, unit: Unit) -> bool:
        return True


def _ctx(columns: list[Column] | None = None, **options: Any) -> LoadContext:
    ctx = LoadContext(FakeTarget(), FakeSource(), TableName(None, "t"), LoadOptions(**options))  # type: ignore[arg-type]
    if columns is not None:
        ctx.set_info(columns=tuple(columns), stageable=True)
    return ctx


def _unit(key: str, size: int = 100, fmt: FileFormat = JSON_GZ, mtime: int = 1) -> Unit:
    return Unit(key=key, size=size, mtime_ns=mtime, fmt=fmt)


def _entry(unit: Unit, state: str, identity: str | None = None) -> LedgerEntry:
    return LedgerEntry(unit.key, identity or unit.identity, state, 10, 0, "old", "", "2026-11-24 00:00:00")


WITH_PROVENANCE = [Column("id", "UInt32"), Column("name", "String")] + [Column(n, t) for n, t in PROVENANCE_COLUMNS]


def test_plan_loads_new_and_interrupted_units_and_skips_loaded_ones() -> None:
    new, done, started, failed, changed = (_unit(k) for k in ("new", "done", "started", "failed", "changed"))
    ledger = {
        "done": _entry(done, "done"),
        "started": _entry(started, "started"),
        "failed": _entry(failed, "failed"),
        "changed": _entry(changed, "done", identity="999:1"),
    }
    plan = plan_units(_ctx(), [new, done, started, failed, changed], ledger)
    assert [u.key for u in plan.load] == ["new", "started", "failed"]
    assert plan.replace == {"started", "failed"}
    assert plan.results["done"].state == "skipped" and plan.results["changed"].state == "skipped"
    reload = plan_units(_ctx(on_change="reload"), [changed], ledger)
    assert [u.key for u in reload.load] == ["changed"] and reload.replace == {"changed"}
    refuse = plan_units(_ctx(on_change="error"), [changed], ledger)
    assert refuse.results["changed"].state == "failed" and not refuse.load


def test_batches_by_files_bytes_and_format() -> None:
    ctx = _ctx(WITH_PROVENANCE, batch_files=3, batch_bytes=1000)
    methods = Methods(ctx)
    units = [_unit(f"f{i}", 100) for i in range(7)] + [_unit("big", 950), _unit("c.csv", 10, CSV)]
    found = batches(ctx, methods, units)
    assert [[u.key for u in b] for b in found] == [
        ["f0", "f1", "f2"],
        ["f3", "f4", "f5"],
        ["f6"],  # the next one would pass 1000 bytes
        ["big"],
        ["c.csv"],  # another format
    ]


class _Claims:
    def __init__(self, others: bool) -> None:
        self.others = others

    def others_working(self) -> bool:
        return self.others


def test_batches_where_workers_may_share_the_job() -> None:
    ctx = _ctx(WITH_PROVENANCE)
    ctx.claims = _Claims(others=True)  # type: ignore[assignment]
    found = batches(ctx, Methods(ctx), [_unit(f"f{i}") for i in range(200)])
    assert len(found) >= SHARED_BATCHES and max(len(b) for b in found) == 25


def test_a_worker_alone_takes_bigger_batches_and_leaves_one_for_a_later_worker() -> None:
    ctx = _ctx(WITH_PROVENANCE)
    ctx.claims = _Claims(others=False)  # type: ignore[assignment]
    found = batches(ctx, Methods(ctx), [_unit(f"f{i}") for i in range(20)])
    assert [len(b) for b in found] == [10, 10] and ALONE_BATCHES == 2


def test_rotation_starts_at_a_whole_file() -> None:
    whole = [[_unit(f"f{i}")] for i in range(5)]
    ranges = [[Unit(f"big#{s}", 10, 1, CSV, origin="big", start=s, end=s + 10)] for s in (0, 10, 20)]
    order = whole[:2] + ranges + whole[2:]
    for _ in range(50):
        got = rotated(order)
        assert sorted(b[0].key for b in got) == sorted(b[0].key for b in order)
        starts = [b[0].start for b in got if b[0].is_range]
        first = got[0][0]
        assert not first.is_range or first.start == 0
        assert starts == [0, 10, 20] or (starts[0] == 0 and starts == sorted(starts))


def test_a_range_numbers_its_rows_after_the_earlier_ranges() -> None:
    ctx = _ctx()
    parts = [Unit(f"big#{s}", 10, 1, CSV, origin="big", start=s, end=s + 10) for s in (0, 10, 20)]
    ctx.ranges_of["big"] = parts
    plan = Plan(load=parts, results={u.key: FileResult(u.key, "skipped") for u in parts})
    plan.results["big#0"] = FileResult("big#0", "loaded", rows_loaded=7, rows_rejected=1)
    ctx.ledger_latest["big#10"] = LedgerEntry("big#10", "10:1", "done", 5, 0, "x", "", "")
    assert place_range(ctx, parts[2], plan) and ctx.row_offsets["big#20"] == 13


def test_sizing_stays_in_the_memory_budget() -> None:
    ctx = _ctx(WITH_PROVENANCE, memory_limit=2**30)
    sizing = Sizing(ctx, Reads(ctx))
    gz = [_unit("a", 64 * 2**20)]
    assert sizing.insert_block_bytes(gz, threads=2) == 128 * 2**20  # 4x expansion, a block per thread
    assert sizing.insert_block_bytes([_unit("p", 2**30, PARQUET)], threads=2) == 16 * 2**20
    wide = _ctx([Column(f"c{i}", "String") for i in range(400)], memory_limit=2**30)
    writer = Sizing(wide, Reads(wide)).part_writer_settings(threads=2)
    assert 2**16 <= int(writer["max_compress_block_size"]) < 2**20


def test_the_select_reads_wide_casts_exactly_and_quotes_names() -> None:
    columns = [Column("n", "UInt8"), Column("we`ird 'name", "String")] + [Column(n, t) for n, t in PROVENANCE_COLUMNS]
    ctx = _ctx(columns)
    unit = _unit("/data/it's.csv", fmt=CSV)
    sql = Reads(ctx).select_sql([unit])
    assert "accurateCast(`n`, 'UInt8') AS `n`" in sql  # read as Int64: a 300 fails, never wraps
    assert "`we\\`ird 'name`" in sql
    assert "CAST('/data/it\\'s.csv'" in sql  # _source, quoted
    assert "_row_number + 1" in sql


@pytest.mark.parametrize(
    ("batch", "exc", "tolerant", "step"),
    [
        (2, TransientTargetError("timeout"), False, Step.RAISE),
        (2, TargetError("bad (in file/uri f1)"), True, Step.TOLERANT),
        (2, TargetError("bad (in file/uri f1)"), False, Step.DEFER_CULPRIT),
        (2, TargetError("bad, no file named"), False, Step.SPLIT),
        (1, TargetError("bad"), False, Step.ALONE),
        (2, SourceError("f1 vanished (in file/uri f1)"), False, Step.SPLIT),
    ],
)
def test_recovery_decides(batch: int, exc: ChuteError, tolerant: bool, step: Step) -> None:
    units = [_unit(f"f{i}") for i in range(batch)]
    decision = Recovery(_ctx()).decide(units, exc, tolerant)
    assert decision.step is step
    if step is Step.DEFER_CULPRIT:
        assert decision.culprit is units[1]


def test_recovery_for_one_file(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = _ctx()
    recovery = Recovery(ctx)
    unit = _unit("a.jsonl")
    # Whether an unknown field is in the file's plain records reads the file (tests/server/test_odd_records.py);
    # here it is not: the decision alone is under test.
    monkeypatch.setattr(Recovery, "_only_in_odd_lines", lambda self, unit, field: False)
    assert recovery.for_unit(unit, TargetError("bad value")).step is Step.CAREFUL
    unknown = recovery.for_unit(unit, TargetError("Unknown field found while parsing JSONEachRow format: zz"))
    assert unknown.step is Step.FAIL and "--add-columns" in str(unknown.error)
    assert Recovery(_ctx(strict=True)).for_unit(unit, TargetError("bad")).step is Step.FAIL
    assert recovery.for_unit(_unit("a.parquet", fmt=PARQUET), TargetError("bad")).step is Step.FAIL


def test_table_info_is_replaced_whole() -> None:
    ctx = _ctx(WITH_PROVENANCE)
    before = ctx.info
    ctx.set_info(partition_key="toYYYYMM(d)")
    assert ctx.info is not before and before.partition_key == "" and isinstance(ctx.info, TableInfo)
    assert ctx.fill_provenance and [c.name for c in ctx.input_columns()] == ["id", "name"]
