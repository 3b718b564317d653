"""The first lines of CSV/TSV files: text or not, the delimiter, and what the header names."""

from __future__ import annotations

import dataclasses

from chute.errors import SchemaError, SourceError
from chute.load.context import LoadContext
from chute.schema import Column, describe, unnamed
from chute.sniff import Head, refuse_binary
from chute.units import Unit


class Headers:
    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx

    def format_given(self, unit: Unit) -> bool:
        """The unit's format was said (--format, an export's manifest), not guessed from its name."""
        return self.ctx.opts.format is not None or self.ctx.source.declared_columns(unit) is not None

    def head(self, unit: Unit) -> Head:
        """The first lines of a text unit; NotText for a binary file. Decides the CSV delimiter."""
        lines = self.ctx.source.table_expression(unit, "line String", "LineAsString")
        head = refuse_binary(self.ctx.target.engine, lines, unit.key, self.format_given(unit))
        if unit.fmt.format != "CSV" or self.ctx.delimiter_given:
            return head
        found = head.delimiter()
        if found == "\t":  # the engine refuses CSV with tabs ("use CustomSeparated")
            raise SourceError(f"{unit.key}: fields separated by tabs: load it with --format tsv")
        if self.ctx.csv_delimiter is None:
            self.ctx.csv_delimiter = found or ","
            if found and found != ",":
                self.ctx.opts = dataclasses.replace(self.ctx.opts, delimiter=found)
                self.ctx.report.notes.append(
                    f"CSV fields separated by {found!r}, as the first lines of {unit.key} show (--delimiter overrides)"
                )
        elif found is not None and found != self.ctx.csv_delimiter:
            raise SourceError(
                f"{unit.key}: fields separated by {found!r}, not {self.ctx.csv_delimiter!r} as in the first CSV file; "
                "load it on its own, or with --delimiter"
            )
        return head

    def header_only(self, unit: Unit, head: Head) -> list[str] | None:
        """A CSV/TSV file of one line that names columns: those names (the file has no rows)."""
        names = head.names_only(self.ctx.opts.delimiter or ("," if unit.fmt.format == "CSV" else "\t"))
        if names is not None:
            self.ctx.report.notes.append(
                f"{unit.key}: one line, taken as the column names (type String; no data rows to infer types from)"
            )
        return names

    def header_names(self, unit: Unit) -> bool:
        """A first line naming table columns: read as CSVWithNames (faster than detecting).

        A first line that names table columns and others too raises SchemaError naming the
        others, as for JSON: the engine would read it as a header and drop their values."""
        if self.ctx.opts.header is False:
            return False
        delimiter = self.ctx.opts.delimiter or ("," if unit.fmt.format == "CSV" else "\t")
        head = self.head(unit)
        fields = self.named_fields(unit, head.fields(delimiter))
        known = {c.name for c in self.ctx.input_columns()}
        if not fields or not set(fields) <= known:
            named = [f for f in fields if f in known]
            if (named and 2 * len(named) >= len(fields)) or self.ctx.opts.header:
                extra = ", ".join(f for f in fields if f not in known)
                raise SchemaError(
                    f"{unit.key}: input fields not in table {self.ctx.table}: {extra} (use --add-columns to add them)"
                )
            return False  # (data, or a header of another table: the read says what does not fit)
        lines = self.ctx.source.table_expression(unit, "line String", "LineAsString")
        sample = self.ctx.target.engine.rows(
            f"SELECT avg(length(line)) + 1 AS width FROM (SELECT line FROM {lines} LIMIT 2000)"
        )
        self.ctx.line_bytes[unit.key] = float(sample[0]["width"] or 1) if sample else 1.0
        if unit.fmt.format == "CSV" and head.padded_names(delimiter) and not self.ctx.csv_trim:
            self.ctx.csv_trim = True
            self.ctx.report.notes.append(
                f"{unit.key}: the header's names have spaces around them, so spaces and tabs around unquoted "
                "CSV values are trimmed too in this load (the engine trims both or neither)"
            )
        return True

    def named_if_all_text(self, unit: Unit, columns: list[Column]) -> list[Column]:
        """A new table's columns from a CSV/TSV file whose every column is text: the engine cannot
        tell a header from the rows by their types (it names the columns c1, c2, ...). Guessing
        could drop a real row, so the first line loads as a row unless --header says it names
        the columns; the note says which way it went."""
        if not unnamed(columns) or any(c.type not in ("String", "Nullable(String)") for c in columns):
            return columns
        if self.ctx.opts.header:
            delimiter = self.ctx.opts.delimiter or ("," if unit.fmt.format == "CSV" else "\t")
            fields = self.head(unit).fields(delimiter)
            if len(fields) != len(columns) or len(set(fields)) != len(fields) or not all(fields):
                raise SchemaError(
                    f"{unit.key}: --header, yet its first line does not name {len(columns)} distinct columns: "
                    f"{', '.join(map(repr, fields))}"
                )
            return [dataclasses.replace(c, name=f) for c, f in zip(columns, fields, strict=True)]
        self.ctx.note(
            f"{unit.key}: every column is text, so no header line could be told from the rows: the first line "
            "loads as a row and the columns are named c1, c2, ...; if it names the columns, load with --header"
            if self.ctx.opts.header is None
            else f"{unit.key}: every line is a row (--no-header): the columns are named c1, c2, ..."
        )
        return columns

    def names_before_end(self, unit: Unit, columns: list[Column]) -> list[str] | None:
        """The names of a first line ending in a delimiter (`id,s,`) that the engine took for a
        row, naming the columns c1, c2, ... (its empty last fields read as text on every line, the
        line looks like the rows): the fields before the empty ones. None for any other file, and
        with --no-header."""
        if self.ctx.opts.header is False or not unnamed(columns):
            return None
        delimiter = self.ctx.opts.delimiter or ("," if unit.fmt.format == "CSV" else "\t")
        head = self.head(unit)
        names = head.names_before_end(delimiter)
        return names if names and len(head.fields(delimiter)) == len(columns) else None

    def refuse_unnamed(self, unit: Unit, columns: list[Column]) -> None:
        """SchemaError for a header that leaves a column unnamed (`a,,b`): the engine's header
        detection then takes it for a row, and its names would load as values. It is a header
        when the rows after it hold a number or a date where it holds a name."""
        delimiter = self.ctx.opts.delimiter or ("," if unit.fmt.format == "CSV" else "\t")
        head = self.head(unit)
        gaps = head.unnamed_at(delimiter)
        if not gaps or [c.name for c in columns] != [f"c{i}" for i in range(1, len(columns) + 1)]:
            return
        skip = f"input_format_{unit.fmt.format.lower()}_skip_first_lines"
        settings = {**self.ctx.format_settings(), skip: 1, "input_format_csv_detect_header": 0}
        expression = self.ctx.source.table_expression(unit, None, unit.fmt.format)
        rest = describe(self.ctx.target.engine, expression, f"{unit.key}: cannot infer the schema", None, settings)
        if any(f and "String" not in c.type for f, c in zip(head.fields(delimiter), rest, strict=False)):
            at = ", ".join(map(str, gaps))
            raise SchemaError(
                f"{unit.key}: the header line names no column at position {at}: name every column, "
                "or remove the line to load the file without names"
            )

    def named_fields(self, unit: Unit, fields: list[str]) -> list[str]:
        """A CSV/TSV header's fields without the unnamed ones a trailing delimiter makes
        (`id,s,`, as many exporters write), where no row holds a value there; any other field
        the header leaves unnamed is an error (its values would have no column). A first line
        whose named fields are not mostly table columns is data (`1,,x`): as it is."""
        if not fields or all(fields):
            return fields
        names = [f for f in fields if f]
        known = {c.name for c in self.ctx.input_columns()}
        if not names or 2 * len([f for f in names if f in known]) < len(names):
            return fields
        named = len(fields)
        while named and not fields[named - 1]:
            named -= 1
        if all(fields[:named]):
            text = ", ".join(f"c{i} String" for i in range(1, len(fields) + 1))
            rows = self.ctx.source.table_expression(unit, text, "CSV" if unit.fmt.format == "CSV" else "TSV")
            filled = " OR ".join(f"c{i} != ''" for i in range(named + 1, len(fields) + 1))
            found = self.ctx.target.engine.rows(
                f"SELECT count() AS n FROM (SELECT * FROM {rows} LIMIT 1000000000 OFFSET 1) WHERE {filled}",
                self.ctx.format_settings(),
                context=f"{unit.key}: reading its unnamed fields",
            )
            if not int(found[0]["n"]):
                return fields[:named]
        at = ", ".join(str(i + 1) for i, f in enumerate(fields) if not f)
        raise SchemaError(f"{unit.key}: the header line names no field at position {at}, yet rows hold values there")
