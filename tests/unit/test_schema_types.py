"""Type text helpers of chute.schema."""

from __future__ import annotations

import pytest

from chute.schema import without_nullable


@pytest.mark.parametrize(
    "type_sql,expected",
    [
        ("Nullable(Int64)", "Int64"),
        ("Array(Nullable(Int32))", "Array(Int32)"),
        ("LowCardinality(Nullable(String))", "LowCardinality(String)"),
        ("Tuple(a Nullable(Int8), b Array(Nullable(String)))", "Tuple(a Int8, b Array(String))"),
        ("Map(String, Nullable(Int64))", "Map(String, Int64)"),
        ("Nullable(DateTime64(3, 'UTC'))", "DateTime64(3, 'UTC')"),
        ("Nullable(Enum8('Nullable(x)' = 1))", "Enum8('Nullable(x)' = 1)"),  # quoted text stays
        ("Tuple(MyNullable(Int8))", "Tuple(MyNullable(Int8))"),  # not a whole word
        ("Int64", "Int64"),
    ],
)
def test_without_nullable(type_sql: str, expected: str) -> None:
    assert without_nullable(type_sql) == expected
