"""The corpus acceptance test of issue #25: small odd files, loaded on both targets.

Ground truth comes from Python's csv/json/datetime/decimal/uuid/ipaddress modules applied to
the lines each case writes, never from chute or the engine: the good rows (values and
`_source_row`), the bad line numbers, and per file rows_read = rows_loaded + rows_rejected.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import gzip
import io
import ipaddress
import json
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import chute

from ..harness.servers import server_query
from . import test_fidelity
from .test_fidelity import rows

dest = test_fidelity.dest  # the fixture: embedded and the 18.16 server

Check = Callable[[object], str]  # the value's toString, or raises ValueError when it must be rejected


def _uint(bits: int) -> Check:
    def check(v: object) -> str:
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise ValueError(v)
        n = int(str(v))  # raises on "" and on "1.5"
        if not 0 <= n < 2**bits:
            raise ValueError(v)
        return str(n)

    return check


def _int8(v: object) -> str:
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise ValueError(v)
    n = int(str(v))
    if not -128 <= n < 128:
        raise ValueError(v)
    return str(n)


def _date(v: object) -> str:
    d = datetime.date.fromisoformat(str(v))
    if not datetime.date(1970, 1, 1) <= d <= datetime.date(2149, 6, 6):
        raise ValueError(v)
    return d.isoformat()


def _datetime(v: object) -> str:
    d = datetime.datetime.strptime(str(v), "%Y-%m-%d %H:%M:%S")
    if not datetime.datetime(1970, 1, 2) <= d <= datetime.datetime(2106, 2, 6):
        raise ValueError(v)
    return d.strftime("%Y-%m-%d %H:%M:%S")


def _uuid(v: object) -> str:
    text = str(v)
    if len(text) != 36:
        raise ValueError(v)
    return str(uuid.UUID(text))


def _ipv4(v: object) -> str:
    return str(ipaddress.IPv4Address(str(v)))


def _enum(v: object) -> str:
    if v not in ("a", "b"):
        raise ValueError(v)
    return str(v)


def _decimal(v: object) -> str:
    d = decimal.Decimal(str(v))  # InvalidOperation is an ArithmeticError
    if d != d.quantize(decimal.Decimal("0.01")) or abs(d) >= 1000:
        raise ValueError(v)
    return str(d.quantize(decimal.Decimal("0.01")))


def _float32(v: object) -> str:
    f = float(str(v))
    if abs(f) > 3.4028234663852886e38:
        raise ValueError(v)
    return repr(f).removesuffix(".0")


def _string(v: object) -> str:
    return str(v)


# name: (embedded type, 18.16 type, check)
TYPES: dict[str, tuple[str, str | None, Check]] = {
    "uint8": ("UInt8", "UInt8", _uint(8)),
    "uint32": ("UInt32", "UInt32", _uint(32)),
    "uint64": ("UInt64", "UInt64", _uint(64)),
    "int8": ("Int8", "Int8", _int8),
    "date": ("Date", "Date", _date),
    "datetime": ("DateTime", "DateTime", _datetime),
    "uuid": ("UUID", "UUID", _uuid),
    "ipv4": ("IPv4", None, _ipv4),  # 18.16 has no IPv4 type
    "enum": ("Enum8('a' = 1, 'b' = 2)", "Enum8('a' = 1, 'b' = 2)", _enum),
    "decimal": ("Decimal(5, 2)", "Decimal(5, 2)", _decimal),
    "float32": ("Float32", "Float32", _float32),
    "string": ("String", "String", _string),
}


@dataclass
class Case:
    id: str
    kind: str  # a TYPES key for column v
    text: bytes  # the file's bytes
    name: str = "data.csv"
    fmt: str = "csv"  # how the ground truth parses it: csv (whole file), csv_lines (line by line), jsonl
    delimiter: str = ","
    options: dict[str, object] = field(default_factory=dict)
    gz_truncated: bool = False
    all_bad: bool = False


def _csv(kind: str, values: list[str], sep: str = ",") -> Case:
    body = f"id{sep}v\n" + "".join(f"{i}{sep}{v}\n" for i, v in enumerate(values, 1))
    return Case(f"csv-{kind}-{values[1]}", kind, body.encode())


def _jsonl(kind: str, values: Sequence[object]) -> Case:
    body = "".join(json.dumps({"id": i, "v": v}) + "\n" for i, v in enumerate(values, 1))
    return Case(f"jsonl-{kind}-{values[1]}", kind, body.encode(), name="data.jsonl", fmt="jsonl")


CONVERSION = [
    ("uint8", ["7", "300", "9"]),
    ("datetime", ["2024-01-02 03:04:05", "2024-01-02 xx:04:05", "2024-05-06 07:08:09"]),
    ("uuid", ["123e4567-e89b-12d3-a456-426614174000", "not-a-uuid", "00000000-0000-0000-0000-000000000001"]),
    ("ipv4", ["10.0.0.1", "10.0.0.300", "192.168.1.1"]),
    ("enum", ["a", "zzz", "b"]),
    ("decimal", ["1.50", "abc", "2.25"]),
]
CHANGED = [
    ("uint32", ["5", "18446744073709551617", "6"]),
    ("uint64", ["5", "18446744073709551617", "6"]),
    ("decimal", ["1.25", "1.999", "3.50"]),
    ("float32", ["1.5", "1e39", "2.5"]),
    ("date", ["2024-02-28", "2024-02-30", "2024-03-01"]),
    ("date", ["2024-02-28", "2024-13-45", "2024-03-01"]),
    ("date", ["2024-02-28", "1969-12-31", "2024-03-01"]),
    ("date", ["2024-02-28", "2150-01-01", "2024-03-01"]),
    ("datetime", ["2024-01-02 03:04:05", "2024-01-02 25:61:61", "2024-01-03 00:00:00"]),
    ("datetime", ["2024-01-02 03:04:05", "2106-02-08 00:00:00", "2024-01-03 00:00:00"]),
]

CASES: list[Case] = []
for _kind, _values in CONVERSION + CHANGED:
    CASES.append(_csv(_kind, _values))
    CASES.append(_jsonl(_kind, _values))
CASES += [
    _jsonl("int8", [1, "", 3]),
    Case("csv-unclosed-quote", "string", b'id,v\n1,a\n2,"never closed\n3,c\n4,d\n', fmt="csv_lines"),
    Case("csv-unclosed-quote-gz", "string", b'id,v\n1,a\n2,"never closed\n3,c\n4,d\n', "d.csv.gz", "csv_lines"),
    Case("csv-multiline-last-field", "string", b'id,v\n1,a\n2,"two\nlines, ""quoted"""\n'),
    Case("csv-bare-quote-last", "string", b'id,v\n1,a\n2,5"\n'),
    Case("csv-bare-quote-then-multiline", "string", b'id,v\n1,5"\n2,"x\ny"\n3,c\n'),
    Case(
        "jsonl-broken-line",
        "string",
        b'{"id": 1, "v": "a"}\n{"id": 2, "v": \n{"id": 3, "v": "c"}\n',
        "d.jsonl",
        "jsonl",
    ),
    Case("jsonl-array-line", "string", b'{"id": 1, "v": "a"}\n[2, "b"]\n{"id": 3, "v": "c"}\n', "d.jsonl", "jsonl"),
    # a String column keeps bytes that are not UTF-8 as they are (docs/loading.md)
    Case("csv-bad-utf8", "string", b"id,v\n1,a\n2,caf\xc3\n3,c\n", fmt="csv_lines"),
    Case("csv-bom", "string", b"\xef\xbb\xbfid,v\n1,a\n2,b\n"),
    Case("jsonl-bom", "string", b'\xef\xbb\xbf{"id": 1, "v": "a"}\n{"id": 2, "v": "b"}\n', "d.jsonl", "jsonl"),
    Case("csv-crlf", "string", b"id,v\r\n1,a\r\n2,b\r\n3,c\r\n"),
    Case("jsonl-crlf", "string", b'{"id": 1, "v": "a"}\r\n{"id": 2, "v": "b"}\r\n', "d.jsonl", "jsonl"),
    Case("csv-quoted-newlines", "string", b'id,v\n1,"two\nlines"\n2,b\n3,"x\n\ny"\n4,d\n'),
    Case("csv-too-few-fields", "string", b"id,v\n1,a\n2\n3,c\n", fmt="csv_lines"),
    Case("csv-too-many-fields", "string", b"id,v\n1,a\n2,b,extra\n3,c\n", fmt="csv_lines"),
    Case("csv-header-only", "string", b"id,v\n"),
    Case("csv-name-glob-chars", "string", b"id,v\n1,a\n2,b\n", name="we*ird?[na]{me}.csv"),
    Case(
        "jsonl-blank-lines",
        "string",
        b'{"id": 1, "v": "a"}\n\n{"id": 2, "v": "b"}\n\n\n{"id": 3, "v": "c"}\n',
        "d.jsonl",
        "jsonl",
    ),
    Case("csv-semicolon", "string", b"id;v\n1;a,b\n2;c\n", delimiter=";", options={"delimiter": ";"}),
    Case("csv-pipe", "string", b"id|v\n1|a;b\n2|c,d\n", delimiter="|", options={"delimiter": "|"}),
    Case(
        "csv-gzip-truncated",
        "string",
        b"id,v\n" + b"".join(b"%d,row %d\n" % (i, i) for i in range(1, 5001)),
        name="d.csv.gz",
        gz_truncated=True,
    ),
    Case("csv-all-bad-as-json", "string", b"id,v\n1,a\n2,b\n", options={"format": "json"}, all_bad=True),
]


def _truth(case: Case) -> tuple[list[list[str]], dict[int, str]]:
    """([id, toString(v), _source_row] of each good record, {bad record number: its raw line})."""
    check = TYPES[case.kind][2]
    good: list[list[str]] = []
    bad: dict[int, str] = {}
    text = case.text.removeprefix(b"\xef\xbb\xbf")

    def take(number: int, raw: str, record: dict[str, object] | None) -> None:
        try:
            if record is None or set(record) != {"id", "v"}:
                raise ValueError(raw)
            good.append([_uint(32)(record["id"]), check(record["v"]), str(number)])
        except (ValueError, ArithmeticError, TypeError):
            bad[number] = raw

    if case.fmt == "jsonl":
        for number, line in enumerate(text.decode(errors="surrogateescape").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            take(number, line, record if isinstance(record, dict) else None)
    elif case.fmt == "csv_lines":
        lines = text.split(b"\n")[1:]
        for number, raw_line in enumerate([x for x in lines if x], 1):
            try:
                line = raw_line.decode(errors="surrogateescape")
                fields = next(csv.reader([line], delimiter=case.delimiter, strict=True))
                if len(fields) != 2:
                    raise ValueError(line)
                take(number, line, dict(zip(("id", "v"), fields, strict=True)))
            except (ValueError, csv.Error):
                bad[number] = raw_line.decode(errors="surrogateescape")
    else:
        reader = csv.reader(
            io.StringIO(text.decode(errors="surrogateescape"), newline=""), delimiter=case.delimiter, strict=True
        )
        next(reader)
        for number, fields in enumerate(reader, 1):
            take(
                number,
                case.delimiter.join(fields),
                dict(zip(("id", "v"), fields, strict=True)) if len(fields) == 2 else None,
            )
    return good, bad


def _loaded(dest: str, kind: str, table: str = "t") -> list[list[str]]:
    """[id, toString(v), _source_row] of the table; v goes through hex so that newlines and
    bytes that are not UTF-8 come back exactly."""
    found = rows(
        dest, f"SELECT toString(id), hex(toString(v)), toString(_source_row) FROM {table} ORDER BY _source_row"
    )
    out = [[i, bytes.fromhex(v).decode(errors="surrogateescape"), n] for i, v, n in found]
    if kind == "decimal":  # the engines differ in trailing zeros (1.5 vs 1.50): compare the numbers
        out = [[i, str(decimal.Decimal(v).quantize(decimal.Decimal("0.01"))), n] for i, v, n in out]
    return out


def _rejects(dest: str) -> list[tuple[int, str, str]]:
    found = rows(dest, "SELECT toString(_source_row), hex(raw), hex(error) FROM t_rejects ORDER BY _source_row")
    return [(int(n), bytes.fromhex(r).decode(errors="surrogateescape"), bytes.fromhex(e).decode()) for n, r, e in found]


def execute(dest: str, sql: str) -> None:
    if "://" in dest:
        server_query(dest, sql)
    else:
        from chute.engine import open_engine

        open_engine(dest).execute(sql)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_corpus(tmp_path: Path, dest: str, case: Case) -> None:
    remote = "://" in dest
    embedded_type, server_type, _ = TYPES[case.kind]
    if remote and server_type is None:
        pytest.skip("18.16 has no such type")
    v_type = server_type if remote else embedded_type
    provenance = (
        "_source String, _source_mtime DateTime, _source_row UInt64, _load_id String"
        if remote
        else "_source LowCardinality(String), _source_mtime DateTime64(3, 'UTC'), _source_row UInt64, "
        "_load_id LowCardinality(String)"
    )
    execute(dest, f"CREATE TABLE t (id UInt32, v {v_type}, {provenance}) ENGINE = MergeTree ORDER BY _source_row")
    data = tmp_path / "in"
    data.mkdir()
    path = data / case.name
    if case.gz_truncated:
        whole = gzip.compress(case.text)
        path.write_bytes(whole[: len(whole) // 2])
    elif case.name.endswith(".gz"):
        path.write_bytes(gzip.compress(case.text))
    else:
        path.write_bytes(case.text)
    options = chute.LoadOptions(**case.options)  # type: ignore[arg-type]
    report = chute.load([str(path)], table="t", target=dest, options=options)
    loaded = _loaded(dest, case.kind)
    if case.gz_truncated or case.all_bad:
        assert not report.ok and report.files[0].state == "failed" and report.files[0].error
        assert loaded == []
        if case.all_bad:  # the ledger did not mark it done: the right format loads it, once
            right = chute.load([str(path)], table="t", target=dest)
            assert right.ok and right.rows_loaded == 2, right.files
            chute.load([str(path)], table="t", target=dest)
            expected, _ = _truth(Case(case.id, case.kind, case.text))
            assert _loaded(dest, case.kind) == expected
        return

    good, bad = _truth(case)
    assert loaded == good, (loaded, good)
    assert report.rows_loaded == len(good)
    assert report.rows_rejected == len(bad)
    # per file: every record read is either loaded or rejected (FileResult has no rows_read)
    assert [(f.rows_loaded, f.rows_rejected) for f in report.files] == [(len(good), len(bad))]
    assert report.rows_read == len(good) + len(bad)
    if bad:
        rejects = _rejects(dest)
        assert [r[0] for r in rejects] == sorted(bad), rejects
        for number, raw, error in rejects:
            assert bad[number].strip() in raw, (raw, bad[number])
            assert error.strip()


def test_a_symlink_to_a_loaded_file_loads_it_once(tmp_path: Path, dest: str) -> None:
    remote = "://" in dest
    provenance = "_source String, _source_mtime DateTime, _source_row UInt64, _load_id String"
    if not remote:
        provenance = provenance.replace("DateTime,", "DateTime64(3, 'UTC'),")
    execute(dest, f"CREATE TABLE t (id UInt32, v String, {provenance}) ENGINE = MergeTree ORDER BY _source_row")
    real = tmp_path / "real.csv"
    real.write_text("id,v\n1,a\n2,b\n")
    first = chute.load([str(real)], table="t", target=dest)
    assert first.ok and first.rows_loaded == 2
    os.symlink(real, tmp_path / "link.csv")
    second = chute.load([str(tmp_path / "link.csv")], table="t", target=dest)
    assert second.rows_loaded == 0, second.files
    assert rows(dest, "SELECT toString(id), v, toString(_source_row) FROM t ORDER BY id") == [
        ["1", "a", "1"],
        ["2", "b", "2"],
    ]
