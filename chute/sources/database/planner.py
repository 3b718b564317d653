"""Units of a table from the ledger and the key's bounds: new ranges, repairs, cursor windows."""

from __future__ import annotations

import dataclasses
import re

from chute.errors import UsageError
from chute.sources.database.columns import split_nullable
from chute.sources.database.part import Part
from chute.sources.database.table import DatabaseTable
from chute.sources.database.url import INTEGER_TYPE, RANGE_PART, WINDOW_PART
from chute.sources.dbplan import (
    estimate_cuts,
)
from chute.sql import quote_ident
from chute.units import Unit


def fragment_parts(fragment: str) -> dict[str, re.Match[str]]:
    """{"range": ..., "window": ...} of a unit key's fragment (`c=(v0,v1]&k=[a,b)`)."""
    found: dict[str, re.Match[str]] = {}
    for piece in fragment.split("&") if fragment else []:
        key_range, window = RANGE_PART.match(piece), WINDOW_PART.match(piece)
        if key_range:
            found["range"] = key_range
        elif window:
            found["window"] = window
    return found


RECOUNTED_RANGES = 2
"""Done key ranges counted again each run, the newest first (see Planner._recounted)."""


class Planner:
    """The units of one table for this run: repairs of unfinished ones, then what is new."""

    def __init__(
        self,
        table: DatabaseTable,
        loaded: tuple[tuple[str, str], ...],
        now: int,
        parts: dict[str, Part],
        loaded_rows: dict[str, int] | None = None,
    ):
        self.table = table
        self.loaded_rows = loaded_rows or {}
        self.now = now
        self.parts = parts
        self.base = table.url.display
        self.known = [
            (key, state, fragment_parts(key[len(self.base) + 1 :]))
            for key, state in loaded
            if key == self.base or key.startswith(self.base + "#")
        ]
        self.rows_per_range = table.url.rows_per_range

    def plan(self) -> list[Unit]:
        self._check_mode()
        units = self._repairs()
        repaired = {u.key for u in units}
        if self.table.cursor is not None:
            new = self._window()
        elif self.table.key is not None:
            new = self._recounted() + self._ranges()
        else:
            new = self._whole()
        return units + [u for u in new if u.key not in repaired]

    def _mode(self) -> str:
        if self.table.cursor is not None:
            return f"--cursor {self.table.cursor.name}"
        if self.table.key is not None:
            return f"ranges of {self.table.key.name}"
        return "the whole table"

    def _check_mode(self) -> None:
        """Units of another kind (another key, a cursor, the whole table) would load rows twice."""
        t = self.table
        for key, _state, parts in self.known:
            window, key_range = parts.get("window"), parts.get("range")
            if t.cursor is not None:
                ok = window is not None and window.group("col") == t.cursor.name
            elif t.key is not None:
                ok = window is None and key_range is not None and key_range.group("col") == t.key.name
            else:
                ok = not parts
            if not ok:
                earlier = key.split("#", 1)[1] if "#" in key else "the whole table"
                raise UsageError(
                    f"{self.base}: loaded into this table before as {earlier!r}, now as {self._mode()}: "
                    "rows would load twice; keep the earlier --split-by/--cursor or load into a new table"
                )

    def _part(self, parts: dict[str, re.Match[str]]) -> Part:
        """The filter (over raw columns) a unit key stands for."""
        t = self.table
        terms = []
        window = parts.get("window")
        if window is not None and t.cursor is not None:
            c = quote_ident(t.cursor.name)
            if window.group("v0"):
                terms.append(f"{c} > {t.literal(t.cursor, window.group('v0'))}")
            terms.append(f"{c} <= {t.literal(t.cursor, window.group('v1'))}")
        key_range = parts.get("range")
        if key_range is None:
            return Part(t, " AND ".join(terms))
        start, end = int(key_range.group("a")), int(key_range.group("b"))
        return Part(t, " AND ".join(terms), key_range.group("col"), start, end)

    def _unit(self, fragment: str, rows: int) -> Unit:
        # size > 0: the loader takes a 0-size unit for an empty file; an interrupted range
        # that is empty now must still run, so that what it left is deleted.
        key = f"{self.base}#{fragment}" if fragment else self.base
        self.parts[key] = self._part(fragment_parts(fragment))
        return Unit(key=key, size=max(rows, 1), mtime_ns=self.now, fmt=self.table.fmt, etag=fragment or "table")

    def _recounted(self) -> list[Unit]:
        """The newest done ranges, counted again. A row whose key a writer took before the run
        that loaded its range, but committed after it (1001 committed after 1002 was loaded),
        lands below the largest key loaded: no new range covers it. Where such a range's count
        differs from the rows the ledger has for it, it is planned again as changed (the
        newest only: a late commit sits just below the largest key of the runs before)."""
        newest = sorted(
            (
                (int(p["range"].group("b")), key)
                for key, state, p in self.known
                if state == "done" and "range" in p and "window" not in p and key in self.loaded_rows
            ),
            reverse=True,
        )[:RECOUNTED_RANGES]
        if not newest:
            return []
        fragments = [key[len(self.base) + 1 :] for _, key in newest]
        units = []
        for fragment, (_, key), now in zip(
            fragments, newest, self._count(fragments, "counting the newest ranges"), strict=True
        ):
            if now != self.loaded_rows[key]:
                # (its own identity, never the one loaded: the plan sees a changed unit, --on-change)
                units.append(dataclasses.replace(self._unit(fragment, now), etag=f"{fragment}@{now}"))
        return units

    def _repairs(self) -> list[Unit]:
        """Units the ledger has as started or failed: planned again under the same key."""
        unfinished = [key for key, state, _ in self.known if state != "done"]
        if not unfinished:
            return []
        fragments = [key[len(self.base) + 1 :] for key in unfinished]
        return [
            self._unit(f, n) for f, n in zip(fragments, self._count(fragments, "counting unfinished rows"), strict=True)
        ]

    def _count(self, fragments: list[str], context: str) -> list[int]:
        """The rows each unit (by its key's fragment) holds now, in one read of their keys."""
        t = self.table
        conditions = [self._part(fragment_parts(f)).condition for f in fragments]
        counts = ", ".join(f"countIf({c}) AS c{i}" for i, c in enumerate(conditions))
        scope = " OR ".join(f"({c})" for c in conditions)
        row = t.rows(f"SELECT {counts} FROM {t.url.function()}{t.raw_filter(scope)}", context)[0]
        return [int(row[f"c{i}"]) for i in range(len(fragments))]

    def _whole(self) -> list[Unit]:
        """No key: one unit, recounted each run (its identity is the row count)."""
        t = self.table
        rows = int(t.rows(f"SELECT count() AS n FROM {t.url.function()}{t.raw_filter()}", "counting rows")[0]["n"])
        return [self._unit("", rows)] if rows or self.known else []

    def _ranges(self, window: str = "", stats: tuple[int, int, int | None] | None = None) -> list[Unit]:
        """New key ranges: every key the known ranges do not cover, up to the largest key now (+1).

        Without a cursor the bounds come from the server (min and max through the key's index,
        the row estimate from its catalog): no row is read to plan. Keys below the largest range
        end known can still be new: batches start out of order (workers sharing a job begin at
        a random batch, a worker's threads race), so a kill can leave ranges that were planned
        but never recorded between or before recorded ones. No row of such a gap was written
        (a unit is recorded as started before its rows), so it is planned again.
        """
        t = self.table
        assert t.key is not None
        known = self._known_ranges(window)
        if stats is None:
            stats = t.key_bounds(None)
            if stats is None:
                return []
        lo, hi, rows = stats
        if not known and not window:
            t.key_span = (lo, hi + 1)
        prefix = f"{window}&" if window else ""
        units = []
        for g0, g1 in _gaps(known, lo, hi):
            share = None if rows is None else min(rows, -(-rows * (g1 - g0 + 1) // (hi - lo + 1)))
            for a, b, n in estimate_cuts(g0, g1, share, self.rows_per_range, t.unique_key):
                units.append(self._unit(f"{prefix}{t.key.name}=[{a},{b})", n))
        return units

    def _known_ranges(self, window: str = "") -> list[tuple[int, int]]:
        """[start, end) of the key ranges of `window` ("": outside cursor windows) in the ledger,
        in any state."""
        return sorted(
            (int(p["range"].group("a")), int(p["range"].group("b")))
            for _, _, p in self.known
            if "range" in p and (p["window"].group(0) if "window" in p else "") == window
        )

    def _window(self) -> list[Unit]:
        """--cursor: rows past the largest cursor value loaded before, up to the largest now."""
        t = self.table
        assert t.cursor is not None
        c = quote_ident(t.cursor.name)
        numeric = INTEGER_TYPE.match(split_nullable(t.cursor.raw)[1]) is not None
        windows = [p["window"] for _, _, p in self.known if "window" in p]
        v0 = ""
        if windows:
            newest = max(windows, key=lambda w: int(w.group("v1")) if numeric else w.group("v1"))
            gaps = self._newest_window_gaps(newest) if t.key is not None else []
            if gaps:
                return gaps  # the newest window is finished before a new one starts
            v0 = newest.group("v1")
        after = f"{c} > {t.literal(t.cursor, v0)}" if v0 else f"{c} IS NOT NULL"
        key_stats = ""
        if t.key is not None:
            k = quote_ident(t.key.name)
            key_stats = f", toString(min({k})) AS lo, toString(max({k})) AS hi"
        got = t.rows(
            f"SELECT toString(max({t.cursor.expr})) AS v1, count() AS n{key_stats} "
            f"FROM {t.url.function()}{t.raw_filter(after)}",
            "reading the cursor",
        )[0]
        total = int(got["n"])
        if total == 0:
            return []
        v1 = str(got["v1"])
        window = f"{t.cursor.name}=({v0},{v1}]"
        if t.key is not None:
            return self._ranges(window, (int(got["lo"]), int(got["hi"]), total))
        return [self._unit(window, total)]

    def _newest_window_gaps(self, newest: re.Match[str]) -> list[Unit]:
        """Ranges of the newest window that no recorded range covers. A kill while its batches
        ran out of order can leave some unrecorded (no row of them written); only the newest
        window can, as a new window is planned only once the one before has no gap."""
        t = self.table
        assert t.cursor is not None and t.key is not None
        c, k = quote_ident(t.cursor.name), quote_ident(t.key.name)
        v0, v1 = newest.group("v0"), newest.group("v1")
        after = f"{c} > {t.literal(t.cursor, v0)}" if v0 else f"{c} IS NOT NULL"
        got = t.rows(
            f"SELECT toString(min({k})) AS lo, toString(max({k})) AS hi, count() AS n FROM {t.url.function()}"
            f"{t.raw_filter(f'{after} AND {c} <= {t.literal(t.cursor, v1)}')}",
            "reading the last window's keys",
        )[0]
        if int(got["n"]) == 0:
            return []
        return self._ranges(newest.group(0), (int(got["lo"]), int(got["hi"]), int(got["n"])))


def _gaps(known: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    """[g0, g1] (inclusive) spans of the keys lo..hi that no range of `known` (sorted [a, b))
    covers. The span past the last known range starts at its end, so ranges stay contiguous
    (keys in between are gone or never were)."""
    if not known:
        return [(lo, hi)] if lo <= hi else []
    gaps = []
    at = lo
    for a, b in known:
        if at < a and at <= hi:
            gaps.append((at, min(a - 1, hi)))
        at = max(at, b)
    last_end = max(b for _, b in known)
    if last_end <= hi:
        gaps.append((last_end, hi))
    return gaps
