"""Values that no cheap reading proves fine still get the full check, in every pass that reads text.

`2024-02-30T10:00:00Z` has the fixed-width ISO layout and a clock in range (the byte-position
tests pass it): only the parse finds that February has no 30th, where the engine's own parser
rolls it over to March 1st. `2024-01-01 25:61:61` rolls over to the next day, and
`18446744073709551617` into UInt32 wraps to 1. Each pass's read (chute.load.checks) must refuse
them: the fast path's (JSON lines, CSV, TSV; counted or not), the tolerant pass's flagged read,
the careful passes' conversions and reasons; and whole loads must reject their rows.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import chute
from chute.engine import Engine, open_engine
from chute.errors import ChuteError
from chute.load.careful_pass import CarefulPass
from chute.load.checks.column import checked_read, conversion
from chute.load.checks.reasons import bad_conditions, range_reasons
from chute.load.checks.types import strip_wrappers
from chute.load.tolerant_pass import TolerantPass
from chute.schema import Column
from chute.sql import quote_str

# (column type, a good text, the good value as the table shows it, a bad text the parser would change)
UNPROVABLE = [
    ("DateTime('UTC')", "2024-02-28T10:00:00Z", "2024-02-28 10:00:00", "2024-02-30T10:00:00Z"),  # March 1st
    ("DateTime('UTC')", "2024-01-01 23:59:59", "2024-01-01 23:59:59", "2024-01-01 25:61:61"),  # the next day
    ("UInt32", "7", "7", "18446744073709551617"),  # wraps to 1
]
IDS = [bad for _, _, _, bad in UNPROVABLE]


def _source(fmt: str, read_as: str, type_sql: str, text: str) -> str:
    """The engine's reading of one record holding `text` in column c, as the load reads it."""
    quote = "" if type_sql == "UInt32" else '"'
    data = f'{{"c": {quote}{text}{quote}}}' if fmt == "JSONEachRow" else text
    return f"format({fmt}, {quote_str('c ' + read_as)}, {quote_str(data)})"


@pytest.mark.parametrize("case", UNPROVABLE, ids=IDS)
@pytest.mark.parametrize("fmt", ["JSONEachRow", "CSV", "TSV"])
@pytest.mark.parametrize("counted", [False, True], ids=["plain", "counted"])
@pytest.mark.parametrize("tolerant", [False, True], ids=["fast", "tolerant"])
def test_every_text_read_refuses_what_only_the_full_check_sees(
    engine: Engine, case: tuple[str, str, str, str], fmt: str, counted: bool, tolerant: bool
) -> None:
    """The fast path's read fails on the bad value (its SELECT sends the file to the careful
    pass); the tolerant pass's read (`whole_numbers`, its lenient value) flags it and keeps the
    column's default instead. The good value loads as it is either way."""
    type_sql, good, shown, bad = case
    read = checked_read("c", type_sql, fmt, True, counted=counted, whole_numbers=tolerant)
    assert read is not None
    fine = _source(fmt, read.read_as, type_sql, good)
    assert engine.rows(f"SELECT toUInt8({read.fits}) AS f, toString({read.value}) AS v FROM {fine}") == [
        {"f": 1, "v": shown}
    ]
    unfit = _source(fmt, read.read_as, type_sql, bad)
    got = engine.rows(f"SELECT toUInt8({read.fits}) AS f, toString({read.lenient}) AS v FROM {unfit}")
    assert got == [{"f": 0, "v": "1970-01-01 00:00:00" if type_sql.startswith("DateTime") else "0"}]
    with pytest.raises(ChuteError):
        engine.rows(f"SELECT {read.value} AS v FROM {unfit}")


@pytest.mark.parametrize("case", UNPROVABLE, ids=IDS)
def test_the_careful_checks_convert_the_good_and_name_the_bad(engine: Engine, case: tuple[str, str, str, str]) -> None:
    """The careful passes' conversion of the text is NULL for the bad value, and both of their
    reasons (JSON: over the parsed row; CSV/TSV: over the fields) name the column and the value."""
    type_sql, good, shown, bad = case
    column = Column("c", type_sql)
    reason = f"column c: {bad} does not fit {strip_wrappers(type_sql)[0]}"
    for text, value, why in [(good, shown, ""), (bad, None, reason)]:
        literal = quote_str(text)
        converted = conversion("c", type_sql)
        delimited = f"multiIf({', '.join(bad_conditions([column], ['c'], ['1']))}, '')"
        got = engine.rows(
            f"SELECT toString({converted}) AS v, {range_reasons([column])} AS json, {delimited} AS csv "
            f"FROM (SELECT {literal} AS c)"
        )
        assert got == [{"v": value, "json": why, "csv": why}]


def _spy(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> list[str]:
    """The units a pass ran on (the pass itself runs unchanged)."""
    seen: list[str] = []
    real: Callable[..., Any] = getattr(cls, name)

    def observed(self: object, units: Any, *args: Any, **kwargs: Any) -> Any:
        seen.extend(u.key for u in (units if isinstance(units, list) else [units]))
        return real(self, units, *args, **kwargs)

    monkeypatch.setattr(cls, name, observed)
    return seen


@pytest.mark.parametrize("case", UNPROVABLE, ids=IDS)
@pytest.mark.parametrize(
    ("fmt", "provenance", "passed"),
    [("jsonl", True, "tolerant"), ("jsonl", False, "careful"), ("csv", True, "careful"), ("tsv", False, "careful")],
)
def test_a_load_rejects_the_row_in_the_pass_that_takes_the_file(
    tmp_path: Path,
    target: str,
    monkeypatch: pytest.MonkeyPatch,
    case: tuple[str, str, str, str],
    fmt: str,
    provenance: bool,
    passed: str,
) -> None:
    """One such value among clean ones: the fast path refuses the file, the pass that takes it
    (tolerant for local JSON lines with provenance, careful otherwise) rejects that row alone,
    with its reason, and loads the others unchanged."""
    type_sql, good, shown, bad = case
    tolerant = _spy(monkeypatch, TolerantPass, "run")
    careful = _spy(monkeypatch, CarefulPass, "run")
    extra = (
        ", _source LowCardinality(String), _source_mtime DateTime64(3, 'UTC'), _source_row UInt64, "
        "_load_id LowCardinality(String)"
        if provenance
        else ""
    )
    open_engine(target).execute(f"CREATE TABLE t (id UInt32, c {type_sql}{extra}) ENGINE = MergeTree ORDER BY id")
    values = [good] * 200 + [bad] + [good] * 20
    path = tmp_path / f"values.{fmt}"
    if fmt == "jsonl":
        quote = "" if type_sql == "UInt32" else '"'
        path.write_text("".join(f'{{"id": {i}, "c": {quote}{v}{quote}}}\n' for i, v in enumerate(values, 1)))
    else:
        sep = "," if fmt == "csv" else "\t"
        path.write_text("".join(f"{i}{sep}{v}\n" for i, v in enumerate(values, 1)))

    report = chute.load([str(path)], table="t", target=target)

    assert report.ok and (report.rows_loaded, report.rows_rejected) == (220, 1), [f.error for f in report.files]
    assert (bool(tolerant), bool(careful)) == (passed == "tolerant", passed == "careful")
    engine = open_engine(target)
    assert engine.rows("SELECT DISTINCT toString(c) AS c FROM t") == [{"c": shown}]
    assert engine.rows("SELECT count() AS n FROM t WHERE id = 201") == [{"n": 0}]
    rejects = engine.rows("SELECT _source_row AS r, error FROM t_rejects")
    assert rejects == [{"r": 201, "error": f"column c: {bad} does not fit {type_sql}"}]
