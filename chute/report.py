"""What a load did: per-file results, totals, and their text and JSON forms."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class _TextEnum(str, Enum):
    """Members are their text: `state == "loaded"` holds, JSON and f-strings show "loaded"."""

    def __str__(self) -> str:
        return str(self.value)


class FileState(_TextEnum):
    """What this run did with a file (`FileResult.state`)."""

    LOADED = "loaded"
    """Its rows are in the table (its bad rows in `<table>_rejects`)."""
    SKIPPED = "skipped"
    """Loaded before and unchanged (the ledger says so): nothing done."""
    FAILED = "failed"
    """Not loaded; `FileResult.error` says why. A re-run tries it again."""


class UnitState(_TextEnum):
    """A file's state in the ledger, as `chute.status()` and `chute status` give it."""

    DONE = "done"
    """Loaded, by the load named in `load_id`."""
    STARTED = "started"
    """A load began it and did not finish (under way, or killed): the next run loads it again,
    once (its rows of the interrupted try are removed first)."""
    FAILED = "failed"
    """The last load failed it (`last_error` says why): the next run tries again."""
    CLAIMED = "claimed"
    """A worker holds it now and has not started writing it (several workers on one job)."""
    DROPPED = "dropped"
    """Its table was dropped since: the next run loads it again."""
    FORGOTTEN = "forgotten"
    """`chute forget` deleted its rows: the next run loads it as a new file."""


@dataclass
class FileResult:
    source: str
    state: FileState
    """loaded, skipped or failed (a `FileState`, comparable to its text)."""
    rows_loaded: int = 0
    rows_rejected: int = 0
    bytes_in: int = 0
    error: str = ""
    rows_defaulted: int = 0
    """Loaded rows with a missing value (JSON null or absent key, a NULL in a typed file) that
    took its column's default, the column not being Nullable."""

    @property
    def rows_read(self) -> int:
        """This run's rows of the file: loaded or rejected (a skipped file: 0)."""
        return self.rows_loaded + self.rows_rejected

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "rows_read": self.rows_read}


@dataclass
class LoadReport:
    load_id: str
    table: str
    target: str
    files: list[FileResult] = field(default_factory=list)
    seconds: float = 0.0
    table_rows: int = 0
    table_bytes_on_disk: int = 0
    ddl: str | None = None
    notes: list[str] = field(default_factory=list)
    peak_rss_bytes: int = 0
    bytes_sent: int = 0
    server_round_trips: int = 0
    """Requests to a server target (statements, inserts, tries), counted to keep fixed costs in view."""
    methods: dict[str, int] = field(default_factory=dict)
    """Server targets: units loaded per method (client-convert, server-parse, server-side)."""
    method_why: list[str] = field(default_factory=list)
    """Why each method ran ("server-parse: ...")."""
    defaulted_columns: list[str] = field(default_factory=list)
    """The columns whose missing values took their default (see `rows_defaulted`)."""

    @property
    def files_total(self) -> int:
        return len(self.files)

    def _count(self, state: str) -> int:
        return sum(1 for f in self.files if f.state == state)

    @property
    def files_loaded(self) -> int:
        return self._count("loaded")

    @property
    def files_skipped(self) -> int:
        return self._count("skipped")

    @property
    def files_failed(self) -> int:
        return self._count("failed")

    @property
    def rows_loaded(self) -> int:
        return sum(f.rows_loaded for f in self.files)

    @property
    def rows_rejected(self) -> int:
        return sum(f.rows_rejected for f in self.files)

    @property
    def rows_defaulted(self) -> int:
        return sum(f.rows_defaulted for f in self.files)

    @property
    def defaulted_line(self) -> str:
        """One line on the rows whose missing values took a default ('' for none)."""
        n = self.rows_defaulted
        if not n:
            return ""
        had = "row had" if n == 1 else "rows had"
        names = ", ".join(self.defaulted_columns)
        return f"{n:,} {had} a missing value that took the column default (columns {names})"

    @property
    def skipped_line(self) -> str:
        """Why files were skipped, and the command that loads them again."""
        skipped = [f.source for f in self.files if f.state == "skipped"]
        which = skipped[0] if len(skipped) == 1 else "FILE..."
        target = "" if self.target in ("./chute.db", "chute.db") else f" --target {self.target}"
        return (
            f"{len(skipped)} loaded before, as the ledger says (chute status: when); to load again: "
            f"chute forget {which} --table {self.table}{target}"
        )

    @property
    def rows_read(self) -> int:
        return self.rows_loaded + self.rows_rejected

    @property
    def bytes_in(self) -> int:
        return sum(f.bytes_in for f in self.files if f.state == "loaded")

    @property
    def rows_per_s(self) -> float:
        return self.rows_read / self.seconds if self.seconds > 0 else 0.0

    @property
    def ok(self) -> bool:
        return self.files_failed == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "load_id": self.load_id,
            "table": self.table,
            "target": self.target,
            "files_total": self.files_total,
            "files_loaded": self.files_loaded,
            "files_skipped": self.files_skipped,
            "files_failed": self.files_failed,
            "rows_read": self.rows_read,
            "rows_loaded": self.rows_loaded,
            "rows_rejected": self.rows_rejected,
            "rows_defaulted": self.rows_defaulted,
            "defaulted_columns": self.defaulted_columns,
            "bytes_in": self.bytes_in,
            "seconds": round(self.seconds, 3),
            "rows_per_s": round(self.rows_per_s, 1),
            "table_rows": self.table_rows,
            "table_bytes_on_disk": self.table_bytes_on_disk,
            "bytes_sent": self.bytes_sent,
            "server_round_trips": self.server_round_trips,
            "methods": self.methods,
            "method_why": self.method_why,
            "peak_rss_bytes": self.peak_rss_bytes,
            "ddl": self.ddl,
            "notes": self.notes,
            "files": [f.to_dict() for f in self.files],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def render_text(report: LoadReport) -> list[tuple[str, str]]:
    """The final report as (label, value) rows, for any renderer."""
    mib_s = report.bytes_in / 2**20 / report.seconds if report.seconds > 0 else 0.0
    return [
        ("table", report.table),
        ("target", report.target),
        ("load id", report.load_id),
        (
            "files",
            f"{report.files_total} total, {report.files_loaded} loaded, "
            f"{report.files_skipped} skipped, {report.files_failed} failed",
        ),
        *([("skipped", report.skipped_line)] if report.files_skipped else []),
        ("rows", f"{report.rows_read:,} read, {report.rows_loaded:,} loaded, {report.rows_rejected:,} rejected"),
        *([("defaults", report.defaulted_line)] if report.rows_defaulted else []),
        ("bytes in", human_bytes(report.bytes_in)),
        *([("bytes sent", human_bytes(report.bytes_sent))] if report.bytes_sent else []),
        *([("round trips", f"{report.server_round_trips:,} to the server")] if report.server_round_trips else []),
        *[("method", f"{m}: {n:,} file{'s' if n != 1 else ''}") for m, n in report.methods.items()],
        *[("why", why) for why in report.method_why],
        ("seconds", f"{report.seconds:.2f}"),
        ("speed", f"{report.rows_per_s:,.0f} rows/s, {mib_s:.1f} MiB/s"),
        ("table", f"{report.table_rows:,} rows, {human_bytes(report.table_bytes_on_disk)} on disk"),
    ]
