"""How much of a file inference reads (issue 45): the engine's full sample of the first file
(25,000 rows) cost about a sixth of a 1 M-row JSON load's CPU. Among other files of its
format it is read as briefly as they are (INFER_MORE_ROWS); only where their columns disagree
is it read in full, as it always was alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chute
from chute.load import inference
from chute.schema import INFER_MORE_ROWS

pytestmark = pytest.mark.embedded


def _samples(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int | None]]:
    """(file name, rows read) of every schema inference from now on."""
    seen: list[tuple[str, int | None]] = []
    real = inference.describe

    def counted(engine, expression, context, sample_rows=None, format_settings=None):  # type: ignore[no-untyped-def]
        seen.append((context.split(":")[0].rsplit("/", 1)[-1], sample_rows))
        return real(engine, expression, context, sample_rows, format_settings)

    monkeypatch.setattr(inference, "describe", counted)
    return seen


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_files_that_agree_are_each_read_briefly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(3):
        _write(tmp_path / f"f{i}.json", [{"id": i * 10 + k, "at": "2024-01-02T03:04:05Z"} for k in range(10)])
    seen = _samples(monkeypatch)
    report = chute.load([str(tmp_path)], table="t", target=str(tmp_path / "db"))
    assert report.ok and report.rows_loaded == 30
    # (read side by side: in any order)
    assert sorted(seen) == [("f0.json", INFER_MORE_ROWS), ("f1.json", INFER_MORE_ROWS), ("f2.json", INFER_MORE_ROWS)]


def test_files_that_disagree_read_the_first_in_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / "f0.json", [{"id": k, "v": k} for k in range(10)])
    _write(tmp_path / "f1.json", [{"id": 10 + k, "v": k + 0.5} for k in range(10)])  # floats, not integers
    seen = _samples(monkeypatch)
    report = chute.load([str(tmp_path)], table="t", target=str(tmp_path / "db"))
    assert report.ok and report.rows_loaded == 20
    assert sorted(seen[:2]) == [("f0.json", INFER_MORE_ROWS), ("f1.json", INFER_MORE_ROWS)]
    assert seen[2:] == [("f0.json", None)]
    assert any("v Float64" in n or "v Nullable(Float64)" in n for n in report.notes), report.notes


def test_one_file_is_read_in_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path / "f0.json", [{"id": k} for k in range(10)])
    seen = _samples(monkeypatch)
    assert chute.load([str(tmp_path / "f0.json")], table="t", target=str(tmp_path / "db")).ok
    assert seen == [("f0.json", None)]
