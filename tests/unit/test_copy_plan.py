"""The pure parts of `chute copy`: how each type goes into the checksum, key-range grids, the
destination's DDL and the check of an existing destination table."""

from __future__ import annotations

import pytest

from chute.capabilities import Capabilities
from chute.copy.figures import NULL_HASH, checksum_sql, hash_arg, hashes_as_is
from chute.copy.plan import CopyUnit, _quoted_times, grid
from chute.copy.shards import DestShards, Place
from chute.copy.tables import Mapped, TableFacts, check_dest, create_sql
from chute.errors import SchemaError
from chute.schema import Column
from chute.sql import TableName
from chute.targets.cluster import Shard, ShardLayout
from chute.targets.engines import DistributedEngine


def test_types_that_hash_alike_on_every_version_go_as_they_are() -> None:
    for t in ("UInt32", "Int8", "Float64", "String", "FixedString(3)", "Date", "DateTime", "DateTime('UTC')",
              "Enum8('a' = 1, 'b' = 2)", "Array(String)", "Array(Array(UInt64))", "Tuple(UInt8, String)"):  # fmt: skip
        assert hashes_as_is(t), t
    for t in ("Decimal(18, 4)", "UUID", "Nullable(Int64)", "Array(Nullable(UInt32))", "LowCardinality(String)"):
        assert not hashes_as_is(t), t


def test_a_null_is_a_fixed_number_not_a_skipped_row() -> None:
    # cityHash64 of a NULL argument is NULL, and sum() would leave the whole row out.
    sql = hash_arg("`n`", "Nullable(Int64)")
    assert sql == f"if(isNull(`n`), {NULL_HASH}, cityHash64(assumeNotNull(`n`)))"
    assert hash_arg("`s`", "LowCardinality(Nullable(String))").startswith("if(isNull(CAST(`s`, 'Nullable(String)'))")


def test_decimals_hash_their_text_without_trailing_zeros() -> None:
    assert "replaceRegexpOne(toString(`p`)" in hash_arg("`p`", "Decimal(18, 4)")
    assert hash_arg("`u`", "UUID") == "toString(`u`)"


def test_the_source_side_casts_to_the_destination_type() -> None:
    columns = [Column("t", "String"), Column("k", "UInt32")]
    sql = checksum_sql(columns, ["DateTime64(3)", "UInt32"])
    assert sql == "sum(cityHash64(CAST(`t`, 'String'), `k`))"


@pytest.mark.parametrize(
    ("lo", "hi", "count", "expected"),
    [
        (0, 11999, 4, [(None, 4096), (4096, 8192), (8192, None)]),
        (5, 5, 3, [(None, None)]),
        (0, 100, 1, [(None, None)]),
        (-10, 10, 2, [(None, 0), (0, None)]),
    ],
)
def test_key_ranges_sit_on_a_power_of_two_grid(lo: int, hi: int, count: int, expected: list[object]) -> None:
    assert grid(lo, hi, count) == expected


def test_the_grid_stays_while_rows_are_added_within_it() -> None:
    assert grid(0, 11999, 4) == grid(0, 12287, 4)


SOURCE = TableFacts(
    [Column("id", "UInt32"), Column("ts", "DateTime64(3)"), Column("x2", "UInt64", "MATERIALIZED", "id * 2")],
    "ReplicatedMergeTree",
    "ReplicatedMergeTree('/clickhouse/tables/{shard}/db/t', '{replica}') PARTITION BY toYYYYMM(ts) ORDER BY id",
    "toYYYYMM(ts)",
    "id",
)


def test_a_new_table_keeps_the_engine_without_its_replication_and_maps_types() -> None:
    old = Capabilities.for_version("18.16.1")
    type_sql, why = old.adapt_type_noted("DateTime64(3)", data=True)
    mapped = Mapped([Column("id", "UInt32"), Column("ts", type_sql)], ["UInt32", "DateTime64(3)"], [why])
    from chute.sql import TableName

    ddl = create_sql(SOURCE, mapped, TableName("db", "t"))
    assert "ENGINE = MergeTree() PARTITION BY toYYYYMM(ts) ORDER BY id" in ddl
    assert "`ts` String" in ddl and "`x2` UInt64 MATERIALIZED id * 2" in ddl and "/clickhouse" not in ddl


def test_an_existing_table_that_differs_is_named_column_by_column() -> None:
    from chute.sql import TableName

    mapped = Mapped([Column("id", "UInt32"), Column("ts", "DateTime64(3)")], ["UInt32", "DateTime64(3)"], [])
    dest = TableFacts([Column("id", "UInt64"), Column("extra", "String")], "MergeTree", "", "toYYYYMM(ts)", "id")
    with pytest.raises(SchemaError) as info:
        check_dest(SOURCE, mapped, dest, TableName(None, "t"))
    text = str(info.value)
    assert "id is UInt64, the source's UInt32" in text and "ts missing" in text
    assert "extra (String) only in the destination" in text
    same = TableFacts([Column("id", "UInt32"), Column("ts", "DateTime64(3)")], "MergeTree", "", "toYYYYMM(`ts`)", "id")
    check_dest(SOURCE, mapped, same, TableName(None, "t"))  # (backquotes in a key are no difference)
    other_key = TableFacts(same.columns, "MergeTree", "", "toDate(ts)", "id")
    with pytest.raises(SchemaError, match="partitioned by toDate"):
        check_dest(SOURCE, mapped, other_key, TableName(None, "t"))


def test_old_merge_tree_syntax_in_the_extended_one() -> None:
    from chute.targets.engines import extended_syntax

    assert extended_syntax("MergeTree(d, k, 8192)", "toYYYYMM(d)", "k") == (
        "MergeTree() PARTITION BY toYYYYMM(d) ORDER BY k SETTINGS index_granularity = 8192"
    )
    assert extended_syntax("MergeTree(d, intHash32(u), (k, intHash32(u)), 8192)", "toYYYYMM(d)", "k, intHash32(u)") == (
        "MergeTree() PARTITION BY toYYYYMM(d) ORDER BY (k, intHash32(u)) SAMPLE BY intHash32(u) "
        "SETTINGS index_granularity = 8192"
    )
    assert extended_syntax("ReplacingMergeTree(d, (k, s), 8192, ver)", "toYYYYMM(d)", "k, s").startswith(
        "ReplacingMergeTree(ver) PARTITION BY toYYYYMM(d) ORDER BY (k, s)"
    )
    modern = "MergeTree PARTITION BY x ORDER BY k SETTINGS index_granularity = 8192"
    assert extended_syntax(modern, "x", "k") == modern


def test_bare_dates_of_18_16_partitions_are_quoted() -> None:
    assert _quoted_times("2025-01-01") == "'2025-01-01'"
    assert _quoted_times("2025-01-01 10:00:00") == "'2025-01-01 10:00:00'"
    assert _quoted_times("(2025-01-01, 3)") == "('2025-01-01', 3)"
    for kept in ("202501", "'2025-01-01'", "('a', 2025-01-01)", "-5"):
        assert _quoted_times(kept) == kept


def test_a_random_sharding_key_puts_a_unit_whole_on_one_shard_by_weight() -> None:
    """(DestShards.conditions without a server: the layout and places are given.)"""
    engine = DistributedEngine("c", "db", "t_local", "rand()")
    shards = (Shard(1, 1, 0, 0, ("a:9000",), ("a",)), Shard(2, 3, 1, 3, ("b:9000",), ("b",)))
    dest = DestShards.__new__(DestShards)
    dest.layout = ShardLayout(TableName("db", "t"), engine, TableName("db", "t_local"), shards)
    dest.places = [Place(None, TableName("db", "t_local"), s) for s in shards]  # type: ignore[arg-type]
    picks = []
    for n in range(400):
        unit = CopyUnit(f"src/t#{n}", str(n), str(n), "1", 0, 0, "")
        found = dest.conditions(unit)
        assert sorted(c is None for c in found) == [False, True] and found == dest.conditions(unit)
        picks.append(found.index("1"))
    assert 50 < picks.count(0) < 150  # weight 1 of 4
    keyed = DistributedEngine("c", "db", "t_local", "id")
    dest.layout = ShardLayout(TableName("db", "t"), keyed, TableName("db", "t_local"), shards)
    assert dest.conditions(unit) == ["(toUInt64(id) % 4) = 0", "(toUInt64(id) % 4) BETWEEN 1 AND 3"]
