"""What a server version can do, and the types chute creates for it."""

from __future__ import annotations

import pytest

from chute.capabilities import EMBEDDED, TYPE_DEPTH_MAX, Capabilities, type_depth

OLD = Capabilities.for_version("18.16.1")
NEW = Capabilities.for_version("24.8.4.13")


def test_versions_are_parsed_from_the_server_text() -> None:
    assert OLD.version == (18, 16, 1) and OLD.version_text == "18.16.1"
    assert NEW.version == (24, 8, 4)
    assert Capabilities.for_version("21").version == (21, 0, 0)
    assert Capabilities.for_version("no digits").version == (0, 0, 0)
    assert not OLD.s3_function and not OLD.url_compression and not OLD.hides_secrets
    assert NEW.s3_cluster and NEW.hides_secrets and not NEW.s3_row_number
    assert EMBEDDED.s3_row_number and EMBEDDED.lightweight_delete


@pytest.mark.parametrize(
    "inferred,on_18_16",
    [
        ("UInt64", "UInt64"),
        ("LowCardinality(String)", "String"),
        ("Array(LowCardinality(Nullable(String)))", "Array(Nullable(String))"),
        ("Bool", "UInt8"),
        ("Nullable(Bool)", "Nullable(UInt8)"),
        ("DateTime64(3)", "DateTime"),
        ("DateTime64(6, 'UTC')", "DateTime('UTC')"),
        ("Nullable(DateTime64(3, 'Europe/Paris'))", "Nullable(DateTime('Europe/Paris'))"),
        ("IPv4", "String"),
        ("Map(String, UInt64)", "String"),
        ("JSON", "String"),
        ("Variant(String, UInt64)", "String"),
    ],
)
def test_types_are_adapted_to_what_an_old_server_stores(inferred: str, on_18_16: str) -> None:
    assert OLD.adapt_type(inferred) == on_18_16


@pytest.mark.parametrize(
    "inferred,on_18_16",
    [
        ("DateTime64(3)", "String"),
        ("Nullable(DateTime64(6, 'UTC'))", "Nullable(String)"),
        ("Array(DateTime64(3, 'UTC'))", "Array(String)"),
        ("LowCardinality(Nullable(DateTime64(3)))", "Nullable(String)"),
        ("DateTime", "DateTime"),
        ("Decimal(40, 0)", "String"),
        ("Nullable(Decimal(76, 10))", "Nullable(String)"),
        ("Decimal(38, 2)", "Decimal(38, 2)"),
    ],
)
def test_times_of_the_rows_keep_their_fraction_on_an_old_server(inferred: str, on_18_16: str) -> None:
    """A data column without DateTime64 is text holding the time exactly; chute's own columns
    (ledger, `_source_mtime`) take DateTime."""
    adapted, why = OLD.adapt_type_noted(inferred, data=True)
    assert adapted == on_18_16
    assert ("no DateTime64" in why) == ("DateTime64" in inferred)
    assert ("more than 38 digits" in why) == (adapted != inferred and "Decimal" in inferred)
    assert NEW.adapt_type_noted(inferred, data=True) == (inferred, "")


@pytest.mark.parametrize(
    "inferred", ["LowCardinality(String)", "Bool", "DateTime64(3, 'UTC')", "IPv6", "Map(String, UInt64)"]
)
def test_a_new_server_keeps_the_inferred_type(inferred: str) -> None:
    assert NEW.adapt_type(inferred) == inferred


def test_types_no_server_stores_as_such_become_strings() -> None:
    assert NEW.adapt_type("JSON") == "String"
    assert NEW.adapt_type("Object('json')") == "String"
    assert NEW.adapt_type("Dynamic") == "String"


def _nested(depth: int, leaf: str = "Int64") -> str:
    for _ in range(depth):
        leaf = f"Tuple(n {leaf})"
    return leaf


def test_types_nested_past_what_the_engine_reads_back_become_their_text() -> None:
    assert type_depth("Array(Tuple(`a(b` Int64, 'c)(' String))") == 2
    fits = _nested(TYPE_DEPTH_MAX - 1)  # (the leaf Int64 adds no level; Nullable(...) would)
    assert NEW.adapt_type_noted(fits, data=True) == (fits, "")
    too_deep = _nested(TYPE_DEPTH_MAX + 1)
    adapted, why = NEW.adapt_type_noted(too_deep, data=True)
    assert adapted == "String" and f"nested {TYPE_DEPTH_MAX + 1} levels deep" in why
    assert NEW.adapt_type_noted(f"Nullable({_nested(TYPE_DEPTH_MAX)})", data=True)[0] == "Nullable(String)"
