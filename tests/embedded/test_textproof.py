"""The cheap proof of a JSON line's integers and dates (chute.load.checks.textproof), in the engine:
plain values are proved with the value the JSON parser gives; anything else is left to the
full check (issue 45: `2024-02-30T10:00:00Z`, `2024-01-01 25:61:61`, `18446744073709551617`
into UInt32 never pass the cheap test)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chute.load.checks.textproof import proof_layers, provable
from chute.sql import quote_str

COLUMNS = [("n", "UInt32"), ("b", "UInt8"), ("big", "Int64"), ("t", "DateTime"), ("d", "Date")]
PLAIN: dict[str, Any] = {
    "n": 4000000000,
    "b": True,
    "big": -9000000000000000000,
    "t": "2024-02-29T23:59:59Z",
    "d": "2024-02-29",
}


def _prove(engine: Any, tmp_path: Path, lines: list[str]) -> list[dict[str, Any]]:
    path = tmp_path / "p.json"
    path.write_text("".join(line + "\n" for line in lines))
    source = f"SELECT line, _row_number AS r FROM file({quote_str(str(path))}, LineAsString, 'line String')"
    sql, values, proved = proof_layers([n for n, _ in COLUMNS], [t for _, t in COLUMNS], source, "r")
    named = ", ".join(f"toString({v}) AS {n}" for v, (n, _) in zip(values, COLUMNS, strict=True))
    return list(engine.rows(f"SELECT r, {proved} AS ok, {named} FROM ({sql}) ORDER BY r"))


def test_plain_values_are_proved_with_the_parsers_values(engine: Any, tmp_path: Path) -> None:
    got = _prove(engine, tmp_path, [json.dumps(PLAIN, separators=(",", ":"))])
    assert got[0]["ok"] == 1
    assert (got[0]["n"], got[0]["b"], got[0]["big"]) == ("4000000000", "1", "-9000000000000000000")
    expected = engine.rows("SELECT toString(toUInt32(toDateTime('2024-02-29 23:59:59', 'UTC'))) AS t")[0]["t"]
    assert (got[0]["t"], got[0]["d"]) == (expected, "2024-02-29")


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("n", "18446744073709551617"),  # wraps to 1 in the server's parser
        ("n", "4294967296"),
        ("n", "-1"),
        ("b", "300"),
        ("n", "007"),
        ("n", "1.5"),
        ("n", '"5"'),
        ("n", "null"),
        ("t", '"2024-02-30T10:00:00Z"'),  # rolls over to March 1st
        ("t", '"2024-01-01 25:61:61"'),
        ("t", '"2024-01-01T10:00:00+02:00"'),
        ("t", '"2200-01-01T00:00:00Z"'),
        ("d", '"2024-13-45"'),
        ("d", '"2150-01-01"'),
    ],
)
def test_values_the_cheap_test_cannot_prove_get_the_full_check(
    engine: Any, tmp_path: Path, key: str, text: str
) -> None:
    line = json.dumps(PLAIN, separators=(",", ":")).replace(
        f'"{key}":{json.dumps(PLAIN[key], separators=(",", ":"))}', f'"{key}":{text}'
    )
    assert f'"{key}":{text}' in line
    assert _prove(engine, tmp_path, [line])[0]["ok"] == 0


@pytest.mark.parametrize(
    "line",
    [
        '{"n":1,"n":2,"b":1,"big":1,"t":"2024-01-01T00:00:00Z","d":"2024-01-01"}',  # a key twice
        '{"b":1,"big":1,"t":"2024-01-01T00:00:00Z","d":"2024-01-01"}',  # a key missing
        '{"x":{"n":1},"b":1,"big":1,"t":"2024-01-01T00:00:00Z","d":"2024-01-01","n":5}',  # nested too
        '{"n" : 1,"b":1,"big":1,"t":"2024-01-01T00:00:00Z","d":"2024-01-01"}',  # spaces
    ],
)
def test_keys_not_found_exactly_once_are_not_proved(engine: Any, tmp_path: Path, line: str) -> None:
    assert _prove(engine, tmp_path, [line])[0]["ok"] == 0


def test_a_key_inside_a_string_value_is_not_a_key(engine: Any, tmp_path: Path) -> None:
    row = {"s": '"n":7,', **PLAIN}
    line = json.dumps(row, separators=(",", ":"))
    got = _prove(engine, tmp_path, [line])
    assert got[0]["ok"] == 1 and got[0]["n"] == "4000000000"


def test_which_columns_the_proof_knows() -> None:
    assert provable("n", "UInt64") and provable("t", "DateTime('Asia/Tokyo')") and provable("d", "Date")
    assert not provable("n", "Nullable(UInt32)")
    assert not provable("x", "Decimal(9, 2)") and not provable("x", "DateTime64(3)") and not provable("x", "Float64")
    assert not provable('we"ird', "UInt32") and not provable("ünï", "UInt32")
