"""Many small files, without an engine: how they are batched, how a failed big batch splits,
how their paths resolve, and how the ledger's TSV reads back."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from chute.errors import TargetError
from chute.formats import FileFormat
from chute.load.books import _unescape
from chute.load.context import LoadContext
from chute.load.methods import Methods
from chute.load.options import DEFAULT_BATCH_FILES, LoadOptions
from chute.load.plan import SERVER_NAME_BYTES, batches
from chute.load.recovery import SPLIT_FILES, SPLIT_PARTS, Recovery, Step
from chute.load.squash import Squash
from chute.schema import PROVENANCE_COLUMNS, Column
from chute.sources.base import SourceBase
from chute.sources.files import FileSource, _Resolved
from chute.sql import TableName
from chute.units import Unit

JSON = FileFormat("JSONEachRow", "none")
COLUMNS = [Column("id", "UInt32")] + [Column(n, t) for n, t in PROVENANCE_COLUMNS]


class _Target:
    display_name = "fake"
    parallel_streams = 1
    shared = False

    def __init__(self, server: bool) -> None:
        self.is_server = server

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the parts under test must not use the target's {name}")


class _Source(SourceBase):
    def needs_serial_read(self, unit: Unit) -> bool:
        return False


def _ctx(server: bool = False, **options: Any) -> LoadContext:
    ctx = LoadContext(_Target(server), _Source(), TableName(None, "t"), LoadOptions(**options))  # type: ignore[arg-type]
    ctx.set_info(columns=tuple(COLUMNS), stageable=True)
    return ctx


def _units(n: int, size: int = 400) -> list[Unit]:
    return [Unit(key=f"/data/small/f{i:06d}.json", size=size, mtime_ns=i, fmt=JSON) for i in range(n)]


def test_many_small_files_go_in_few_batches() -> None:
    """20,000 files of 400 bytes: two batches (64 to a batch made 313 of them)."""
    ctx = _ctx()
    found = batches(ctx, Methods(ctx), _units(20_000))
    assert [len(b) for b in found] == [DEFAULT_BATCH_FILES, DEFAULT_BATCH_FILES] == [10_000, 10_000]


def test_the_bytes_still_bound_a_batch_of_bigger_files() -> None:
    ctx = _ctx()
    found = batches(ctx, Methods(ctx), _units(100, size=100 * 2**20))
    assert {len(b) for b in found} == {2}


def test_a_source_that_holds_its_bytes_caps_the_batch_below_batch_mb() -> None:
    """Kafka holds each unit's messages in memory: its batches stay at its own bound, so
    memory does not grow with the topic, and --batch-mb can still make them smaller."""
    ctx = _ctx()
    ctx.source.batch_bytes = 64 * 2**20  # type: ignore[misc]
    found = batches(ctx, Methods(ctx), _units(12, size=16 * 2**20))
    assert [len(b) for b in found] == [4, 4, 4]
    ctx = _ctx(batch_bytes=32 * 2**20)
    ctx.source.batch_bytes = 64 * 2**20  # type: ignore[misc]
    assert {len(b) for b in batches(ctx, Methods(ctx), _units(12, size=16 * 2**20))} == {2}


def test_into_a_server_a_batch_names_its_units_in_under_128_kib() -> None:
    """A server's claims and books list every unit of a batch in one statement (18.16 parses 256 KiB)."""
    ctx = _ctx(server=True, method="client-convert")
    units = _units(20_000)
    found = batches(ctx, Methods(ctx), units)
    assert all(sum(len(u.key) for u in b) <= SERVER_NAME_BYTES for b in found)
    assert sum(len(b) for b in found) == len(units) and len(found) < 200


def test_a_failed_big_batch_splits_in_parts_before_any_file_is_set_aside() -> None:
    batch = _units(10_000)
    engine_named = TargetError(f"Cannot parse input (in file/uri {batch[5].key})")
    decision = Recovery(_ctx()).decide(batch, engine_named, tolerant_fits=True)
    assert decision.step is Step.SPLIT
    parts = Recovery.split_parts(batch)
    assert len(parts) <= SPLIT_PARTS and min(len(p) for p in parts) >= SPLIT_FILES
    assert [u for p in parts for u in p] == batch
    # A part of SPLIT_FILES files or fewer is decided as a batch always was.
    small = batch[:SPLIT_FILES]
    assert Recovery(_ctx()).decide(small, engine_named, tolerant_fits=False).step is Step.DEFER_CULPRIT
    assert Recovery.split_parts(small) == [[u] for u in small]


def test_squash_only_for_many_small_files_into_this_engine() -> None:
    assert Squash.applies(_ctx(), _units(100))
    assert not Squash.applies(_ctx(), _units(10))  # few blocks: read straight
    assert not Squash.applies(_ctx(), _units(100, size=2**20))  # blocks of thousands of rows
    assert not Squash.applies(_ctx(server=True), _units(100))
    assert not Squash.applies(_ctx(memory_limit=4 * 2**20), _units(100, size=50_000))  # over a quarter of the budget
    ctx = _ctx()
    ctx.set_info(columns=(Column("_path", "String"), *COLUMNS))  # data named like the engine's own column
    assert not Squash.applies(ctx, _units(100))


def test_paths_resolve_as_realpath_does(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.json").write_text("{}\n")
    (real / "b.json").write_text("{}\n")
    (tmp_path / "linked").symlink_to(real)
    (real / "c.json").symlink_to(real / "a.json")
    resolved = _Resolved()
    paths = [
        str(real / "a.json"),
        str(tmp_path / "linked" / "b.json"),  # through a symlinked directory
        str(real / "c.json"),  # a symlink itself
        str(tmp_path / "linked" / ".." / "real" / "a.json"),
    ]
    assert [resolved.path(p) for p in paths] == [os.path.realpath(p) for p in paths]
    assert str(real / "c.json") not in resolved.stats  # a link's lstat is not its file's stat


def test_file_units_keep_their_stat_and_names(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"f{i}.json").write_text('{"id": 1}\n' * (i + 1))
    (tmp_path / "link.json").symlink_to(tmp_path / "f0.json")
    units = FileSource([str(tmp_path)]).units()
    assert [(os.path.basename(u.key), u.size) for u in units] == [(f"f{i}.json", 10 * (i + 1)) for i in range(5)]
    assert all(u.mtime_ns == os.stat(u.key).st_mtime_ns for u in units)


def test_tsv_fields_read_back_as_written() -> None:
    assert _unescape("a\\tb\\nc\\\\d\\'e\\0") == "a\tb\nc\\d'e\0"
    assert _unescape("plain") == "plain"
