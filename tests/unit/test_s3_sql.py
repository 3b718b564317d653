"""The S3 source's pure pieces: SigV4, key patterns, the SQL of server-side and cluster reads."""

from __future__ import annotations

import datetime
import re
from types import SimpleNamespace

import pytest

import chute
from chute.capabilities import Capabilities
from chute.formats import detect
from chute.load.methods import check_cluster, server_side_select
from chute.remote.sigv4 import Credentials, sign
from chute.schema import Column
from chute.sources import Unit
from chute.sources.s3 import S3Source, glob_regex
from chute.sources.url import UrlSource


def test_sigv4_matches_the_aws_documentation_examples() -> None:
    creds = Credentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    now = datetime.datetime(2013, 5, 24, tzinfo=datetime.timezone.utc)
    get = sign(
        "GET", "https://examplebucket.s3.amazonaws.com/test.txt", creds, "us-east-1", {"Range": "bytes=0-9"}, now=now
    )
    assert get["Authorization"].endswith("Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    assert "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date," in get["Authorization"]
    listing = sign("GET", "https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J", creds, "us-east-1", now=now)
    assert listing["Authorization"].endswith(
        "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
    )
    assert "wJalr" not in repr(creds)


def test_key_patterns() -> None:
    assert glob_regex("a/**/*.parquet").match("a/x.parquet")
    assert glob_regex("a/**/*.parquet").match("a/b/c/x.parquet")
    assert not glob_regex("a/*.parquet").match("a/b/x.parquet")
    assert glob_regex("p-[0-1]?.csv").match("p-1x.csv")
    assert not glob_regex("p-[!0-1]?.csv").match("p-1x.csv")


def test_s3cluster_sql_text() -> None:
    """No cluster here to run it on: the exact text, with `_row_number` for row numbers."""
    source = S3Source(
        ["s3://logs/x/"],
        endpoint="http://minio:9000",
        env={"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "se'cret/Key+1"},
    )
    unit = Unit("s3://logs/x/a b.json.gz", 10, 1_714_557_600_123_456_789, detect("a b.json.gz"))
    inputs = [Column("id", "Int64"), Column("user name", "Nullable(String)")]
    types = {"_source": "LowCardinality(String)", "_source_mtime": "DateTime64(3, 'UTC')"}
    types |= {"_source_row": "UInt64", "_load_id": "String"}
    read = server_side_select(
        source, unit, "JSONEachRow", inputs, Capabilities.for_version("26.9.1"), types, "L1", cluster="analytics"
    )
    assert read is not None
    assert read.expression == (
        "s3Cluster('analytics', 'http://minio:9000/logs/x/a%20b.json.gz', 'AKID', 'se\\'cret/Key+1', "
        "'JSONEachRow', 'id Int64, `user name` Nullable(String)', 'gzip')"
    )
    assert read.select == (
        "SELECT `id`, `user name`, "
        "CAST('s3://logs/x/a b.json.gz', 'LowCardinality(String)') AS _source, "
        "CAST(toDateTime64('2024-05-01 10:00:00.123456789', 9, 'UTC'), 'DateTime64(3, \\'UTC\\')') AS _source_mtime, "
        "CAST(_row_number + 1, 'UInt64') AS _source_row, "
        "CAST('L1', 'String') AS _load_id "
        f"FROM {read.expression}"
    )
    # One server: s3(), rows numbered in file order by one reader; no provenance, no cast.
    plain = server_side_select(source, unit, "JSONEachRow", inputs[:1], Capabilities.for_version("24.8"))
    assert plain == (
        "s3('http://minio:9000/logs/x/a%20b.json.gz', 'AKID', 'se\\'cret/Key+1', 'JSONEachRow', 'id Int64', 'gzip')",
        "SELECT `id` FROM s3('http://minio:9000/logs/x/a%20b.json.gz', 'AKID', 'se\\'cret/Key+1', "
        "'JSONEachRow', 'id Int64', 'gzip')",
    )
    with_rows = server_side_select(source, unit, "JSONEachRow", inputs, Capabilities.for_version("24.8"), types)
    assert with_rows is not None and "CAST(rowNumberInAllBlocks() + 1, 'UInt64') AS _source_row" in with_rows.select
    # s3Cluster() came in 21.5; the secret, as written into SQL too, never shows in a message.
    assert source.server_blocker(unit, Capabilities.for_version("21.4"), "analytics") == (
        "server 21.4.0 has no s3Cluster() (21.5+)"
    )
    assert source.scrub("... 'se\\'cret/Key+1' ... se'cret/Key+1") == "... '***' ... ***"


def test_cluster_refusals_by_server_version() -> None:
    """Where `--cluster` cannot be honoured it is refused before anything is written
    (only the target's version matters here, so a stand-in carries it)."""
    source = S3Source(
        ["s3://logs/x/"], endpoint="http://minio:9000", env={"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    )
    json_unit = Unit("s3://logs/x/a.json.gz", 10, 0, detect("a.json.gz"))
    native_unit = Unit("s3://logs/x/b.native", 10, 0, detect("b.native"))

    def check(version: str, units: list[Unit], provenance: bool = True, src: object = source) -> None:
        target = SimpleNamespace(capabilities=Capabilities.for_version(version))
        opts = chute.LoadOptions(cluster="analytics", provenance=provenance)
        check_cluster(opts, target, src, units)  # type: ignore[arg-type]

    check("26.9.1", [json_unit])
    check("24.8", [json_unit, native_unit], provenance=False)
    for version, units, message in [
        (
            "24.8",
            [json_unit],
            "--cluster with provenance needs _row_number from s3Cluster() (server 26.9+, this one is 24.8.0)",
        ),
        (
            "26.9",
            [json_unit, native_unit],
            "--cluster with provenance: s3://logs/x/b.native: Native objects carry no _row_number",
        ),
        ("21.4", [json_unit], "--cluster: server 21.4.0 has no s3Cluster() (21.5+)"),
        ("22.10", [json_unit], "--cluster: server 22.10.0 would keep the secret key in its query log"),
    ]:
        with pytest.raises(chute.UsageError, match="^" + re.escape(message)):
            check(version, units)
    with pytest.raises(chute.UsageError, match=r"^--cluster reads s3:// sources only, not URLs$"):
        check("26.9", [json_unit], src=UrlSource(["http://example.org/a.json"]))


def test_a_bracket_inside_a_glob_class_matches_itself_without_a_python_warning() -> None:
    """`[[]` is the glob for a literal `[` (how a file named `[1].json` is named): its regex
    `[[]` made Python print a FutureWarning ('Possible nested set') into the user's output."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        regex = glob_regex("d/[[]1][*]&[&&~~|].json")
    assert regex.match("d/[1]*&&.json") and regex.match("d/[1]*&~.json")
    assert not regex.match("d/x1]*&&.json")
