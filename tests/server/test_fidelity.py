"""Every row and every value honest (issue #25): files that are odd in one way or another
load what they hold, or fail alone with a one-line reason; checked on both targets."""

from __future__ import annotations

import datetime
import json
import os
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import chute
from chute.design import design_sources
from chute.engine import open_engine
from chute.errors import SourceError

from ..harness.data import write_with_engine
from ..harness.servers import server_query

PROVENANCE = ("_source", "_source_mtime", "_source_row", "_load_id")


@pytest.fixture(params=["embedded", "server"])
def dest(request: pytest.FixtureRequest, target: str) -> str:
    """The load's target: the embedded directory, or a fresh database on the 18.16 server."""
    if request.param == "server":
        return str(request.getfixturevalue("server_url"))
    return target


def rows(dest: str, sql: str) -> list[list[str]]:
    """The result of `sql` on the target, as TSV fields."""
    remote = "://" in dest
    text = server_query(dest, sql + " FORMAT TSVRaw") if remote else open_engine(dest).text(sql, "TSVRaw")
    return [line.split("\t") for line in text.splitlines() if line]


def columns(dest: str, table: str = "t") -> list[tuple[str, str]]:
    found = rows(
        dest,
        f"SELECT name, type FROM system.columns WHERE database = currentDatabase() AND table = '{table}'",
    )
    return [(name, type_) for name, type_ in found if name not in PROVENANCE]


def outcome(report: chute.LoadReport) -> dict[str, tuple[str, int]]:
    return {os.path.basename(f.source): (f.state, f.rows_loaded) for f in report.files}


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_a_header_field_the_table_lacks_is_an_error_not_a_dropped_column(tmp_path: Path, dest: str, fmt: str) -> None:
    """A header naming table columns and one more: the engine read it by name and dropped the
    extra column's values, exit 0. Now the file fails naming the field, as a JSON one does;
    with --add-columns the column is added and its values load."""
    sep = "," if fmt == "csv" else "\t"
    first, extra = tmp_path / f"first.{fmt}", tmp_path / f"extra.{fmt}"
    first.write_text(f"id{sep}val\n1{sep}a\n")
    extra.write_text(f"val{sep}id{sep}extra\nb{sep}2{sep}9\nc{sep}3{sep}10\n")
    assert chute.load([str(first)], table="t", target=dest).ok
    report = chute.load([str(extra)], table="t", target=dest)
    assert outcome(report) == {f"extra.{fmt}": ("failed", 0)}
    assert "input fields not in table t: extra (use --add-columns" in report.files[0].error
    added = chute.load([str(extra)], table="t", target=dest, options=chute.LoadOptions(add_columns=True))
    assert added.ok and added.rows_loaded == 2, [f.error for f in added.files]
    got = rows(dest, "SELECT id, val, extra FROM t ORDER BY id")
    assert got == [["1", "a", "0"], ["2", "b", "9"], ["3", "c", "10"]]


@pytest.mark.parametrize("engine", ["Log", "Memory"])
def test_a_table_chute_cannot_stage_or_repair_is_refused_in_one_line(tmp_path: Path, dest: str, engine: str) -> None:
    """Into a Log or Memory table the report said 0 rows loaded while the rows were in, and after
    a kill every re-run failed ("Mutations are not supported by storage Log"). Such a table is
    refused before anything is written, saying why and what to load into instead."""
    create = f"CREATE TABLE t (id UInt32, v String) ENGINE = {engine}"
    server_query(dest, create) if "://" in dest else open_engine(dest).execute(create)
    (tmp_path / "a.csv").write_text("id,v\n1,a\n2,b\n")
    with pytest.raises(chute.UsageError) as caught:
        chute.load([str(tmp_path / "a.csv")], table="t", target=dest)
    assert f"table t is a {engine} table" in str(caught.value) and "MergeTree" in str(caught.value)
    assert rows(dest, "SELECT count() FROM t") == [["0"]]


def test_an_18_16_table_with_low_cardinality_columns_loads(tmp_path: Path, server_url: str) -> None:
    """18.16 refuses to make a stage like such a table unless the query allows the (then
    experimental) type: every file failed with "[44] ... LowCardinality type is not allowed"."""
    base, database = server_url.rsplit("/", 1)
    create = (
        "CREATE TABLE t (id UInt32, v LowCardinality(String), _source String, _source_mtime DateTime, "
        "_source_row UInt64, _load_id String) ENGINE = MergeTree ORDER BY id"
    )
    params = urllib.parse.urlencode({"database": database, "allow_experimental_low_cardinality_type": 1})
    urllib.request.urlopen(urllib.request.Request(f"{base}/?{params}", data=create.encode()), timeout=60).read()
    (tmp_path / "a.csv").write_text("id,v\n1,a\n2,b\n3,a\n")
    (tmp_path / "b.json").write_text('{"id": 4, "v": "c"}\n')
    for method in ("client-convert", "server-parse"):
        report = chute.load([str(tmp_path)], table="t", target=server_url, options=chute.LoadOptions(method=method))
        assert report.ok, [f.error for f in report.files]
        server_query(server_url, "TRUNCATE TABLE t")
        server_query(server_url, "TRUNCATE TABLE _chute_ledger")
    report = chute.load([str(tmp_path)], table="t", target=server_url)
    assert report.ok and report.rows_loaded == 4
    assert rows(server_url, "SELECT id, v FROM t ORDER BY id") == [["1", "a"], ["2", "b"], ["3", "a"], ["4", "c"]]


def test_a_bz2_file_fails_alone_saying_why(tmp_path: Path, dest: str) -> None:
    import bz2

    (tmp_path / "a.csv.bz2").write_bytes(bz2.compress(b"id,v\n1,a\n"))
    (tmp_path / "b.csv").write_text("id,v\n2,b\n")
    report = chute.load([str(tmp_path)], table="t", target=dest)
    assert outcome(report) == {"a.csv.bz2": ("failed", 0), "b.csv": ("loaded", 1)}
    assert "no bzip2 reader" in next(f.error for f in report.files if f.state == "failed")


def test_a_dropped_table_is_filled_again_and_a_truncated_one_is_told(tmp_path: Path, dest: str) -> None:
    """After DROP TABLE the same load skipped every file (the ledger said done), exit 0, and the
    table was not even made again. Now the units of a table that is not there load again. An
    emptied table (TRUNCATE, or TTL) is not refilled unasked: a note says how."""
    sql = (lambda q: server_query(dest, q)) if "://" in dest else (lambda q: open_engine(dest).execute(q))
    (tmp_path / "a.csv").write_text("id,v\n1,a\n2,b\n")
    (tmp_path / "b.csv").write_text("id,v\n3,c\n")
    assert chute.load([str(tmp_path)], table="t", target=dest).rows_loaded == 3
    sql("DROP TABLE t")
    again = chute.load([str(tmp_path)], table="t", target=dest)
    assert again.ok and again.rows_loaded == 3 and any("was not there" in n for n in again.notes), again.notes
    assert rows(dest, "SELECT count(), uniqExact(_source, _source_row) FROM t") == [["3", "3"]]
    assert chute.load([str(tmp_path)], table="t", target=dest).rows_loaded == 0
    sql("TRUNCATE TABLE t")
    told = chute.load([str(tmp_path)], table="t", target=dest)
    assert told.ok and told.rows_loaded == 0 and any("holds no rows" in n for n in told.notes), told.notes
    assert any(f"chute forget {tmp_path / 'a.csv'} {tmp_path / 'b.csv'} --table t" in n for n in told.notes)
    assert chute.forget(str(tmp_path), table="t", target=dest).files == [str(tmp_path / n) for n in ("a.csv", "b.csv")]
    refilled = chute.load([str(tmp_path)], table="t", target=dest)
    assert refilled.rows_loaded == 3 and rows(dest, "SELECT count() FROM t") == [["3"]]


def test_an_all_text_csv_says_its_first_line_loads_as_a_row(tmp_path: Path, dest: str) -> None:
    """Every column text: a header cannot be told from the rows by type. Guessing could drop a
    real row, so the first line loads as a row, and the report says so and how to name them."""
    (tmp_path / "people.csv").write_text("name,city\nalice,paris\nbob,rome\n")
    report = chute.load([str(tmp_path / "people.csv")], table="p", target=dest)
    assert report.ok and report.rows_loaded == 3
    assert any("no header line could be told" in n for n in report.notes), report.notes
    create = "CREATE TABLE q (name String, city String) ENGINE = MergeTree ORDER BY tuple()"
    server_query(dest, create) if "://" in dest else open_engine(dest).execute(create)
    named = chute.load([str(tmp_path / "people.csv")], table="q", target=dest)
    assert named.ok and named.rows_loaded == 2 and not any("no header" in n for n in named.notes)


def test_a_csv_with_a_utf8_bom_makes_its_table(tmp_path: Path, dest: str) -> None:
    """Excel's "CSV UTF-8" starts with a BOM: the engine kept it in the first inferred name and then
    failed on the header line, so no table could be made (a long engine message)."""
    (tmp_path / "excel.csv").write_bytes(b"\xef\xbb\xbfid,val\n1,a\n2,b\n")
    report = chute.load([str(tmp_path / "excel.csv")], table="t", target=dest)
    assert report.ok and report.rows_loaded == 2, [f.error for f in report.files]
    assert columns(dest) == [("id", "Int64"), ("val", "String")] or [n for n, _ in columns(dest)] == ["id", "val"]
    assert rows(dest, "SELECT id, val, _source_row FROM t ORDER BY id") == [["1", "a", "1"], ["2", "b", "2"]]


# -- 1. text that is not UTF-8, files that are not text -----------------------------------


@pytest.mark.parametrize("compression", ["zst", "lz4"])
def test_a_zstd_or_lz4_file_cut_short_fails_alone_and_loads_once_whole(
    tmp_path: Path, dest: str, compression: str
) -> None:
    """The engine's zstd and LZ4 readers stopped quietly at the cut: half the rows loaded, exit 0,
    and the ledger said done. The frames are walked first now: the file fails, naming why."""
    import lz4.frame
    import zstandard

    pack = zstandard.ZstdCompressor().compress if compression == "zst" else lz4.frame.compress
    data = tmp_path / "in"
    data.mkdir()
    cut = pack(b"id,val\n" + b"".join(b"%d,v%d\n" % (i, i) for i in range(1, 100_001)))
    (data / f"cut.csv.{compression}").write_bytes(cut[: len(cut) // 2])
    (data / f"whole.csv.{compression}").write_bytes(pack(b"id,val\n1,a\n2,b\n"))
    report = chute.load([str(data)], table="t", target=dest)
    assert not report.ok
    assert outcome(report) == {f"cut.csv.{compression}": ("failed", 0), f"whole.csv.{compression}": ("loaded", 2)}
    error = next(f.error for f in report.files if f.state == "failed")
    assert "cut short" in error and "\n" not in error, error
    assert rows(dest, "SELECT count() FROM t") == [["2"]]
    (data / f"cut.csv.{compression}").write_bytes(cut)
    again = chute.load([str(data)], table="t", target=dest)
    assert again.ok and again.rows_loaded == 100_000
    assert rows(dest, "SELECT count(), uniqExact(id) FROM t") == [["100002", "100000"]]


def test_csv_not_utf8_loads_its_bytes(tmp_path: Path, dest: str) -> None:
    data = {"a.csv": b"3,caf\xe9\n4,ok\n", "b.csv": b"1,x\n2,y\n"}
    for name, content in data.items():
        (tmp_path / name).write_bytes(content)
    report = chute.load([str(tmp_path)], table="t", target=dest)
    assert report.ok, report.files
    expected = sorted(
        [f.split(b",")[0].decode(), f.split(b",")[1].hex().upper()]
        for content in data.values()
        for f in content.splitlines()
    )
    assert sorted(rows(dest, "SELECT toString(c1), hex(c2) FROM t")) == expected


def test_binary_files_named_as_text_fail_alone(tmp_path: Path, dest: str, engine) -> None:  # type: ignore[no-untyped-def]
    for sub, ext, good in (("csv", "csv", "1,x\n2,y\n"), ("json", "jsonl", '{"c1":1,"c2":"x"}\n{"c1":2,"c2":"y"}\n')):
        (tmp_path / sub).mkdir()
        write_with_engine(engine, tmp_path / sub / f"p.{ext}", "Parquet", "SELECT number AS c1 FROM numbers(5)")
        (tmp_path / sub / f"b.{ext}").write_text(good)
        (tmp_path / sub / f"z.{ext}").write_bytes(b"\x1f\x8b\x08\x00compressed, not named .gz")
    engine.close()
    for sub in ("csv", "json"):
        report = chute.load([str(tmp_path / sub)], table=f"t_{sub}", target=dest)
        by_name = {os.path.basename(f.source): f for f in report.files}
        ext = "csv" if sub == "csv" else "jsonl"
        assert (by_name[f"b.{ext}"].state, by_name[f"b.{ext}"].rows_loaded) == ("loaded", 2)
        for bad, kind in ((f"p.{ext}", "Parquet"), (f"z.{ext}", "gzip")):
            assert by_name[bad].state == "failed", by_name[bad]
            assert kind in by_name[bad].error and "\n" not in by_name[bad].error
        assert rows(dest, f"SELECT count() FROM t_{sub}") == [["2"]]


# -- 2. one file, one identity ---------------------------------------------------------------


def test_same_file_through_a_symlink_loads_once(tmp_path: Path, dest: str) -> None:
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "sub" / "a.jsonl").write_text('{"x": 1}\n{"x": 2}\n')
    (tmp_path / "link").symlink_to(tmp_path / "d")
    assert chute.load([str(tmp_path / "d" / "sub" / "a.jsonl")], table="t", target=dest).rows_loaded == 2
    again = chute.load([str(tmp_path / "link" / "sub" / "a.jsonl")], table="t", target=dest)
    assert again.ok and again.rows_loaded == 0 and again.files_skipped == 1
    # A hard link is the same file too (same device and inode): once per run.
    os.link(tmp_path / "d" / "sub" / "a.jsonl", tmp_path / "d" / "hard.jsonl")
    both = chute.load([str(tmp_path / "d")], table="u", target=dest)
    assert both.rows_loaded == 2 and any("same file" in n for n in both.notes)
    assert rows(dest, "SELECT count(), sum(x) FROM t") == [["2", "3"]]
    assert rows(dest, "SELECT count(), sum(x) FROM u") == [["2", "3"]]


def test_files_loaded_by_their_unresolved_path_stay_loaded(
    tmp_path: Path, dest: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ledger rows written before paths were resolved keep naming their files: no second copy."""
    import chute.sources.files

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.jsonl").write_text('{"x": 1}\n')
    (tmp_path / "link").symlink_to(tmp_path / "d")
    with monkeypatch.context() as m:  # as chute did before: the path as given
        m.setattr(chute.sources.files.os.path, "realpath", os.path.abspath)
        assert chute.load([str(tmp_path / "link")], table="t", target=dest).rows_loaded == 1
    again = chute.load([str(tmp_path / "link")], table="t", target=dest)
    assert again.rows_loaded == 0 and again.files_skipped == 1
    assert rows(dest, "SELECT _source, count() FROM t GROUP BY _source") == [[str(tmp_path / "link" / "a.jsonl"), "1"]]


# -- 3. header-only CSV, glob characters in names ------------------------------------------


def test_header_only_csv_makes_the_columns_and_no_rows(tmp_path: Path, dest: str) -> None:
    (tmp_path / "h.csv").write_text("id,name\n")
    report = chute.load([str(tmp_path / "h.csv")], table="t", target=dest)
    assert report.ok and report.rows_loaded == 0
    assert [n for n, _ in columns(dest)] == ["id", "name"]
    assert any("column names" in n for n in report.notes)
    assert rows(dest, "SELECT count() FROM t") == [["0"]]
    # Then a file with data goes into those columns.
    (tmp_path / "d.csv").write_text("id,name\n7,x\n")
    assert chute.load([str(tmp_path / "d.csv")], table="t", target=dest).rows_loaded == 1
    assert rows(dest, "SELECT id, name FROM t") == [["7", "x"]]


def test_file_names_with_glob_characters_load(tmp_path: Path, dest: str) -> None:
    names = ["a[1].csv", "b*x?.csv", "c{d,e}.csv", 'it\'s `q` "ok".csv', "plain.csv"]
    for i, name in enumerate(names):
        (tmp_path / name).write_text(f"id,name\n{i},n{i}\n")
    (tmp_path / "bad[2].csv").write_text("id,name\nnot a number,x\n9,n9\n")
    report = chute.load([str(tmp_path)], table="t", target=dest)
    assert all(f.state == "loaded" for f in report.files), report.files
    expected = sorted([str(tmp_path / n), str(i), f"n{i}", "1"] for i, n in enumerate(names))
    expected.append([str(tmp_path / "bad[2].csv"), "9", "n9", "2"])
    got = rows(dest, "SELECT _source, id, name, _source_row FROM t ORDER BY _source")
    assert sorted(got) == sorted(expected)
    assert outcome(report)["bad[2].csv"] == ("loaded", 1)


def test_json_lines_numbered_by_line_with_blank_lines(tmp_path: Path, dest: str) -> None:
    lines = ['{"id": 1}', "", '{"id": 2}', "  ", '{"id": "x"}', '{"id": 4}', "", '{"id": 5}']
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "first.jsonl").write_text('{"id": 0}\n')  # makes the table: id Int64
    assert chute.load([str(tmp_path / "first.jsonl")], table="t", target=dest).ok
    report = chute.load([str(tmp_path / "a.jsonl")], table="t", target=dest)
    assert report.rows_loaded == 4 and report.rows_rejected == 1
    good = [[str(json.loads(t)["id"]), str(n)] for n, t in enumerate(lines, 1) if t.strip() and '"x"' not in t]
    assert rows(dest, "SELECT id, _source_row FROM t WHERE id > 0 ORDER BY id") == good
    bad = [str(n) for n, t in enumerate(lines, 1) if '"x"' in t]
    assert rows(dest, "SELECT _source_row, raw FROM t_rejects") == [[bad[0], lines[4]]]


# -- 4. delimiters ---------------------------------------------------------------------------


@pytest.mark.parametrize("delimiter", [";", "|", "\t"])
def test_delimiter_found_in_the_first_lines(tmp_path: Path, dest: str, delimiter: str) -> None:
    table = [["id", "name", "amount"], ["1", "x,y", "2.5"], ["2", '"q;r"', "3"]]
    (tmp_path / "a.csv").write_text("\n".join(delimiter.join(r) for r in table) + "\n")
    if delimiter == "\t":  # the engine reads no CSV with tabs: say how to load it
        with pytest.raises(SourceError, match="--format tsv"):
            chute.load([str(tmp_path / "a.csv")], table="t", target=dest)
        return
    report = chute.load([str(tmp_path / "a.csv")], table="t", target=dest)
    assert report.ok and report.rows_loaded == 2
    assert [n for n, _ in columns(dest)] == table[0]
    got = rows(dest, "SELECT toString(id), name, toString(amount) FROM t ORDER BY id")
    assert got == [["1", "x,y", "2.5"], ["2", "q;r", "3"]]
    assert any(repr(delimiter) in n for n in report.notes)


def test_commas_stay_and_an_odd_file_fails_alone(tmp_path: Path, dest: str) -> None:
    (tmp_path / "a.csv").write_text('id,note\n1,"a;b;c"\n2,"d;e;f"\n')
    (tmp_path / "b.csv").write_text("id;note\n3;g\n")
    report = chute.load([str(tmp_path)], table="t", target=dest)
    assert outcome(report)["a.csv"] == ("loaded", 2)
    assert outcome(report)["b.csv"][0] == "failed"
    assert "';'" in next(f.error for f in report.files if f.source.endswith("b.csv"))
    assert rows(dest, "SELECT id, note FROM t ORDER BY id") == [["1", "a;b;c"], ["2", "d;e;f"]]
    # --delimiter overrides what the first lines show.
    forced = chute.load([str(tmp_path / "b.csv")], table="u", target=dest, options=chute.LoadOptions(delimiter=","))
    assert forced.ok and [n for n, _ in columns(dest, "u")] == ["c1"]


def test_design_finds_the_delimiter(tmp_path: Path, target: str) -> None:
    (tmp_path / "a.csv").write_text("id;name\n" + "".join(f"{i};n{i}\n" for i in range(50)))
    proposal = design_sources([str(tmp_path / "a.csv")], "t", target=target, time_budget_s=20)
    assert "`id` UInt8" in proposal.ddl and "`name`" in proposal.ddl and "c1" not in proposal.ddl
    assert any("';'" in n for n in proposal.notes)
    # load --design auto measures with the delimiter found too
    report = chute.load([str(tmp_path / "a.csv")], table="t", target=target, options=chute.LoadOptions(design="auto"))
    assert report.ok and report.rows_loaded == 50
    assert [n for n, _ in columns(target)] == ["id", "name"]
    assert rows(target, "SELECT sum(id), countIf(name = concat('n', toString(id))) FROM t") == [["1225", "50"]]


# -- 5. types an old server lacks ----------------------------------------------------------


def test_nested_json_into_the_18_16_server(tmp_path: Path, server_url: str) -> None:
    records = [
        {"id": 1, "o": {"qty": 2, "sku": "a"}, "arr": [{"qty": 1, "sku": "b"}, {"qty": 3, "sku": "c"}]},
        {"id": 2, "o": {"qty": 5, "sku": "d'x"}, "arr": []},
    ]
    (tmp_path / "n.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    expected = [[str(r["id"]), str(r["o"]["qty"]), r["o"]["sku"]] for r in records]  # type: ignore[index]
    report = chute.load([str(tmp_path / "n.jsonl")], table="t", target=server_url)
    assert report.ok, report.files
    assert report.rows_loaded == 2
    assert any("column arr" in n and "String" in n for n in report.notes)
    types = dict(columns(server_url))
    assert "Tuple" not in types["arr"]
    assert rows(server_url, "SELECT id, tupleElement(o, 1), tupleElement(o, 2) FROM t ORDER BY id") == expected
    arrays = [json.loads(a) for [a] in rows(server_url, "SELECT arr FROM t ORDER BY id")]
    assert arrays == [r["arr"] for r in records]


def test_parquet_list_of_structs_into_the_18_16_server(tmp_path: Path, server_url: str, engine) -> None:  # type: ignore[no-untyped-def]
    """18.16 has no Tuple inside Array: chute makes `l String` and `m String`; the engine's
    Parquet reader refused a list<struct> as String ([53] TYPE_MISMATCH) and the file failed.
    Now each value is its JSON text, in the new table and in a later load into it."""
    select = (
        "SELECT number + {o} AS id, [CAST((number, concat('x\"', toString(number))), 'Tuple(a Int64, b String)'), "
        "CAST((7, ''), 'Tuple(a Int64, b String)')] AS l, map('k', number) AS m FROM numbers(3)"
    )
    notes = []
    for name, offset in (("a", 0), ("b", 10)):
        write_with_engine(engine, tmp_path / f"{name}.parquet", "Parquet", select.format(o=offset))
        report = chute.load([str(tmp_path / f"{name}.parquet")], table="t", target=server_url)
        assert report.ok and report.rows_loaded == 3, report.files
        notes += report.notes
    assert any(n.startswith("column l: Array(Tuple(") and "JSON text" in n for n in notes)
    assert dict(columns(server_url))["l"] == "String"
    got = rows(server_url, "SELECT id, l, m FROM t ORDER BY id")
    expected = [[o + n, [{"a": n, "b": f'x"{n}'}, {"a": 7, "b": ""}], {"k": n}] for o in (0, 10) for n in range(3)]
    assert [[int(i), json.loads(lst), json.loads(m)] for i, lst, m in got] == expected


DATES = ("1970-01-01", "2020-02-29", "2149-06-06")


def test_parquet_dates_into_the_18_16_server(tmp_path: Path, server_url: str, engine) -> None:  # type: ignore[no-untyped-def]
    dates = "[" + ", ".join(f"'{d}'" for d in DATES) + "]"
    write_with_engine(
        engine,
        tmp_path / "a.parquet",
        "Parquet",
        f"SELECT number AS id, toDate32({dates}[number + 1]) AS d FROM numbers(3)",
    )
    (tmp_path / "late").mkdir()
    write_with_engine(
        engine,
        tmp_path / "late" / "b.parquet",
        "Parquet",
        "SELECT number AS id, toDate32(['2020-01-01', '1969-12-31', '2200-01-01'][number + 1]) AS d FROM numbers(3)",
    )
    assert [r["type"] for r in engine.rows(f"DESCRIBE file('{tmp_path}/a.parquet')")] == ["UInt64", "Date32"]
    engine.close()
    report = chute.load([str(tmp_path / "a.parquet")], table="t", target=server_url)
    assert report.ok, report.files
    assert dict(columns(server_url))["d"] == "Date"
    assert any("Date32" in n for n in report.notes)
    # Day numbers: 18.16 stores 2149-06-06 (day 65535) but prints dates past 2105 wrong.
    days = [(datetime.date.fromisoformat(d) - datetime.date(1970, 1, 1)).days for d in DATES]
    assert rows(server_url, "SELECT id, toUInt16(d) FROM t ORDER BY id") == [
        [str(i), str(n)] for i, n in enumerate(days)
    ]
    late = chute.load([str(tmp_path / "late" / "b.parquet")], table="t", target=server_url)
    # Dates the column cannot hold are rejected rows, never clamped; the date that fits loads.
    assert late.ok and (late.rows_loaded, late.rows_rejected) == (1, 2), late.files
    assert rows(server_url, "SELECT count() FROM t") == [["4"]]
    assert rows(server_url, "SELECT _source_row, error FROM t_rejects ORDER BY _source_row") == [
        ["2", "column d: 1969-12-31 does not fit Date"],
        ["3", "column d: 2200-01-01 does not fit Date"],
    ]


def test_times_with_fractions_into_the_18_16_server(tmp_path: Path, server_url: str, engine) -> None:  # type: ignore[no-untyped-def]
    """18.16 has no DateTime64: a column chute creates for times with a fraction of a second
    (JSON text, Parquet timestamps) holds each time exactly, as text; DateTime would drop the
    fraction without a word."""
    times = ["2024-01-31 23:59:59.250", "1969-07-20 20:17:40.000", "2024-02-29 00:00:00.999"]
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "a.jsonl").write_text("".join(json.dumps({"id": i, "ts": t}) + "\n" for i, t in enumerate(times)))
    listed = "[" + ", ".join(f"'{t}'" for t in times) + "]"
    write_with_engine(
        engine,
        tmp_path / "a.parquet",
        "Parquet",
        f"SELECT number AS id, toDateTime64({listed}[number + 1], 3, 'UTC') AS ts FROM numbers(3)",
    )
    engine.close()
    for source, table in ((tmp_path / "j" / "a.jsonl", "t"), (tmp_path / "a.parquet", "p")):
        report = chute.load([str(source)], table=table, target=server_url)
        assert report.ok and report.rows_loaded == 3, report.files
        assert dict(columns(server_url, table))["ts"] in ("String", "Nullable(String)")
        assert any("no DateTime64" in n for n in report.notes), report.notes
        got = rows(server_url, f"SELECT id, ts FROM {table} ORDER BY id")
        assert [r[0] for r in got] == ["0", "1", "2"]
        # The same instants, fraction and all (JSON keeps its text; Parquet's time prints in full).
        assert [r[1][:23] for r in got] == times, got


# -- 6. Parquet nullability ------------------------------------------------------------------


def test_parquet_required_columns_are_not_nullable(tmp_path: Path, dest: str) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("xs", pa.list_(pa.field("item", pa.int32(), nullable=False)), nullable=False),
            pa.field("s", pa.string()),
        ]
    )
    data = {"id": [1, 2, 3], "xs": [[1, 2], [3], []], "s": ["a", None, "c"]}
    pq.write_table(pa.table(data, schema=schema), tmp_path / "r.parquet")
    report = chute.load([str(tmp_path / "r.parquet")], table="t", target=dest)
    assert report.ok, report.files
    assert columns(dest) == [("id", "Int64"), ("xs", "Array(Int32)"), ("s", "Nullable(String)")]
    expected = [[str(i), str(sum(x)), s or "(null)"] for i, x, s in zip(*data.values(), strict=True)]
    assert rows(dest, "SELECT id, arraySum(xs), ifNull(s, '(null)') FROM t ORDER BY id") == expected


# -- the sniffer alone ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("a,b,c\n1,2,3\n", ","),
        ("a;b\n1;2,5\n3;4,75\n", ";"),  # decimal commas: ';' splits every line alike
        ('id,note\n1,"x;y"\n2,"p;q;r"\n', ","),  # semicolons inside quotes do not count
        ('id|note\n1|"two\nlines"\n2|x\n', "|"),  # a quoted field over two lines is one record
        ("a\tb\n1\t2\n", "\t"),
        ("just one column\nvalue\n", None),
        ("a,b\n1,2,3\n", None),  # ragged: nothing splits alike
    ],
)
def test_sniffed_delimiter(text: str, expected: str | None) -> None:
    from chute.sniff import Head

    assert Head([line.encode() for line in text.splitlines()]).delimiter() == expected


def test_not_text_and_header_only() -> None:
    from chute.sniff import Head

    assert Head([b"PAR1\x15\x04"]).not_text() == "a Parquet file"
    assert Head(["a,b".encode("utf-16-le")]).not_text() is not None
    assert Head([b"3,caf\xe9"]).not_text() is None
    assert Head([b"id,name"]).names_only(",") == ["id", "name"]
    assert Head([b'"id" , "name"', b""]).names_only(",") == ["id", "name"]
    assert Head([b"1,2"]).names_only(",") is None  # numbers are data
    assert Head([b"2026-01-01,x"]).names_only(",") is None
    assert Head([b"a,a"]).names_only(",") is None  # names are distinct
    assert Head([b"id,name", b"1,x"]).names_only(",") is None
