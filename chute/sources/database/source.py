"""`DatabaseSource`: units of PostgreSQL and MySQL tables, and the SQL that reads them."""

from __future__ import annotations

import itertools
import os
import re
import time

from chute.cores import usable_cores
from chute.engine import Engine, shared_engine
from chute.errors import UsageError
from chute.schema import Column
from chute.sources.base import CheckedRead, SourceBase, SourceOptions
from chute.sources.database.part import Part, merged_filter
from chute.sources.database.planner import Planner
from chute.sources.database.table import DatabaseTable
from chute.sources.database.url import READ_DATABASE, parse_url
from chute.sources.dbplan import (
    Streams,
    choose_streams,
    is_local,
)
from chute.sql import quote_ident, quote_str
from chute.units import Unit


class DatabaseSource(SourceBase):
    """Tables of PostgreSQL or MySQL servers, read in key ranges by the engine."""

    def __init__(self, patterns: list[str], options: SourceOptions) -> None:
        if not patterns:
            raise UsageError("no source given")
        self.options = options
        self.urls = [parse_url(p, options.password_file) for p in patterns]
        self.parts: dict[str, Part] = {}
        self.notes: list[str] = []
        """For the report: how many streams read each table, and why."""
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            # The target's engine (chDB holds one per process), else one in memory.
            self._engine = shared_engine()
        return self._engine

    def units(self) -> list[Unit]:
        zone = str(self.engine.rows("SELECT timezone() AS tz")[0]["tz"])
        if any(u.dialect == "postgresql" for u in self.urls):
            postgres_session(zone)
        now = time.time_ns()
        units: list[Unit] = []
        for i, url in enumerate(self.urls):
            table = DatabaseTable(url, self.options, self.engine, zone)
            planned = Planner(table, self.options.loaded, now, self.parts, dict(self.options.loaded_rows)).plan()
            if planned:
                self.notes.extend(table.measure_numerics())
                table.read_as_text(f"{quote_ident(READ_DATABASE)}.{quote_ident(f't{i}')}")
            table.streams = self._streams(table)
            ranges = sum(1 for u in planned if self.parts[u.key].key)
            if planned:
                self.notes.append(table.streams.note(url.display, ranges))
                self.notes.extend(unchecked_notes(table))
            units.extend(planned)
        return units

    @staticmethod
    def _streams(table: DatabaseTable) -> Streams:
        """Connections that read the table's ranges at once (see `choose_streams`)."""
        url, cores = table.url, usable_cores()
        local = is_local(url.host)
        # The server's workers matter only when it has cores of its own and this side has more than one.
        server = None if url.streams is not None or local or cores == 1 else table.server_workers()
        return choose_streams(cores, local, server, url.streams)

    def close(self) -> None:
        """Drop the tables the load read through (see `read_as_text`)."""
        if self._engine is not None and any(p.table.source != p.table.url.function() for p in self.parts.values()):
            self._engine.execute(f"DROP DATABASE IF EXISTS {quote_ident(READ_DATABASE)}")

    def table_expression(self, unit: Unit, structure: str | None, fmt_name: str | None = None) -> str:
        part = self.parts[unit.key]
        extras = () if structure is None else (f"{part.row_number} AS `_chute_row`",)
        return f"({part.table.select(part.where, structure, extras)})"

    def combined_expression(
        self, units: list[Unit], structure: str, fmt_name: str | None = None
    ) -> tuple[str, dict[str, str]] | None:
        """A batch of units read by a few connections, not one each.

        The engine opens every branch of a UNION ALL at once, so key ranges of a
        table share its `streams` branches: each reads its ranges' filters (adjacent
        ones merged, pushed down to the server as one scan) and names each row's range.
        """
        groups: dict[tuple[int, str], list[tuple[Unit, Part]]] = {}
        branches: list[list[tuple[Unit, Part]]] = []
        for unit in units:
            part = self.parts[unit.key]
            if part.key:
                groups.setdefault((id(part.table), part.key), []).append((unit, part))
            else:
                branches.append([(unit, part)])  # numbered by the order rows arrive: read alone
        for members in groups.values():
            streams = members[0][1].table.streams.count
            # Neighbouring ranges in one branch: their filters merge into one range.
            members.sort(key=lambda m: (m[1].window, m[1].start))
            step = -(-len(members) // min(len(members), streams))
            branches.extend(members[i : i + step] for i in range(0, len(members), step))
        selects = [self._branch(members, structure or None) for members in branches]
        # Every unit of a run has the planning time as its mtime.
        mtime = f"fromUnixTimestamp64Nano({units[0].mtime_ns}, 'UTC')"
        return "(" + " UNION ALL ".join(selects) + ")", {"_source": "`_chute_unit`", "_source_mtime": mtime}

    @staticmethod
    def _branch(members: list[tuple[Unit, Part]], structure: str | None) -> str:
        first = members[0][1]
        if len(members) == 1:
            # LowCardinality like the other branches': a UNION ALL of it and String would be String.
            unit_name = f"toLowCardinality({quote_str(members[0][0].key)})"
            extras = (f"{unit_name} AS `_chute_unit`", f"{first.row_number} AS `_chute_row`")
            return first.table.select(merged_filter([first]) if first.key else first.where, structure, extras)
        parts = [p for _, p in members]
        k = quote_ident(first.key)
        if all(a.window == b.window and a.end == b.start for a, b in itertools.pairwise(parts)):
            # Adjacent ranges (the usual batch): the first range whose end is past the key, one
            # comparison each (the filter has already dropped keys outside them all).
            which = "".join(f"{k} < {p.end}, {i}, " for i, p in enumerate(parts[:-1])) + str(len(parts) - 1)
            starts = "".join(f"{k} < {p.end}, {p.start}, " for p in parts[:-1])
            index, start = f"multiIf({which})", f"multiIf({starts}{parts[-1].start})"
        else:
            which = ", ".join(f"{p.condition}, {i}" for i, p in enumerate(parts))
            starts = ", ".join(f"{p.condition}, {p.start}" for p in parts)
            index, start = f"multiIf({which}, {len(parts)})", f"multiIf({starts}, 0)"
        # The range's name from its number made LowCardinality: the engine maps the few distinct
        # numbers to names, not every row. A multiIf of the names themselves wrote a String per
        # row (3 M rows in 12 ranges: 0.29 s of CPU against 0.05 s); so did an array of names.
        numbers = ", ".join(str(i) for i in range(len(parts)))
        names = ", ".join(quote_str(u.key) for u, _ in members)
        unit = f"transform(toLowCardinality({index}), [{numbers}], [{names}], '')"
        extras = (f"{unit} AS `_chute_unit`", f"toUInt64(toInt128({k}) - {start} + 1) AS `_chute_row`")
        return first.table.select(merged_filter(parts), structure, extras)

    def checked_read(self, unit: Unit, name: str, type_sql: str) -> CheckedRead | None:
        """Columns read as text (timestamps, dates, numerics): converted exactly, or the row is a reject."""
        return self.parts[unit.key].table.checked_read(name, type_sql)

    def declared_columns(self, unit: Unit) -> list[Column] | None:
        return [Column(c.name, c.type) for c in self.parts[unit.key].table.columns]

    def unchanged(self, unit: Unit) -> bool:
        """True: a range is read once, as it is then; recounting it before the commit would read it twice."""
        return True

    def row_number_expression(self, unit: Unit) -> str:
        return "`_chute_row`"

    def needs_serial_read(self, unit: Unit) -> bool:
        """False: each range's rows are numbered by their key (or, alone, in the one stream the server sends)."""
        return False


def postgres_session(zone: str) -> None:
    """Settings for the engine's PostgreSQL connections (libpq reads PGOPTIONS at connect).

    The engine parses timestamp text in its own time zone and ignores the offset,
    so the server must write timestamptz in that zone; ISO dates, hex bytea and
    exact floats (servers before 12) are what its parser expects.
    """
    wanted = f"-c TimeZone={zone} -c DateStyle=ISO -c bytea_output=hex -c extra_float_digits=3"
    current = os.environ.get("PGOPTIONS", "")
    if wanted not in current:
        os.environ["PGOPTIONS"] = f"{current} {wanted}".strip()


def unchecked_notes(table: DatabaseTable) -> list[str]:
    """What the report must say of columns whose values the engine's own reader takes without
    chute's exact check: all of them under --where (its SQL compares the columns as their
    types), and arrays of numerics, dates and times (read element by element by the engine)."""
    shown = table.url.display
    notes = []
    if table.options.where:
        names = [c.name for c in table.columns if c.exact]
        if names:
            notes.append(
                f"{shown}: with --where, columns {', '.join(names)} are read as the engine reads them, "
                "unchecked (a MySQL zero date is 1970-01-01, digits past a numeric's scale are cut)"
            )
    arrays = [c.name for c in table.columns if re.search(r"Array\((Nullable\()?(Decimal|Date|DateTime)", c.raw)]
    if arrays:
        notes.append(
            f"{shown}: array columns {', '.join(arrays)} are read as the engine reads them, unchecked "
            "(digits past 19 decimals are cut, dates BC lose their era, a NULL array is empty)"
        )
    return notes
