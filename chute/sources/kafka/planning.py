"""Planning a run: the units of offsets to load, from the ledger and the partitions' offsets."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from chute.formats import FileFormat
from chute.sources.base import SourceOptions
from chute.sources.kafka.client import Admin
from chute.sources.kafka.spec import KafkaSpec, UnitRange, parse_key, unit_key
from chute.units import Unit

TARGET_UNIT_BYTES = 16 * 2**20
"""A unit's size when `batch` is not given (estimated from a message at its end)."""
MIN_UNIT_MESSAGES = 1000
MAX_UNIT_MESSAGES = 2_000_000


@dataclass
class _Found:
    """What the partitions hold, gathered partition by partition."""

    planned: list[tuple[UnitRange, str]] = field(default_factory=list)  # (range, key) in load order
    new_by_partition: list[list[UnitRange]] = field(default_factory=list)
    samples: dict[tuple[str, int], int] = field(default_factory=dict)
    commit: list[tuple[str, int, int]] = field(default_factory=list)


class Planner:
    """Plans the units of one run (KafkaSource.units); what a person should hear goes to `notes`."""

    def __init__(
        self, spec: KafkaSpec, options: SourceOptions, admin: Admin, fmt: FileFormat, notes: list[str]
    ) -> None:
        self.spec = spec
        self.options = options
        self.admin = admin
        self.fmt = fmt
        self.notes = notes

    def _known(self) -> dict[tuple[str, int], list[tuple[UnitRange, str, str]]]:
        """Ledger units of these topics by partition, whatever broker address named them."""
        known: dict[tuple[str, int], list[tuple[UnitRange, str, str]]] = {}
        for key, state in self.options.loaded:
            found = parse_key(key)
            if found is not None and found.topic in self.spec.topics:
                known.setdefault((found.topic, found.partition), []).append((found, state, key))
        return known

    def _per_unit(self, sample_bytes: int) -> int:
        if self.spec.batch:
            return self.spec.batch
        target = min(self.options.split_bytes or TARGET_UNIT_BYTES, TARGET_UNIT_BYTES)
        return max(MIN_UNIT_MESSAGES, min(MAX_UNIT_MESSAGES, target // max(1, sample_bytes or 200)))

    def plan(self) -> list[tuple[Unit, UnitRange]]:
        """The run's units in load order, each with the offsets it names."""
        known = self._known()
        found = _Found()
        for topic, partitions in self.admin.partitions().items():
            for partition in partitions:
                self._partition(topic, partition, known.get((topic, partition), []), found)
        new = self._new(found)
        planned = found.planned + [(r, unit_key(r.host, r.topic, r.partition, r.start, r.end)) for r in new]
        if self.spec.start == "latest" and not known and not planned:
            self.notes.append("start=latest: nothing to load in a run that stops at the end; use a time or --follow")
        if self.spec.group and found.commit:
            self.admin.commit(found.commit, self.notes)
        return [(self._unit(r, key, found.samples), r) for r, key in planned]

    def _partition(self, topic: str, partition: int, entries: list[tuple[UnitRange, str, str]], found: _Found) -> None:
        """One partition: its unfinished units again, then new ones from where the ledger stops."""
        low, high = self.admin.watermarks(topic, partition)
        redo = sorted((r for r, state, _ in entries if state != "done"), key=lambda r: r.start)
        keys = {r: k for r, _, k in entries}
        found.planned += [(r, keys[r]) for r in redo]
        where = f"kafka://{self.spec.host}/{topic}/{partition}"
        gaps: list[tuple[int, int]] = []
        if entries:
            position = max(r.end for r, _, _ in entries)
            gaps = self._gaps(topic, partition, [(r.start, r.end) for r, _, _ in entries], low, high, where)
            starts = [r.start for r in redo] + [a for a, _ in gaps]
            found.commit.append((topic, partition, min(starts, default=position)))
        else:
            position = self.admin.start_offset(topic, partition, low, high)
        if position < low:
            self.notes.append(
                f"{where}: offsets {position} to {low - 1} were deleted from the topic before they "
                f"were loaded; going on at {low}"
            )
            position = low
        if position > high:
            self.notes.append(
                f"{where}: the ledger has offsets up to {position} but the partition ends at {high} "
                "(topic deleted and made again?); nothing loaded from it"
            )
            return
        if position < high:
            gaps.append((position, high))
        if not gaps:
            return
        _, sample = self.admin.probe(topic, partition, gaps[-1][0], gaps[-1][1])
        found.samples[(topic, partition)] = sample
        step = self._per_unit(sample)
        found.new_by_partition.append(
            [
                UnitRange(self.spec.host, topic, partition, a, min(a + step, end))
                for start, end in gaps
                for a in range(start, end, step)
            ]
        )

    def _gaps(
        self, topic: str, partition: int, known: list[tuple[int, int]], low: int, high: int, where: str
    ) -> list[tuple[int, int]]:
        """Offsets below the ledger's largest that no unit of it covers: a killed run's batches
        start out of order (workers sharing a job begin at a random batch), so ranges it planned
        but never recorded can lie below recorded ones; none of their rows was written (a unit is
        recorded as started before its rows). From where the job started (`start`; where it is
        `latest`, the first range known) up to the largest offset known."""
        floor = min(a for a, _ in known)
        if self.spec.start != "latest":
            floor = min(floor, self.admin.start_offset(topic, partition, low, high))
        gaps = []
        at = floor
        for a, b in sorted(known):
            if a > at:
                gaps.append((at, a))
            at = max(at, b)
        kept = []
        for a, b in gaps:
            if a < low:
                self.notes.append(
                    f"{where}: offsets {a} to {min(b, low) - 1} were deleted from the topic before they were loaded"
                )
                a = low
            if a < b:
                kept.append((a, b))
        return kept

    def _new(self, found: _Found) -> list[UnitRange]:
        """New units round-robin over partitions, so a capped run moves every partition on."""
        new: list[UnitRange] = []
        for i in range(max((len(p) for p in found.new_by_partition), default=0)):
            new += [p[i] for p in found.new_by_partition if i < len(p)]
        if self.spec.max_units is not None:
            new = new[: max(0, self.spec.max_units - len(found.planned))]
        return new

    def _unit(self, r: UnitRange, key: str, samples: dict[tuple[str, int], int]) -> Unit:
        """The unit of offsets `r`: its time and size from a probe of its last message."""
        stamp, sample = self.admin.probe(r.topic, r.partition, r.start, r.end)
        sample = sample or samples.get((r.topic, r.partition), 0) or 200
        return Unit(
            key=key,
            size=max(1, (r.end - r.start) * sample),
            mtime_ns=(stamp or int(time.time() * 1000)) * 1_000_000,
            fmt=self.fmt,
        )
