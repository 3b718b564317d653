"""Quoting of names and literals that reach SQL, and table names."""

from __future__ import annotations

import pytest

from chute.errors import UsageError
from chute.sql import TableName, quote_ident, quote_str


@pytest.mark.parametrize(
    "value,quoted",
    [
        ("plain", "'plain'"),
        ("it's", "'it\\'s'"),
        ("back\\slash", "'back\\\\slash'"),
        ("two\nlines\r\n", "'two\\nlines\\r\\n'"),
        ("tab\there", "'tab\\there'"),
        ("nul\0byte", "'nul\\0byte'"),
        ("\\'", "'\\\\\\''"),  # a backslash before a quote cannot end the literal
        ("", "''"),
    ],
)
def test_quote_str_escapes_what_would_end_or_bend_the_literal(value: str, quoted: str) -> None:
    assert quote_str(value) == quoted


@pytest.mark.parametrize(
    "name,quoted",
    [("id", "`id`"), ("odd`name", "`odd\\`name`"), ("a\\b", "`a\\\\b`"), ("with space", "`with space`")],
)
def test_quote_ident_escapes_backticks_and_backslashes(name: str, quoted: str) -> None:
    assert quote_ident(name) == quoted


def test_table_names_with_and_without_a_database() -> None:
    plain = TableName.parse("events")
    assert (plain.database, plain.table, plain.sql, str(plain)) == (None, "events", "`events`", "events")
    qualified = TableName.parse("logs.events_2")
    assert qualified.sql == "`logs`.`events_2`" and str(qualified) == "logs.events_2"
    assert qualified.with_suffix("_stage") == TableName("logs", "events_2_stage")
    assert {TableName.parse("a.b"), TableName("a", "b")} == {TableName("a", "b")}
    assert TableName.parse("t") != "t"


@pytest.mark.parametrize("text", ["", "a.b.c", "1table", "my-table", "t;DROP TABLE x", "a.", ".a", "tab le", "`t`"])
def test_table_names_that_are_not_plain_identifiers_are_refused(text: str) -> None:
    with pytest.raises(UsageError, match="invalid table name"):
        TableName.parse(text)
