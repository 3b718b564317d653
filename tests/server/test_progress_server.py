"""Into a server, the progress callback moves within a batch too (the engine here reads the
files and streams Native blocks, telling how far it has read)."""

from __future__ import annotations

import itertools
from pathlib import Path

import chute
from chute.engine import open_engine

from ..harness.data import write_with_engine


def test_progress_moves_within_a_batch_into_a_server(tmp_path: Path, server_url: str) -> None:
    engine = open_engine(str(tmp_path / "gen"))
    data = tmp_path / "data"
    data.mkdir()
    for i in range(20):
        write_with_engine(
            engine,
            data / f"f{i:02d}.csv",
            "CSVWithNames",
            f"SELECT number AS id, toString(cityHash64(number)) AS s FROM numbers({i * 50000}, 50000)",
        )
    engine.close()
    told: list[tuple[int, int, int]] = []
    options = chute.LoadOptions(method="client-convert")
    report = chute.load([str(data)], "t", target=server_url, options=options, progress=lambda *a: told.append(a))
    assert report.ok and report.rows_loaded == 1_000_000
    within = [(rows, done) for files, rows, done in told if files == 0 and done > 0]
    assert len({done for _, done in within}) >= 2, told  # told before the first batch was done
    assert all(a[0] <= b[0] and a[2] <= b[2] for a, b in itertools.pairwise(told)), told  # never backwards
    assert told[-1] == (20, 1_000_000, sum(p.stat().st_size for p in data.iterdir()))
