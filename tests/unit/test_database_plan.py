"""The database planner's choices without a server: key ranges from catalog numbers, streams from cores."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

import pytest

from chute import cores
from chute.errors import UsageError
from chute.sources import dbplan
from chute.sources.database import parse_url
from chute.sources.database.part import Part, merged_filter
from chute.sources.database.pgcatalog import catalog_query, parse_bounds
from chute.sources.dbplan import choose_streams, estimate_cuts, is_local, mysql_str, pg_ident, pg_str, scaled_rows


def _covers(cuts: list[tuple[int, int, int]], lo: int, hi: int) -> bool:
    """Ranges follow each other without gap or overlap from lo to hi + 1."""
    return cuts[0][0] == lo and cuts[-1][1] == hi + 1 and all(a[1] == b[0] for a, b in itertools.pairwise(cuts))


def test_dense_key_gives_equal_ranges() -> None:
    # 3 M keys, the catalog's estimate a little off: 12 ranges of 250,000 keys.
    cuts = estimate_cuts(1, 3_000_000, 2_999_984, 250_000, unique=True)
    assert len(cuts) == 12 and _covers(cuts, 1, 3_000_000)
    assert cuts[0] == (1, 250_001, 249_999) and cuts[-1][:2] == (2_750_001, 3_000_001)
    # As the old exact planner cut 30,000 dense keys at 4,000 rows a range.
    cuts = estimate_cuts(1, 30_000, 30_000, 4_000, unique=True)
    assert len(cuts) == 8 and cuts[-1] == (26_251, 30_001, 3_750)


def test_sparse_key_sized_by_rows_not_by_keys() -> None:
    # 1 M rows spread over keys up to 10^15: as many ranges as the rows need, not the keys.
    cuts = estimate_cuts(7, 10**15, 1_000_000, 250_000, unique=True)
    assert len(cuts) == 4 and _covers(cuts, 7, 10**15)
    assert all(abs(n - 250_000) <= 1 for _, _, n in cuts) and sum(n for _, _, n in cuts) >= 1_000_000


def test_unique_key_caps_a_stale_estimate_at_the_span() -> None:
    cuts = estimate_cuts(1, 1_000, 5_000_000, 250, unique=True)
    assert len(cuts) == 4 and sum(n for _, _, n in cuts) == 1_000
    # Not unique (--split-by a column with repeats): the estimate stands, one key can hold many rows.
    cuts = estimate_cuts(1, 10, 5_000_000, 1_000_000, unique=False)
    assert len(cuts) == 5 and _covers(cuts, 1, 10)
    # Never more ranges than keys.
    assert len(estimate_cuts(5, 5, 10**9, 10, unique=False)) == 1


def test_small_unknown_and_empty() -> None:
    assert estimate_cuts(1, 10, 10, 250_000, unique=True) == [(1, 11, 10)]
    # No estimate: one row per key (a unique key's most).
    assert estimate_cuts(1, 1_000, None, 400, unique=True) == [(1, 335, 334), (335, 669, 334), (669, 1001, 332)]
    # An estimate of 0 rows for keys that exist: every range still has a size (an empty unit is a file's).
    assert estimate_cuts(-5, 5, 0, 10, unique=False) == [(-5, 6, 1)]
    assert estimate_cuts(10, 9, 100, 10, unique=True) == []


def test_delta_gets_its_share_of_the_estimate() -> None:
    # Keys 1..1000 hold ~1000 rows; from 901 on: ~100.
    assert scaled_rows(1_000, 1, 1_000, 901) == 100
    assert scaled_rows(1_000, 1, 1_000, None) == 1_000
    assert scaled_rows(1_000, 100, 1_000, 50) == 1_000
    assert scaled_rows(1_000, 1, 1_000, 2_000) == 0
    assert scaled_rows(None, 1, 1_000, 500) is None


def test_streams_on_a_shared_small_box_is_one() -> None:
    s = choose_streams(client=2, local=True, server=None, override=None)
    assert s.count == 1 and s.why == "the server is on this machine: half the 2 cores this process may use"
    alone = choose_streams(client=1, local=True, server=None, override=None)
    assert alone.count == 1 and alone.why == "the server is on this machine; this process may use 1 core"
    assert choose_streams(client=16, local=True, server=None, override=None).count == 8


def test_streams_to_another_machine_take_the_fewer_cores() -> None:
    assert choose_streams(client=8, local=False, server=4, override=None).count == 4
    assert choose_streams(client=2, local=False, server=8, override=None).count == 2
    unknown = choose_streams(client=16, local=False, server=None, override=None)
    assert unknown.count == dbplan.UNKNOWN_SERVER and "unknown" in unknown.why
    given = choose_streams(client=2, local=True, server=None, override=6)
    assert given.count == 6 and "streams=N" in given.why


def test_stream_note_says_how_many_ran_and_why() -> None:
    s = choose_streams(client=8, local=False, server=8, override=None)
    assert s.note("pg://x/t", 12) == "pg://x/t: read by 8 streams: 8 cores here, 8 parallel workers on the server"
    assert s.note("pg://x/t", 3) == (
        "pg://x/t: read by 3 streams (of 8: 3 ranges to read): 8 cores here, 8 parallel workers on the server"
    )
    assert choose_streams(2, True, None, None).note("t", 0).startswith("t: read by 1 stream:")


def test_usable_cores_follow_affinity_and_the_cgroup_quota(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quota = tmp_path / "cpu.max"
    monkeypatch.setattr(cores, "CPU_MAX", str(quota))
    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    assert cores.usable_cores() == 4  # no cgroup file
    quota.write_text("max 100000\n")
    assert cores.usable_cores() == 4
    quota.write_text("150000 100000\n")
    assert cores.usable_cores() == 1
    quota.write_text("50000 100000\n")
    assert cores.usable_cores() == 1
    quota.write_text("800000 100000\n")
    assert cores.usable_cores() == 4


def test_same_machine() -> None:
    for host in ("127.0.0.1", "127.5.5.5", "::1", "[::1]", "localhost", "LOCALHOST", "db.localhost"):
        assert is_local(host), host
    for host in ("10.0.0.7", "2001:db8::1", "db.example.org"):
        assert not is_local(host), host


def test_server_side_quoting() -> None:
    assert pg_ident('we"ird') == '"we""ird"'
    assert pg_str("it's \\ here") == "E'it''s \\\\ here'"
    assert mysql_str("a'b`") == "CONVERT(X'61276260' USING utf8mb4)"
    with pytest.raises(ValueError):
        pg_ident("a\0b")


def test_streams_in_the_url() -> None:
    assert parse_url("postgresql://me@h/db/t?streams=3&rows_per_range=10").streams == 3
    assert parse_url("mysql://me@h/db/t").streams is None
    for bad in ("streams=0", "streams=x", "streams="):
        with pytest.raises(UsageError, match="streams=N"):
            parse_url(f"mysql://me@h/db/t?{bad}")


def test_whole_table_is_filtered_by_the_engine_only() -> None:
    """A batch that covers the table as planned sends no filter to the server (identity() is not
    pushed down), yet the engine still drops rows past the ranges; a part of it filters at the server."""
    table = SimpleNamespace(key_span=(1, 101))
    parts = [Part(table, "", "id", 1, 51), Part(table, "", "id", 51, 101)]  # type: ignore[arg-type]
    assert merged_filter(parts) == "identity(`id`) >= 1 AND identity(`id`) < 101"
    assert merged_filter(parts[1:]) == "`id` >= 51 AND `id` < 101"
    table.key_span = None  # a delta or a repair: the server filters
    assert merged_filter(parts) == "`id` >= 1 AND `id` < 101"
    cursor = [Part(table, "`at` <= 5", "id", 1, 51), Part(table, "`at` <= 5", "id", 51, 101)]  # type: ignore[arg-type]
    assert merged_filter(cursor) == "`at` <= 5 AND `id` >= 1 AND `id` < 101"
    apart = [Part(table, "", "id", 1, 11), Part(table, "", "id", 51, 61)]  # type: ignore[arg-type]
    assert merged_filter(apart) == "(`id` >= 1 AND `id` < 11) OR (`id` >= 51 AND `id` < 61)"


def test_key_bounds_from_the_catalog_query_xml() -> None:
    row = '<row xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n  <lo>-5</lo>\n  <hi>3000000</hi>\n</row>\n'
    assert parse_bounds(row) == (-5, 3_000_000)
    # An empty table: min and max are NULL, left out of the row.
    assert parse_bounds('<row xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">\n</row>\n') is None
    # Names reach the query as literals (format's %I quotes them on the server).
    query = catalog_query("s'x", 't"y', "k'ey", bounds=True)
    assert "E's''x'" in query and "E't\"y'" in query and "E'k''ey'" in query
    assert "query_to_xml" not in catalog_query("s", "t", None, bounds=False)
