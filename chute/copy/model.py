"""What a copy is asked (options) and what it reports, partition by partition."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

ProgressCallback = Callable[[int, int, int, int], None]
"""(units done, units to copy, rows copied, bytes copied) after each unit."""


@dataclass(frozen=True)
class CopyOptions:
    dest_table: str | None = None
    """`--as`: the destination table's name (default: the source's)."""
    partitions: tuple[str, ...] = ()
    """Copy only these partitions (partition ids or values as system.parts prints them)."""
    where: str | None = None
    """Copy only the rows matching this SQL condition (evaluated on the source)."""
    method: str = "auto"
    dry_run: bool = False
    workers: int | None = None
    """Units copied at once (default: 4 into a server, 2 into the embedded database)."""
    tries: int = 3
    """Copies of a unit whose figures differ (a source written meanwhile) before it fails."""
    rows_per_range: int = 2_000_000
    """A table without partitions is cut into key ranges of about this many rows."""
    cluster: str | None = None
    """The destination's cluster: a missing table is made ON CLUSTER, replicated (over several
    shards: `<table>_local` replicated, `<table>` Distributed over it by `shard_by`)."""
    shard_by: str = "rand()"
    """With `cluster` over several shards: the sharding key of the Distributed table made."""
    nodes: tuple[str, ...] = ()
    """Nodes of the source's cluster, http(s)://host:port: where a Distributed source's shards
    are listed (default: the cluster's hosts at the source's port)."""
    dest_nodes: tuple[str, ...] = ()
    """Nodes of the destination's cluster, http(s)://host:port: where a Distributed destination's
    shards are written (default: the cluster's hosts at the destination's port)."""
    via: str | None = None
    """The files method: a directory or s3://bucket/prefix/ where each partition's file goes."""
    s3_endpoint: str | None = None
    """For an s3:// `via`: an S3-compatible endpoint (default AWS_ENDPOINT_URL, else AWS)."""
    source_password_file: str | None = None
    dest_password_file: str | None = None
    insecure: bool = False


@dataclass
class UnitResult:
    """One partition (or key range) of the source and what became of it."""

    unit: str
    partition: str
    """The partition as system.parts prints it (`202401`, `'a'`); a key range for a range unit."""
    state: str
    """copied, skipped (unchanged since it was copied), failed, or (dry run) copy / skip."""
    rows: int = 0
    bytes: int = 0
    """The source's bytes on disk for the unit (its partition's, for a range: a share)."""
    source_rows: int | None = None
    source_checksum: str | None = None
    dest_rows: int | None = None
    dest_checksum: str | None = None
    tries: int = 0
    seconds: float = 0.0
    reason: str = ""


@dataclass
class CopyReport:
    source: str
    dest: str
    table: str
    dest_table: str
    method: str = ""
    method_reason: str = ""
    dry_run: bool = False
    created_table: bool = False
    ddl: str = ""
    units: list[UnitResult] = field(default_factory=list)
    wire_bytes: int = 0
    """Bytes chute moved between the ends (the stream method; 0 where the destination pulled)."""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def _count(self, state: str) -> list[UnitResult]:
        return [u for u in self.units if u.state == state]

    @property
    def copied(self) -> list[UnitResult]:
        return self._count("copied")

    @property
    def skipped(self) -> list[UnitResult]:
        return self._count("skipped")

    @property
    def failed(self) -> list[UnitResult]:
        return self._count("failed")

    @property
    def rows_copied(self) -> int:
        return sum(u.rows for u in self.copied)

    @property
    def bytes_copied(self) -> int:
        return sum(u.bytes for u in self.copied)

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok}
        out.update(asdict(self))
        out.update(
            partitions_copied=len(self.copied),
            partitions_skipped=len(self.skipped),
            partitions_failed=len(self.failed),
            rows_copied=self.rows_copied,
            bytes_copied=self.bytes_copied,
        )
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)
