"""Quoting of names and literals that reach SQL, and table names."""

from __future__ import annotations

import pytest

from chute.errors import UsageError
from chute.sql import TableName, expression, one_statement, quote_ident, quote_str


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


@pytest.mark.parametrize(
    "given",
    ["tuple()", "(host, ts)", "toYYYYMM(ts)", "cityHash64(`we;ird`)", "concat('a;b', \"c--d\")", r"'it\'s'"],
)
def test_an_expression_of_one_piece_goes_through_as_it_is(given: str) -> None:
    assert expression(given, "--order-by") == given


@pytest.mark.parametrize(
    ("given", "found"),
    [
        ("id; DROP TABLE victim", "a ';'"),
        ("id -- the rest of chute's statement", "a comment"),
        ("id /* x */", "a comment"),
        ("$$'$$; DROP TABLE victim; SELECT '", "a '$'"),
        ("(a, b", "an unclosed bracket"),
        ("a) SETTINGS x = 1 (", "an unmatched ')'"),
        ("'open", "an unclosed '"),
        ("   ", None),
    ],
)
def test_an_expression_that_could_be_more_than_one_is_refused(given: str, found: str | None) -> None:
    with pytest.raises(UsageError) as refused:
        expression(given, "--partition-by")
    assert "--partition-by" in str(refused.value)
    if found is not None:
        assert str(refused.value).endswith(f"has {found}")


def test_one_statement_drops_a_trailing_semicolon_and_keeps_comments_and_quotes() -> None:
    assert one_statement(" SELECT 1 ;; \n") == "SELECT 1"
    assert one_statement("SELECT ';' -- a; b\n, 2") == "SELECT ';' -- a; b\n, 2"
    assert one_statement("SELECT 1 /* ; */") == "SELECT 1 /* ; */"
    for several in ("SELECT 1; SELECT 2", "SELECT 1) ; DROP TABLE t; SELECT (1"):
        with pytest.raises(UsageError):
            one_statement(several)
    with pytest.raises(UsageError, match="no SQL statement"):
        one_statement(" ; ")
