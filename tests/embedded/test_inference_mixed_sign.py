"""A JSON column whose integers are small in some rows and past 2^63 in others, beside a
negative number in another column: the engine's inference finds Int64 in one row and UInt64
in another and fails to merge them (CANNOT_EXTRACT_TABLE_STRUCTURE). chute infers such a
column Int128, which holds both, and loads every row."""

from __future__ import annotations

from pathlib import Path

import chute
from chute.engine import open_engine


def test_small_and_past_two_to_the_63_integers_in_one_column_load(tmp_path: Path, target: str) -> None:
    data = tmp_path / "mixed.jsonl"
    data.write_text(
        '{"t":1,"it\'s":1,"d":5}\n{"t":18446744073709551610,"it\'s":18446744073709551611,"d":-3}\n{"t":2,"it\'s":2,"d":1}\n'
    )

    report = chute.load([str(data)], table="t", target=target)

    assert (report.rows_loaded, report.rows_rejected) == (3, 0)
    engine = open_engine(target)
    assert engine.rows("SELECT toString(t) AS t, toString(`it's`) AS i, d FROM t ORDER BY _source_row") == [
        {"t": "1", "i": "1", "d": 5},
        {"t": "18446744073709551610", "i": "18446744073709551611", "d": -3},
        {"t": "2", "i": "2", "d": 1},
    ]
