"""Bounded memory on wide rows: how the insert is sized from --memory-limit.

The peak-RSS targets themselves are checked by `bench/bench_big.py` (P5); these
tests prove the sizing reaches the real engine and changes nothing in the data.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import chute
from chute.engine import Engine, open_engine

from ..harness.data import write_with_engine

WIDE_COLUMNS = 120
WIDE = (
    "SELECT number AS id, "
    + ", ".join(f"toString(number * {i}) AS c{i}" for i in range(WIDE_COLUMNS))
    + (" FROM numbers({rows})")
)
CHECK = "SELECT count() AS n, sum(cityHash64(*)) AS h FROM (SELECT * EXCEPT (_load_id) FROM {table})"


def _statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement the engine runs (with its SETTINGS), as sent; the engine still runs them."""
    seen: list[str] = []
    real = Engine.execute

    def spy(self: Engine, sql: str, settings: Any = None, context: str = "") -> Any:
        from chute.engine import render_settings

        seen.append(sql + render_settings(settings))
        return real(self, sql, settings, context)

    monkeypatch.setattr(Engine, "execute", spy)
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("ext,fmt", [("parquet", "Parquet"), ("csv", "CSVWithNames")])
def test_wide_rows_under_a_small_budget(
    tmp_path: Path, target: str, ext: str, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = open_engine(target)
    rows = 20_000
    path = write_with_engine(engine, tmp_path / f"wide.{ext}", fmt, WIDE.format(rows=rows))
    seen = _statements(monkeypatch)

    small = chute.load([str(path)], "small", target=target, options=chute.LoadOptions(memory_limit=2**30))
    assert small.ok and small.rows_loaded == rows
    # The part writer's buffers (columns x threads) get an eighth of 1 GiB: smaller compressed blocks,
    # set on the stage table (the engine's writer reads them from the table, not the query).
    modify = [s for s in seen if "MODIFY SETTING" in s and "_chute_stage_small_" in s]
    block = re.search(r"`max_compress_block_size` = (\d+)", modify[0] if modify else "")
    assert block and 2**16 <= int(block.group(1)) < 2**20, modify
    inserts = [s for s in seen if s.startswith("INSERT INTO `_chute_stage_small_")]
    assert inserts and all("max_compress_block_size" not in s for s in inserts)
    if fmt == "Parquet":
        # One reader thread per GiB of budget: row groups are decoded whole.
        assert all(re.search(r"\bmax_threads = 1\b", s) for s in inserts), inserts
    # The target keeps its own settings.
    created = engine.rows("SELECT create_table_query AS q FROM system.tables WHERE name = 'small'")[0]["q"]
    assert "max_compress_block_size" not in created

    seen.clear()
    roomy = chute.load([str(path)], "roomy", target=target, options=chute.LoadOptions(memory_limit=64 * 2**30))
    assert roomy.ok and roomy.rows_loaded == rows
    assert not [s for s in seen if "MODIFY SETTING" in s]
    assert engine.rows(CHECK.format(table="small")) == engine.rows(CHECK.format(table="roomy"))


def test_narrow_rows_keep_the_engine_defaults(tmp_path: Path, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = open_engine(target)
    path = write_with_engine(engine, tmp_path / "narrow.parquet", "Parquet", "SELECT number AS id FROM numbers(1000)")
    seen = _statements(monkeypatch)
    report = chute.load([str(path)], "narrow", target=target, options=chute.LoadOptions(memory_limit=2**30))
    assert report.ok and report.rows_loaded == 1000
    assert not [s for s in seen if "MODIFY SETTING" in s]
