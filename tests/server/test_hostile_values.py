"""Values and faults a demanding user brings to an 18.16 server: each test holds a defect found
by trying chute so, with the table, the rejects and the report's counts checked."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

import chute

from ..harness.servers import server_query


@pytest.mark.parametrize("method", ["auto", "client-convert"])
def test_a_number_past_float64s_range_into_float32_is_a_rejected_row(
    tmp_path: Path, server_url: str, method: str
) -> None:
    """`1e400` parses as inf in Float32 and in Float64 alike: comparing the two readings let it
    load as inf; only the text of an infinity is one."""
    path = tmp_path / "f.jsonl"
    path.write_text(
        '{"id":1,"f":1e400}\n{"id":2,"f":1e39}\n{"id":3,"f":1.5}\n{"id":4,"f":-1e400}\n{"id":5,"f":"-inf"}\n'
    )
    server_query(server_url, "CREATE TABLE t (id UInt8, f Float32) ENGINE = MergeTree ORDER BY id")
    report = chute.load([str(path)], table="t", target=server_url, options=chute.LoadOptions(method=method))
    assert report.ok and (report.rows_read, report.rows_loaded, report.rows_rejected) == (5, 2, 3), report.files
    assert server_query(server_url, "SELECT id, f FROM t ORDER BY id FORMAT TSV") == "3\t1.5\n5\t-inf\n"
    rejects = server_query(server_url, "SELECT _source_row, error FROM t_rejects ORDER BY _source_row FORMAT TSV")
    assert rejects.splitlines() == [
        "1\tcolumn f: 1e400 does not fit Float32",
        "2\tcolumn f: 1e39 does not fit Float32",
        "4\tcolumn f: -1e400 does not fit Float32",
    ]


@pytest.mark.parametrize("method", ["auto", "server-parse"])
def test_a_csv_quote_that_runs_into_the_last_field_of_a_later_line_loses_no_line(
    tmp_path: Path, server_url: str, method: str
) -> None:
    """An opening quote on line 2 closed by the quote on line 4 made one bad record of lines 2-4
    (the engine: "There is no line feed"); its first line was the rejected row and lines 3 and 4
    were neither loaded nor rejected, nor counted. Line by line, each is loaded or rejected."""
    path = tmp_path / "q.csv"
    path.write_text('id,v\n1,"abc\n2,def\n3,"x"y\n4,ok\n')
    server_query(
        server_url,
        "CREATE TABLE t (id UInt8, v String, _source String, _source_mtime DateTime, _source_row UInt64, "
        "_load_id String) ENGINE = MergeTree ORDER BY id",
    )
    report = chute.load(
        [str(path)], table="t", target=server_url, options=chute.LoadOptions(method=method, header=True)
    )
    assert report.ok and (report.rows_read, report.rows_loaded, report.rows_rejected) == (4, 2, 2), report.files
    loaded = server_query(server_url, "SELECT id, v, _source_row FROM t ORDER BY id FORMAT TSV")
    assert loaded == "2\tdef\t2\n4\tok\t4\n"
    rejects = server_query(server_url, "SELECT _source_row, raw FROM t_rejects ORDER BY _source_row FORMAT TSV")
    assert rejects.splitlines() == ['1\t1,"abc', '3\t3,"x"y']


def test_server_parse_of_a_gzip_file_cut_short_does_not_say_it_is_too_big(tmp_path: Path, server_url: str) -> None:
    """A file cut short ends in deflate data, which read as the gzip trailer said 2 GiB: the
    load stopped saying the file was over 256 MiB uncompressed. A size no deflate stream of
    these bytes can make is not believed."""
    whole = gzip.compress(b"".join(b'{"id":%d,"v":"x"}\n' % i for i in range(2000)))
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(whole[:200] + (2**31 - 1).to_bytes(4, "little"))
    server_query(
        server_url,
        "CREATE TABLE t (id UInt32, v String, _source String, _source_mtime DateTime, _source_row UInt64, "
        "_load_id String) ENGINE = MergeTree ORDER BY id",
    )
    with pytest.raises(chute.ChuteError) as caught:
        chute.load([str(path)], table="t", target=server_url, options=chute.LoadOptions(method="server-parse"))
    assert "256 MiB" not in str(caught.value), caught.value
    assert "gzip trailer does not tell it (several members, or a file cut short?)" in str(caught.value)


def test_auto_keeps_the_backslash_of_an_unknown_tsv_escape_as_client_convert_does(
    tmp_path: Path, server_url: str
) -> None:
    """18.16's TSV parser drops the backslash of an escape it does not know (`q\\qz` is `qqz`,
    `\\u0041` is `u0041`; kept from 20.5, ClickHouse PR 11208) where the embedded engine keeps
    it: auto let the server parse such a file, and the text changed without a word."""
    path = tmp_path / "e.tsv"
    path.write_bytes(b"q\\qz\tr1\nuni\\u0041\tr2\nnew\\nline\tr3\n")
    server_query(
        server_url,
        "CREATE TABLE t (s String, r String, _source String, _source_mtime DateTime, _source_row UInt64, "
        "_load_id String) ENGINE = MergeTree ORDER BY r",
    )
    report = chute.load([str(path)], table="t", target=server_url, options=chute.LoadOptions(header=False))
    assert report.ok and (report.rows_read, report.rows_loaded) == (3, 3), report.files
    assert report.methods == {"client-convert": 1}, report.method_why
    stored = server_query(server_url, "SELECT r, hex(s) FROM t ORDER BY r FORMAT TSV")
    assert stored.splitlines() == [
        "r1\t" + b"q\\qz".hex().upper(),
        "r2\t" + b"uni\\u0041".hex().upper(),
        "r3\t" + b"new\nline".hex().upper(),
    ]


def test_a_report_into_a_closed_pipe_is_no_traceback(tmp_path: Path, server_url: str) -> None:
    """`chute load ... --json | head -1`: the reader left before the report was printed and the
    command ended in a BrokenPipeError traceback (the load itself committed). Now: no
    traceback, the exit code a process stopped by SIGPIPE has in a shell (141)."""
    path = tmp_path / "a.jsonl"
    path.write_text('{"id":1}\n{"id":2}\n')
    command = [sys.executable, "-m", "chute", "load", str(path), "-t", "t", "--target", server_url, "--json"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # (the reader is gone before a byte is written)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err, err
    assert server_query(server_url, "SELECT count() FROM t FORMAT TSV") == "2\n"


def test_a_json_array_element_the_reader_refuses_is_named_in_the_reason(tmp_path: Path, server_url: str) -> None:
    """`["abcd"]` into Array(FixedString(3)) and `["c"]` into Array(Enum8(...)): the rows were
    rejected saying only 'a value does not fit the table'; the reason names the column and value."""
    path = tmp_path / "a.jsonl"
    path.write_text(
        '{"id":1,"af":["abc"],"ae":["a"]}\n{"id":2,"af":["ab","abcd"],"ae":["a"]}\n'
        '{"id":3,"af":["abc"],"ae":["a","c"]}\n{"id":4,"af":[],"ae":[]}\n'
    )
    server_query(
        server_url,
        "CREATE TABLE t (id UInt8, af Array(FixedString(3)), ae Array(Enum8('a' = 1, 'b' = 2))) "
        "ENGINE = MergeTree ORDER BY id",
    )
    report = chute.load([str(path)], table="t", target=server_url)
    assert report.ok and (report.rows_read, report.rows_loaded, report.rows_rejected) == (4, 2, 2), report.files
    assert server_query(server_url, "SELECT id FROM t ORDER BY id FORMAT TSV") == "1\n4\n"
    rejects = server_query(server_url, "SELECT _source_row, error FROM t_rejects ORDER BY _source_row FORMAT TSV")
    assert rejects.splitlines() == [
        '2\tcolumn af: ["ab","abcd"] does not fit Array(FixedString(3))',
        "3\tcolumn ae: [\"a\",\"c\"] does not fit Array(Enum8(\\'a\\' = 1, \\'b\\' = 2))",
    ]


@pytest.mark.parametrize("method", ["auto", "server-parse"])
def test_a_csv_array_element_the_reader_refuses_is_a_rejected_row(tmp_path: Path, server_url: str, method: str) -> None:
    """`['abcd']` into Array(FixedString(3)) (or an unknown Enum name in an array) in one CSV row
    failed the whole file with the engine's error; now that row is rejected, with its reason."""
    path = tmp_path / "a.csv"
    path.write_text(
        "id,af,ae\n1,\"['abc']\",\"['a']\"\n2,\"['ab','abcd']\",\"['a']\"\n3,\"['abc']\",\"['a','c']\"\n"
        "4,[],[]\n5,\"['it\\'s']\",\"['b']\"\n"
    )
    server_query(
        server_url,
        "CREATE TABLE t (id UInt8, af Array(FixedString(4)), ae Array(Enum8('a' = 1, 'b' = 2))) "
        "ENGINE = MergeTree ORDER BY id",
    )
    path.write_text(path.read_text().replace("'abcd'", "'abcde'"))
    report = chute.load([str(path)], table="t", target=server_url, options=chute.LoadOptions(method=method))
    assert report.ok and (report.rows_read, report.rows_loaded, report.rows_rejected) == (5, 3, 2), report.files
    loaded = server_query(server_url, "SELECT id, af, ae FROM t ORDER BY id FORMAT TSV")
    assert loaded.splitlines() == ["1\t['abc\\0']\t['a']", "4\t[]\t[]", "5\t['it\\'s']\t['b']"]
    rejects = server_query(server_url, "SELECT _source_row, error FROM t_rejects ORDER BY _source_row FORMAT TSVRaw")
    assert rejects.splitlines() == [
        "2\tcolumn af: ['ab','abcde'] does not fit Array(FixedString(4))",
        "3\tcolumn ae: ['a','c'] does not fit Array(Enum8('a' = 1, 'b' = 2))",
    ]


def test_status_of_an_unknown_table_names_twenty_loaded_tables_not_all(tmp_path: Path, server_url: str) -> None:
    """On a server whose ledger names hundreds of tables, the error listed every one on its line."""
    path = tmp_path / "a.jsonl"
    path.write_text('{"id":1}\n')
    chute.load([str(path)], table="t00", target=server_url)
    names = ", ".join(f"'t{i:02d}'" for i in range(1, 25))
    server_query(
        server_url,
        "INSERT INTO _chute_ledger (`table`, unit, state) SELECT arrayJoin([" + names + "]), 'x', 'done'",
    )
    with pytest.raises(chute.UsageError) as refused:
        chute.status(table="nosuch", target=server_url)
    assert str(refused.value).endswith(
        "(tables loaded there: " + ", ".join(f"t{i:02d}" for i in range(20)) + ", and 5 more)"
    )
