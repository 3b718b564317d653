"""`chute bench`: every method checked, a real chart, no scratch table left behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from chute.bench import SCRATCH_PREFIX, scratch_tables
from chute.engine import open_engine

from ..harness.data import write_with_engine


def _data(tmp_path: Path) -> Path:
    engine = open_engine(str(tmp_path / "gen"))
    data = tmp_path / "data"
    data.mkdir()
    for i in range(3):
        write_with_engine(
            engine,
            data / f"d{i}.json.gz",
            "JSONEachRow",
            f"SELECT number AS id, toString(number) AS s FROM numbers({i * 5000}, 5000)",
            "gzip",
        )
    engine.close()
    return data


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chute.cli", "bench", *args], capture_output=True, text=True, timeout=600
    )


def test_bench_embedded_writes_a_png_and_cleans_up(tmp_path: Path) -> None:
    data = _data(tmp_path)
    db = tmp_path / "db"
    chart = tmp_path / "chart.png"
    proc = _run(str(data), "--target", str(db), "--chart", str(chart), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True  # as every command's --json says
    methods = {r["method"] for r in report["results"]}
    assert methods == {"engine INSERT SELECT file()", "chute -> embedded"}
    assert all(r["rows"] == 15000 for r in report["results"])
    png = chart.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    from PIL import Image

    with Image.open(chart) as image:
        assert image.size[0] > 600 and image.size[1] > 200
    assert scratch_tables(str(db)) == []
    engine = open_engine(str(db))
    assert engine.rows(f"SELECT count() AS n FROM _chute_ledger WHERE startsWith(`table`, '{SCRATCH_PREFIX}')") == [
        {"n": 0}
    ]


def test_bench_data_is_made_in_the_database_a_bench_already_opened(tmp_path: Path) -> None:
    """bench_export opens its database, then makes the streams set: chDB holds one path per
    process, so the generator must not connect to ':memory:' then."""
    script = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]);"
        "from chute.engine import open_engine; from bench import gen_streams;"
        "open_engine(sys.argv[2]); paths = gen_streams.generate(Path(sys.argv[3]), 1000, 2);"
        "print(len(paths), sum(p.stat().st_size > 0 for p in paths))"
    )
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", script, root, str(tmp_path / "db"), str(tmp_path / "streams")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["2", "2"]


def test_sizes_and_rates_are_in_mib_as_the_report_prints_them(tmp_path: Path) -> None:
    """One unit system: the demo's generator, chute bench and the report all say MiB."""
    from chute.bench import HEADERS

    root = Path(__file__).resolve().parents[2]
    made = subprocess.run(
        [sys.executable, str(root / "bench" / "gen_streams.py"), str(tmp_path / "d"), "--rows", "1000", "--files", "2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0 and " MiB to " in made.stderr, made.stderr
    assert "MiB/s in" in HEADERS and not any(" MB" in h or h.startswith("MB") for h in HEADERS)
