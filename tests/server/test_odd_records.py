"""A new table from a JSON-lines file with one odd record (issue 46, item 4).

A key given twice, a value of another kind (an object where the others hold numbers), a NUL
byte, nesting deeper than the parser's 1,000 levels: one such record failed the whole file at
inference, its good rows not loaded. Inference now leaves odd records out of its sample (as it
does for CSV's ragged rows); the load rejects the ones it cannot read, with their reason, and
loads the good rows. Checked on the embedded target and the 18.16 server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chute

from .test_fidelity import dest, rows

_ = dest  # (the fixture: embedded and the 18.16 server)
GOOD = 40
AT = 11
"""The odd record's line."""
ODD = {
    "a key twice": ('{"id": 5, "name": "a", "name": "b", "score": 1.5}', "a field appears twice: name"),
    "an object among numbers": ('{"id": {"a": 1}, "name": "x", "score": 2}', "column id"),
    "nested too deep": ('{"id": 7, "name": "x", "score": 1, "deep": ' + "[" * 1100 + "]" * 1100 + "}", "JSON"),
    "a NUL byte": ('{"id": 8, "name": "a\x00b", "score": 1.5}', None),
}


@pytest.mark.parametrize("kind", list(ODD))
def test_one_odd_record_does_not_fail_a_new_table(tmp_path: Path, dest: str, kind: str) -> None:
    good = [json.dumps({"id": i, "name": f"n{i}", "score": i / 2}) for i in range(1, GOOD + 1)]
    odd, reason = ODD[kind]
    path = tmp_path / "odd.jsonl"
    path.write_bytes(("\n".join([*good[: AT - 1], odd, *good[AT - 1 :]]) + "\n").encode())
    report = chute.load([str(path)], table="t", target=dest)
    assert report.ok, [f.error for f in report.files]
    assert any("not plain JSON objects" in n for n in report.notes), report.notes
    names = [
        c[0] for c in rows(dest, "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = 't'")
    ]
    assert names[:3] == ["id", "name", "score"] and "deep" not in names
    if reason is None:  # (the engine reads a NUL byte in a string: the record loads as it is)
        assert report.rows_loaded == GOOD + 1 and report.rows_rejected == 0
        assert rows(dest, "SELECT position(name, '\\0') > 0 FROM t WHERE id = 8 AND name != 'n8'") == [["1"]]
        return
    assert report.rows_loaded == GOOD and report.rows_rejected == 1
    assert rows(dest, "SELECT count(), sum(id) FROM t") == [[str(GOOD), str(GOOD * (GOOD + 1) // 2)]]
    rejected = rows(dest, "SELECT _source_row, error FROM t_rejects")
    assert len(rejected) == 1 and rejected[0][0] == str(AT) and reason in rejected[0][1], rejected
