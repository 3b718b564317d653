"""`chute export` to an S3 prefix, and back."""

from __future__ import annotations

from pathlib import Path

import pytest

import chute
from chute.errors import ChuteError
from chute.export import MANIFEST, ExportOptions, export

from ..embedded.test_export import ROWS, _make_source, _months, _same

# Types that a careless round trip changes: LowCardinality, Nullable, Decimal,
# DateTime64 with a zone, arrays, small ints, a string with newlines and quotes.


def test_export_to_s3_and_load_it_back(tmp_path: Path, target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An S3 prefix as destination (a real S3 server): objects, a manifest object,
    re-runs that skip, and the export loaded back from S3 with the same rows and types."""
    from ..harness.extservers import S3Server

    if not S3Server.available():
        pytest.skip(str(S3Server.missing()))
    server = S3Server.create()
    try:
        server.start()
        server.credentials_in(monkeypatch)
        _make_source(target)
        dest = f"s3://{server.bucket}/exports/src"
        opts = ExportOptions(partition_by="toYYYYMM(ts)", s3_endpoint=server.endpoint)
        first = export("src", dest, target, opts)
        months = _months(target)
        assert first.rows_written == ROWS and len(first.files) == months
        assert first.manifest == f"s3://{server.bucket}/exports/src/{MANIFEST}"
        again = export("src", dest, target, opts)
        assert again.partitions_written == 0 and again.partitions_skipped == months
        # A lost object: only its partition is written again.
        lost = first.files[0]
        server._checked("DELETE", f"/{server.bucket}/exports/src/{lost.path}")
        third = export("src", dest, target, opts)
        assert third.partitions_written == 1 and third.rows_written == lost.rows

        loaded = chute.load(
            [f"{dest}/"],
            "back",
            target=target,
            options=chute.LoadOptions(provenance=False, s3_endpoint=server.endpoint),
        )
        assert loaded.ok and loaded.rows_loaded == ROWS
        _same(target, "back")
        # CSV carries no types: they come back from the manifest object.
        csv_dest = f"s3://{server.bucket}/exports/csv"
        export("src", csv_dest, target, ExportOptions(format="csv", compression="gzip", s3_endpoint=server.endpoint))
        from_csv = chute.load(
            [f"{csv_dest}/"],
            "back_csv",
            target=target,
            options=chute.LoadOptions(provenance=False, s3_endpoint=server.endpoint),
        )
        assert from_csv.ok and from_csv.rows_loaded == ROWS
        _same(target, "back_csv")
        # Wrong credentials: one line, no secret.
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret-" + server.secret_key[:4])
        with pytest.raises(ChuteError) as info:
            export("src", f"s3://{server.bucket}/exports/other", target, opts)
        assert "not-the-secret" not in str(info.value) and "\n" not in str(info.value)
    finally:
        server.remove()
