"""Wide files with bad rows (issue 46, item 3). The careful pass wrote each column's checks into
its SQL, about 5 KB a column: a 10,000-column CSV with bad rows failed whole with `TOO_BIG_AST`
(good rows not loaded, nothing in the rejects), and 2,000 columns with one bad row took about 2
CPU minutes. Past `WIDE_COLUMNS` columns the careful passes now check a type at a time over
arrays (chute.load.checks.wide); the same rows here, checked both ways, give the same values,
reasons and counts."""

from __future__ import annotations

import json
import resource
from pathlib import Path

import pytest

import chute
from chute.engine import Engine, open_engine
from chute.load.careful import REASON, ROW, check_json_lines
from chute.load.careful_delimited import check_delimited
from chute.load.checks import wide
from chute.load.checks.missing import watched
from chute.load.context import without_overflow_check
from chute.load.options import LoadOptions, format_settings
from chute.schema import PROVENANCE_COLUMNS, Column, marker_comment, structure
from chute.sql import quote_str

# (column type, texts: the first is good, the others good, bad or missing)
CASES: list[tuple[str, list[str]]] = [
    ("Int8", ["7", "300", "abc", "1e2", "", "-129", "1.0"]),
    ("UInt32", ["7", "18446744073709551617", "-1", "1.5", "4294967295"]),
    ("Int64", ["5", "9223372036854775808", "1e2", " 5"]),
    ("Nullable(UInt64)", ["5", "", "x", "18446744073709551615"]),
    ("Float32", ["1.5", "1e39", "abc", "-0"]),
    ("Float64", ["2.5", "1e400", "inf", "x", ""]),
    ("Decimal(5, 2)", ["1.25", "1.999", "1234.5", "1e2", "-0.5"]),
    ("Date", ["2024-02-28", "2024-02-30", "2150-01-01", "", "2024-13-45"]),
    ("Nullable(Date32)", ["1900-01-01", "10000-01-01", "", "2024-02-29"]),
    ("DateTime('UTC')", ["2024-01-01 23:59:59", "2024-01-01 25:61:61", "2024-02-30T10:00:00Z", "2024-02-28T10:00:00Z"]),
    ("DateTime64(3, 'UTC')", ["2024-01-01 00:00:00.123", "2024-01-01 24:00:00", "nope"]),
    ("Enum8('a' = 1, 'b' = 2)", ["a", "b", "c", "2", "7"]),
    ("UUID", ["61f0c404-5cb3-11e7-907b-a6006ad3dba0", "not-a-uuid"]),
    ("Bool", ["true", "yes", "0"]),
    ("IPv4", ["1.2.3.4", "1.2.3.400"]),
    ("String", ["s", "", "a b"]),
    ("LowCardinality(String)", ["l", "m"]),
    ("Nullable(String)", ["n", ""]),
    ("FixedString(3)", ["abc", "abcd"]),
    ("Array(UInt8)", ["[1,2]", "[300]", "x"]),
    ("Array(Date)", ["['2024-01-01']", "['2024-02-30']"]),
]
COPIES = 3
"""Each case's column this many times, so that a type's group holds several columns."""


def _columns() -> list[Column]:
    columns = []
    for copy in range(COPIES):
        for j, (type_sql, _) in enumerate(CASES):
            marker = marker_comment("NA") if type_sql == "Nullable(UInt64)" and copy == 1 else ""
            columns.append(Column(f"c{copy}_{j}", type_sql, comment=marker))
    # A DEFAULT expression's column (its missing value is computed from the row).
    columns.append(Column("d", "Int32", default_kind="DEFAULT", default_expression="toInt32(42)"))
    return columns


def _texts(columns: list[Column], rows: int) -> list[list[str]]:
    """Mostly good rows; some with one bad value or several, some with missing ones."""
    found = []
    for r in range(rows):
        row = []
        for j, c in enumerate(columns):
            texts = CASES[j % len(CASES)][1] if c.name != "d" else ["1", "", "x"]
            one = r % 3 == 1 and j == (r * 5) % len(columns)
            several = r % 3 == 2 and (j + r) % 20 == 0
            pick = (r // 3 + j) % len(texts) if one or several else 0
            row.append("NA" if c.null_marker and pick == 1 else texts[pick])
        found.append(row)
    # Good values that only the conversion reads (a plain cast would refuse or change them), and
    # rows whose bad values the JSON parser refuses, beside a bad value in an earlier column.
    unusual = [UNUSUAL.get(c.type, CASES[j % len(CASES)][1][0]) for j, c in enumerate(columns)]
    found.append(unusual)
    for first, then in [("Int8", "Bool"), ("Bool", "IPv4"), ("IPv4", "Date")]:
        row = list(unusual)
        row[_at(columns, first, 1)] = BAD_OF[first]
        row[_at(columns, then, 2)] = BAD_OF[then]
        found.append(row)
    return found


UNUSUAL = {
    "Int8": "1.0",
    "Int64": "1e2",
    "UInt32": "4294967295",
    "Decimal(5, 2)": "1e2",
    "DateTime('UTC')": "2024-02-28T10:00:00Z",
    "Nullable(Date32)": "2024-02-29",
    "Float32": "-0",
    "Enum8('a' = 1, 'b' = 2)": "2",
    "Bool": "0",
}
BAD_OF = {"Int8": "300", "Bool": "yes", "IPv4": "1.2.3.400", "Date": "2024-02-30"}


def _at(columns: list[Column], type_sql: str, copy: int) -> int:
    return next(j for j, c in enumerate(columns) if c.type == type_sql and c.name.startswith(f"c{copy}_"))


def _names_first(engine: Engine, table: str, columns: list[Column], firsts: list[tuple[int, str]]) -> None:
    """The rows with two bad values (`_texts`: record numbers 62 to 64) name the earlier column
    (`firsts`: the record, and that column's type)."""
    for row, type_sql in firsts:
        name = columns[_at(columns, type_sql, 1)].name
        found = engine.rows(f"SELECT {REASON} AS r FROM {table} WHERE {ROW} = {row}")
        assert str(found[0]["r"]).startswith(f"column {name}: "), (row, found)


def _csv_field(text: str) -> str:
    return f'"{text.replace(chr(34), chr(34) * 2)}"' if any(ch in text for ch in ',"\n') else text


def _row_only(row: str) -> dict[str, tuple[str, str]]:
    """The provenance of the good rows' select: the row number only."""
    return {"_source_row": (row, "UInt64")}


def _both_ways(monkeypatch: pytest.MonkeyPatch, check: object) -> tuple[str, str]:
    assert callable(check)
    monkeypatch.setattr(wide, "WIDE_COLUMNS", 1_000_000)
    narrow = check()
    monkeypatch.setattr(wide, "WIDE_COLUMNS", 0)
    return narrow, check()


@pytest.mark.parametrize("fmt", ["CSV", "TSV"])
def test_a_type_at_a_time_gives_what_a_column_at_a_time_gives_csv(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """Every value, reason (the row's first bad column), missing-value mask and presence flag
    of the checked records, and the good rows' select, the same both ways."""
    columns = _columns()
    rows = _texts(columns, 60)
    path = tmp_path / f"wide.{fmt.lower()}"
    delimiter = "," if fmt == "CSV" else "\t"
    with open(path, "w") as out:
        out.write(delimiter.join(c.name for c in columns) + "\n")
        for r, row in enumerate(rows):
            fields = [_csv_field(t) if fmt == "CSV" else (t or "\\N") for t in row]
            if r == 11:
                fields = fields[:-2]  # (a ragged row)
            out.write(delimiter.join(fields) + "\n")
    tsv = fmt == "TSV"
    text_columns = [
        Column(c.name, "Nullable(String)" if tsv or c.type == "Nullable(String)" or c.name == "d" else "String")
        for c in columns
    ]
    expression = f"file({quote_str(str(path))}, {quote_str(fmt)}, {quote_str(structure(text_columns))})"
    lines = f"file({quote_str(str(path))}, 'LineAsString', 'line String')"
    settings = {**without_overflow_check(format_settings(LoadOptions())), "max_threads": 1}
    watched_at = tuple(i for i, c in enumerate(columns) if watched(c, fmt))

    def check() -> str:
        checked = check_delimited(
            engine, expression, lines, columns, delimiter, settings, header_lines=1, watched_at=watched_at
        )
        try:
            assert checked.total == len(rows)
            _names_first(engine, checked.table.sql, columns, [(62, "Int8"), (64, "IPv4")])
            assert 5 < checked.rejected < len(rows) - 5
            table = engine.text(f"SELECT * EXCEPT `_chute_missing` FROM {checked.table.sql} ORDER BY 1", "TSV")
            masks = engine.text(f"SELECT `_chute_missing` FROM {checked.table.sql} ORDER BY 1", "TSV")
            good = checked.good_select(columns, _row_only, count_missing=True)
            loaded = engine.text(f"SELECT * FROM ({good}) ORDER BY _source_row", "TSV")
            return "\n".join([table, masks, loaded])
        finally:
            checked.drop(engine)

    narrow, wide_way = _both_ways(monkeypatch, check)
    assert "does not fit" in narrow and "malformed record" in narrow
    assert wide_way == narrow


def _json_rows(columns: list[Column], rows: list[list[str]]) -> list[str]:
    lines = []
    for r, row in enumerate(rows):
        record: dict[str, object] = {}
        for c, text in zip(columns, row, strict=True):
            if text == "" and r % 2:
                continue  # (an absent key)
            try:
                record[c.name] = json.loads(text) if text and not c.type.startswith(("Date", "Nullable(Date")) else text
            except ValueError:
                record[c.name] = text
        lines.append(json.dumps(record))
    lines[5] = lines[5][:-1] + ', "c0_0": 1}'  # (a field twice)
    lines[17] = lines[17][:-1] + ', "nope": 1}'  # (a field not in the table)
    lines[23] = "{not json"
    return lines


@pytest.mark.parametrize("count_missing", [False, True], ids=["plain", "counted"])
def test_a_type_at_a_time_gives_what_a_column_at_a_time_gives_json(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count_missing: bool
) -> None:
    """JSON lines: the parsed records' reasons (every bad value, '; '), the refused records'
    reasons (the first bad value), and the good rows' converted values, the same both ways."""
    columns = _columns()
    path = tmp_path / "wide.jsonl"
    path.write_text("\n".join(_json_rows(columns, _texts(columns, 60))) + "\n")
    lines = f"file({quote_str(str(path))}, 'LineAsString', 'line String')"
    read = without_overflow_check(format_settings(LoadOptions()))

    def check() -> str:
        checked = check_json_lines(engine, lines, columns, {**read, "max_threads": 1}, read, count_missing)
        try:
            assert 5 < checked.rejected < checked.total - 5
            _names_first(engine, checked.table.sql, columns, [(62, "Int8"), (63, "Bool"), (64, "IPv4")])
            reasons = engine.text(f"SELECT * FROM {checked.table.sql} ORDER BY 1", "TSV")
            good = checked.good_select(columns, _row_only, count_missing=count_missing)
            loaded = engine.text(f"SELECT * FROM ({good}) ORDER BY _source_row", "TSV")
            return reasons + "\n" + loaded
        finally:
            checked.drop(engine)

    narrow, wide_way = _both_ways(monkeypatch, check)
    assert "does not fit" in narrow and "; column" in narrow and "appears twice" in narrow
    assert wide_way == narrow


WIDE = 4_000
"""Past what a column at a time could check in minutes (2,000 columns: 79 CPU seconds for CSV,
112 for JSON lines). At 10,000 columns, measured once: CSV 50-74 CPU seconds, JSON lines 137
(careful) and 150 (skipping pass); kept at 4,000 here for the suite's time."""
ROWS = 300
TYPES = ["Int32", "Float64", "UInt64", "String", "Int64", "Nullable(Int16)", "Float32", "UInt8", "Int32", "Date"]


def _type(j: int) -> str:
    return TYPES[j % len(TYPES)]


def _good(j: int, r: int) -> str:
    t = _type(j)
    if t == "Float64" or t == "Float32":
        return f"{r}.5"
    if t == "Date":
        return f"2024-01-{r % 28 + 1:02d}"
    if t == "String":
        return f"s{r}_{j}"
    return str((r + j) % 100)


def _last(prefix: str, back: int = 0) -> int:
    """A column of type `prefix` near the end (the careful pass finds the bad value far in)."""
    return [j for j in range(WIDE) if _type(j) == prefix][-1 - back]


BAD: dict[int, list[tuple[int, str]]] = {
    7: [(_last("Int32"), "abc")],
    40: [(_last("Float64"), "x1.5")],
    90: [(_last("Date", 5), "2024-02-30")],
    120: [(_last("UInt64", 3), "-5")],
    150: [(_last("UInt8", 10), "300"), (_last("Int32", 1), "1.5")],
}
RAGGED = 60
"""A CSV row with fields too few; a JSON-lines file's line that is no JSON."""


def _reason(r: int, every: bool) -> str:
    """A CSV record's reason names its first bad value; a JSON record's, every one ('; ')."""
    bad = [f"column c_{j}: {text} does not fit {_type(j)}" for j, text in sorted(BAD[r])]
    return "; ".join(bad) if every else bad[0]


def _make_table(target: str, provenance: bool = True) -> None:
    columns = ", ".join(f"c_{j} {_type(j)}" for j in range(WIDE))
    extra = "".join(f", {name} {type_sql}" for name, type_sql in PROVENANCE_COLUMNS) if provenance else ""
    open_engine(target).execute(f"CREATE TABLE t ({columns}{extra}) ENGINE = MergeTree ORDER BY tuple()")


def _dirty_rows() -> list[list[str]]:
    rows = []
    for r in range(1, ROWS + 1):
        row = [_good(j, r) for j in range(WIDE)]
        for j, text in BAD.get(r, []):
            row[j] = text
        rows.append(row)
    return rows


def _loaded(
    target: str, report: chute.LoadReport, cpu: float, provenance: bool = True, json_lines: bool = False
) -> None:
    """`cpu`: the load's CPU seconds (see WIDE). At 10,000 columns: 74 for the CSV, 137 (careful) and 150 (skipping) for
    JSON lines, most of it the fast path's tries before these passes."""
    assert report.ok, [f.error for f in report.files]
    bad = len(BAD) + 1
    assert (report.rows_loaded, report.rows_rejected) == (ROWS - bad, bad)
    engine = open_engine(target)
    first, last = "c_0", f"c_{_last('Int32')}"
    good = [r for r in range(1, ROWS + 1) if r not in BAD and r != RAGGED]
    found = engine.rows(f"SELECT count() AS n, sum({first}) AS a FROM t")[0]
    assert (int(found["n"]), int(found["a"])) == (len(good), sum(r % 100 for r in good))
    if provenance:
        rows = engine.rows("SELECT groupArray(_source_row) AS rows FROM t")[0]["rows"]
        assert sorted(int(x) for x in rows) == good
    assert int(engine.rows(f"SELECT sum({last}) AS s FROM t")[0]["s"]) == sum((r + _last("Int32")) % 100 for r in good)
    rejects = engine.rows("SELECT _source_row AS row, error FROM t_rejects ORDER BY row")
    reasons = {int(x["row"]): str(x["error"]) for x in rejects}
    assert sorted(reasons) == sorted([*BAD, RAGGED])
    assert {r: reasons[r] for r in BAD} == {r: _reason(r, json_lines) for r in BAD}
    assert cpu < (150 if json_lines else 90), f"{cpu:.0f} CPU seconds"


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


@pytest.mark.slow
def test_a_4_000_column_csv_with_bad_rows_loads_its_good_rows(tmp_path: Path, target: str) -> None:
    """Bad integers, floats and dates far into the row, and a ragged row: every good row loaded,
    every bad one in the rejects with the reason a narrow file's would have. (Before: the whole
    file failed `TOO_BIG_AST`.) About 50 CPU seconds, most of it the fast path's failed try."""
    path = tmp_path / "wide.csv"
    with open(path, "w") as out:
        out.write(",".join(f"c_{j}" for j in range(WIDE)) + "\n")
        for r, row in enumerate(_dirty_rows(), start=1):
            out.write(",".join(row[:-3] if r == RAGGED else row) + "\n")
    _make_table(target)
    before = _cpu()
    report = chute.load([str(path)], table="t", target=target)
    _loaded(target, report, _cpu() - before)
    assert (
        "malformed record"
        in open_engine(target).rows(f"SELECT error FROM t_rejects WHERE _source_row = {RAGGED}")[0]["error"]
    )


@pytest.mark.slow
def test_a_4_000_key_json_lines_file_with_bad_rows_loads_its_good_rows(tmp_path: Path, target: str) -> None:
    """The same in JSON lines, through the careful pass (a table without provenance). The pass
    that skips bad records gives the same rows and reasons a type at a time as a column at a
    time (the equivalence tests above); at 10,000 keys it took 150 CPU seconds, measured once,
    and is left out of the suite for its time."""
    provenance = False
    path = tmp_path / "wide.jsonl"
    with open(path, "w") as out:
        for r, row in enumerate(_dirty_rows(), start=1):
            if r == RAGGED:
                out.write("{not json\n")
                continue
            record = {}
            for j, text in enumerate(row):
                plain = _type(j) not in ("String", "Date") and all(text != t for _, t in BAD.get(r, []))
                record[f"c_{j}"] = json.loads(text) if plain else text
            out.write(json.dumps(record) + "\n")
    _make_table(target, provenance)
    before = _cpu()
    report = chute.load([str(path)], table="t", target=target)
    _loaded(target, report, _cpu() - before, provenance, json_lines=True)
