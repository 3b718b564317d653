"""What a design run is asked and what its proposal holds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from chute.sql import TableName


@dataclass(frozen=True)
class ColumnChoice:
    """One column of the proposal: its type and codec, and why."""

    name: str
    inferred: str
    """The type the engine inferred from the input (before any choice)."""
    type: str
    codec: str
    """The CODEC(...) arguments; "" is the server default (LZ4)."""
    reason: str
    codec_reason: str
    null_marker: str = ""
    """The text that stands for NULL in the files (`NA`), kept in the column's comment for the load."""


@dataclass(frozen=True)
class LayoutTrial:
    """One ORDER BY tried: the sample written into it and measured."""

    name: str
    order_by: str
    bytes_on_disk: int
    rows: int
    column_bytes: Mapping[str, int]
    """Compressed bytes per column, with the codecs chosen for this layout."""
    codecs: Mapping[str, str] = field(default_factory=dict)

    @property
    def bytes_per_row(self) -> float:
        return self.bytes_on_disk / self.rows if self.rows else 0.0


@dataclass(frozen=True)
class Proposal:
    """A measured CREATE TABLE and the evidence for it."""

    table: str
    ddl: str
    columns: tuple[ColumnChoice, ...]
    layouts: tuple[LayoutTrial, ...]
    winner: str
    why: str
    order_by: str
    partition_by: str | None
    partition_reason: str
    sample_rows: int
    sample_complete: bool
    """True when the sample is every row of every file (types are then exact, no headroom)."""
    files_sampled: int
    files_total: int
    final_bytes_on_disk: int
    """The sample written into the proposed DDL itself (which also proves the DDL valid)."""
    seconds: float
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Request:
    """What one design run was asked, with its deadlines (monotonic seconds)."""

    expressions: list[str]
    table: TableName
    sample_rows: int
    settings: dict[str, str | int | float]
    started: float
    budget: float
    enums: bool
    provenance: bool

    @property
    def sample_deadline(self) -> float:
        return self.started + self.budget * 0.4

    @property
    def layout_deadline(self) -> float:
        return self.started + self.budget * 0.85
