"""What sources share: brace expansion, known extensions, the SQL helpers, the hooks' defaults."""

from __future__ import annotations

from chute.formats import FileFormat
from chute.sources.base import (
    EngineRowNumbers,
    RowPositions,
    ServerReadable,
    SourceBase,
    common_directory,
    expand_braces,
    known_extension,
    provenance_by_path,
    table_function,
)
from chute.units import Unit


def test_braces_expand_in_order_nested_and_empty() -> None:
    assert expand_braces("plain.csv") == ["plain.csv"]
    assert expand_braces("d/{a,b}.csv") == ["d/a.csv", "d/b.csv"]
    assert expand_braces("{x,y}/{1,2}") == ["x/1", "x/2", "y/1", "y/2"]
    assert expand_braces("f{a,b{1,2}}.json") == ["fa.json", "fb1.json", "fb2.json"]
    assert expand_braces("f{,.gz}") == ["f", "f.gz"]
    assert expand_braces("unclosed{a,b") == ["unclosed{a,b"]


def test_known_extensions_allow_one_compression() -> None:
    assert known_extension("a.csv") and known_extension("a.json.gz") and known_extension("A.PARQUET")
    assert not known_extension("a.gz") and not known_extension("README") and not known_extension("a.txt")
    assert not known_extension("_SUCCESS")


def test_table_function_argument_order() -> None:
    assert table_function("file", ["'a.csv'"], "CSV", None, "none") == "file('a.csv', 'CSV')"
    assert table_function("file", ["'a.csv'"], "CSV", "x UInt8", "none") == "file('a.csv', 'CSV', 'x UInt8')"
    # A compression needs a structure before it.
    assert table_function("url", ["'u'"], "JSONEachRow", None, "gzip") == "url('u', 'JSONEachRow', 'auto', 'gzip')"
    assert (
        table_function("s3", ["'u'", "NOSIGN"], "CSV", "a String", "zstd", ["headers('A' = 'b')"])
        == "s3('u', NOSIGN, 'CSV', 'a String', 'zstd', headers('A' = 'b'))"
    )
    assert table_function("file", ["'it''s'"], "CSV", "n String", "none").endswith("'n String')")
    assert table_function("file", ["'a'"], "CSV", "it's", "none") == "file('a', 'CSV', 'it\\'s')"


def test_common_directory_is_cut_back_to_a_slash() -> None:
    assert common_directory(["/d/a1.csv", "/d/a2.csv"]) == "/d/"
    assert common_directory(["/d/x/a.csv", "/d/y/b.csv"]) == "/d/"
    assert common_directory(["a.csv", "b.csv"]) == ""
    assert common_directory(["k//a", "k//b"]) == "k//"


def test_provenance_by_path_maps_each_path_to_its_unit_time() -> None:
    fmt = FileFormat("CSV", "none")
    units = [Unit("/d/a.csv", 1, 5, fmt), Unit("/d/it's.csv", 2, 7, fmt)]
    got = provenance_by_path("_path", ["/d/a.csv", "/d/it's.csv"], units)
    assert got["_source"] == "_path"
    assert got["_source_mtime"] == (
        "fromUnixTimestamp64Nano(transform(_path, ['/d/a.csv', '/d/it\\'s.csv'], [5, 7], 0), 'UTC')"
    )


def test_engine_row_numbers_by_format() -> None:
    rows = EngineRowNumbers()
    csv = Unit("a.csv", 1, 1, FileFormat("CSV", "gzip"))
    native = Unit("a.native", 1, 1, FileFormat("Native", "none"))
    assert rows.row_number_expression(csv) == "_row_number + 1" and not rows.needs_serial_read(csv)
    assert rows.row_number_expression(native) == "rowNumberInAllBlocks() + 1" and rows.needs_serial_read(native)


def test_the_hooks_default_to_doing_nothing() -> None:
    base = SourceBase()
    unit = Unit("a.csv", 1, 1, FileFormat("CSV", "none"))
    assert list(base.notes) == [] and base.scrub("secret") == "secret"
    assert base.close() is None and base.unit_done([unit]) is None
    assert base.extra_provenance_columns() == [] and base.provenance_expressions(unit, "1") == {}
    # Hooks whose presence changes the load are not defaults: a source has them or not.
    assert not hasattr(base, "server_expression") and not hasattr(base, "row_at_position")
    assert not isinstance(base, ServerReadable) and not isinstance(base, RowPositions)


def test_sources_say_what_they_can() -> None:
    from chute.sources.files import FileSource
    from chute.sources.s3 import S3Source
    from chute.sources.url import UrlSource

    assert isinstance(S3Source(["s3://b/k.csv"], env={}), ServerReadable)
    assert isinstance(UrlSource(["http://h/a.csv"]), ServerReadable)
    assert not isinstance(FileSource(["x.csv"]), ServerReadable)


def test_unit_identity_and_ranges() -> None:
    fmt = FileFormat("CSV", "none")
    whole = Unit("/d/a.csv", 10, 99, fmt)
    tagged = Unit("s3://b/k", 10, 99, fmt, etag="abc")
    part = Unit("/d/a.csv#bytes=0-5", 5, 99, fmt, origin="/d/a.csv", start=0, end=5)
    assert whole.identity == "10:99" and tagged.identity == "10:abc"
    assert not whole.is_range and whole.source_name == "/d/a.csv"
    assert part.is_range and part.source_name == "/d/a.csv"
