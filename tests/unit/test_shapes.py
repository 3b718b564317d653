"""Which files fit one table (chute.load.shapes): the rules, without the engine."""

from __future__ import annotations

from chute.formats import FileFormat
from chute.load.shapes import MAYBE, NAMED, POSITIONAL, Shape, fits, groups, table_shape, text_shape
from chute.schema import Column
from chute.sniff import Head
from chute.units import Unit


def unit(name: str, fmt: str = "JSONEachRow") -> Unit:
    return Unit(key=f"/d/{name}", size=10, mtime_ns=1, fmt=FileFormat(fmt, "none"))


def named(*fields: str) -> Shape:
    return Shape(fields, len(fields))


def head(text: str) -> Head:
    return Head([line.encode() for line in text.splitlines()])


def test_a_csv_first_line_is_a_header_a_row_or_either() -> None:
    assert text_shape(head("sku,price\nA1,3.5\n"), ",", None) == Shape(("sku", "price"), 2, NAMED)
    assert text_shape(head("name,city\nann,paris\n"), ",", None) == Shape(("name", "city"), 2, MAYBE)
    assert text_shape(head("1,ann\n2,bob\n"), ",", None) == Shape((), 2, POSITIONAL)
    assert text_shape(head("name,city\nann,paris\n"), ",", True).kind == NAMED
    assert text_shape(head("sku,price\nA1,3.5\n"), ",", False) == Shape((), 2, POSITIONAL)
    assert text_shape(head("a\tb\n1\t2\n"), "\t", None) == Shape(("a", "b"), 2, NAMED)
    assert text_shape(head("id,s,\n1,x,\n"), ",", None) == Shape(("id", "s"), 2, NAMED)  # a trailing delimiter
    assert text_shape(head("a,a,b\n1,2,3\n"), ",", None) is None  # (its load says what is wrong)
    assert text_shape(head("a,,b\n1,2,3\n"), ",", None) is None


def test_files_fit_by_a_shared_name_or_by_position() -> None:
    assert fits(named("a", "b"), named("a", "c"))  # added fields: one table
    assert not fits(named("id", "ts", "amount"), named("name", "age"))
    assert fits(Shape((), 2, POSITIONAL), named("sku", "price"))  # a file without its header line
    assert not fits(Shape(("name", "city"), 2, MAYBE), named("sku", "price"))
    assert fits(Shape(("ann", "paris"), 2, MAYBE), Shape(("bob", "rome"), 2, MAYBE))  # maybe rows, both
    assert not fits(Shape((), 3, POSITIONAL), named("a", "b"))
    assert fits(named("id", "ts"), named("name", "age"), add_columns=True)
    assert not fits(Shape((), 3, POSITIONAL), named("a", "b"), add_columns=True)
    assert fits(named("user"), named("user.id", "user.name"))  # a JSON object into a Nested column
    table = Shape(("id", "name", "city"), 3, "table")
    assert fits(Shape((), 2, POSITIONAL), table) and not fits(Shape((), 4, POSITIONAL), table)


def test_groups_put_the_table_s_first_and_join_through_each_other() -> None:
    units = [unit("a.jsonl"), unit("b.jsonl"), unit("c.jsonl"), unit("p.csv", "CSV")]
    shapes = [named("a", "b"), named("b", "c"), named("c", "d"), named("name", "age")]
    found = groups(units, shapes, None)
    assert [[u.key for u in g.units] for g in found] == [["/d/a.jsonl", "/d/b.jsonl", "/d/c.jsonl"], ["/d/p.csv"]]
    table = table_shape(
        [Column("name", "String"), Column("age", "UInt8"), Column("_source", "String"), Column("n", "UInt8", "ALIAS")]
    )
    assert table.fields == ("name", "age")
    with_table = groups(units, shapes, table)
    assert with_table[0].with_table and [u.key for u in with_table[0].units] == ["/d/p.csv"]
    assert len(groups(units, shapes, table, add_columns=True)) == 1
