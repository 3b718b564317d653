"""What one unit reads of a database table: a filter over its raw columns, a key range."""

from __future__ import annotations

from dataclasses import dataclass

from chute.sources.database.table import DatabaseTable
from chute.sql import quote_ident


@dataclass(frozen=True)
class Part:
    """What one unit reads of its table: a filter over the raw columns (`window`: a --cursor's) and,
    for a key range, the key column and [start, end)."""

    table: DatabaseTable
    window: str = ""
    key: str = ""  # the key column of a key range ("": the unit is no key range)
    start: int = 0
    end: int = 0

    @property
    def where(self) -> str:
        return " AND ".join(t for t in (self.window, self.key_filter(self.start, self.end)) if t)

    def key_filter(self, start: int, end: int) -> str:
        if not self.key:
            return ""
        k = quote_ident(self.key)
        return f"{k} >= {start} AND {k} < {end}"

    @property
    def condition(self) -> str:
        return self.where or "1"

    @property
    def row_number(self) -> str:
        """`_source_row`: the key's offset in its range (+1), so the row is found again from
        `_source` and `_source_row` alone and ranges read together number alike; without a
        key, the row's number in the one stream the server sends."""
        if self.key:
            return f"toUInt64(toInt128({quote_ident(self.key)}) - {self.start} + 1)"
        return "rowNumberInAllBlocks() + 1"


def merged_filter(parts: list[Part]) -> str:
    """The filter that reads key ranges together: adjacent ranges (same window) as one, so the
    server tests each row against one range, not one per unit."""
    spans: list[tuple[str, int, int]] = []
    for p in sorted(parts, key=lambda p: (p.window, p.start)):
        if spans and spans[-1][0] == p.window and spans[-1][2] == p.start:
            spans[-1] = (p.window, spans[-1][1], p.end)
        else:
            spans.append((p.window, p.start, p.end))
    first = parts[0]
    span = first.table.key_span
    if len(spans) == 1 and not spans[0][0] and span is not None and spans[0][1] <= span[0] and spans[0][2] >= span[1]:
        # The whole table as planned: the server sends it all (it spends ~7 % of a COPY's time on
        # a range filter), the engine drops rows added past the ranges since (identity() is not
        # pushed down to the server).
        k = f"identity({quote_ident(first.key)})"
        return f"{k} >= {spans[0][1]} AND {k} < {spans[0][2]}"
    terms = [" AND ".join(t for t in (w, first.key_filter(a, b)) if t) for w, a, b in spans]
    return terms[0] if len(terms) == 1 else " OR ".join(f"({t})" for t in terms)
