"""After a batch failed: what to do next, as a decision the loader carries out.

The fallbacks for bad input, in order: one pass that skips bad rows (dirty JSON
lines into the embedded engine, tried once); the file the engine named alone
(the rest of the batch again at once); each file alone; then, for one file, the
careful pass (text formats: good rows in, bad rows to the rejects table) or the
unit fails with its reason. Transient errors go up: a re-run resumes.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from chute.errors import ChuteError, OutOfFiles, OutOfSpace, SchemaError, SourceError, UsageError
from chute.load.checks.typed import WIDE_READ_FORMATS
from chute.load.context import LoadContext
from chute.load.inference import ORDINARY_OBJECT
from chute.load.outcome import told_of
from chute.sources.base import CheckedValues
from chute.sql import quote_str
from chute.units import Unit

FILE_IN_ERROR = re.compile(r"\(in file/uri ([^)]+)\)")
UNKNOWN_FIELD = re.compile(r"Unknown field found while parsing \w+ format: ([^:\s]+)")
GONE = re.compile(r"HTTP response code: 404|No such file|FILE_DOESNT_EXIST|NoSuchKey|Not Found")
"""Engine errors of a unit that is no longer there."""
CAREFUL_FORMATS = frozenset({"JSONEachRow", "CSV", "TSV"})
"""Formats whose bad rows can be told apart from good ones by a careful pass."""
UNFIT_VALUE = re.compile(r"column .*: a value does not fit ")
"""chute's own check of a typed unit's values (chute.load.reads.Reads.checked_read) failed the read."""
SPLIT_FILES = 64
"""A failed batch of more files than this is split into parts (at most SPLIT_PARTS), each loaded
as a batch of its own, before any file of it is set aside or any pass skips bad rows: those reload
the rest of the batch at once, or read the batch a file at a time in one statement, which pays
on a few dozen files, not on thousands (a batch of many small files, chute.load.plan.batches)."""
SPLIT_PARTS = 16


class Step(enum.Enum):
    RAISE = "raise"
    """Not about the rows (transient, or a full disk on one file): the load stops; a re-run resumes."""
    TOLERANT = "tolerant"
    """One pass over the batch that skips bad rows and keeps them (chute.load.tolerant_pass)."""
    DEFER_CULPRIT = "defer"
    """The engine named the file: it alone takes the slow way later; the rest load again now."""
    SPLIT = "split"
    """Each file alone (a big batch: in parts, `split_parts`), to find the culprits; the good ones load."""
    ALONE = "alone"
    """One file: the careful pass where it can tell bad rows from good, else the unit fails."""
    CAREFUL = "careful"
    FAIL = "fail"


@dataclass(frozen=True)
class Decision:
    step: Step
    culprit: Unit | None = None
    error: ChuteError | None = None


def culprit(exc: ChuteError, batch: list[Unit]) -> Unit | None:
    """The unit an engine error names ("in file/uri PATH"), if it is a data error."""
    if isinstance(exc, SourceError):
        return None
    named = FILE_IN_ERROR.search(str(exc))
    if not named:
        return None
    name = named.group(1)
    # The engine names S3 objects as bucket/key and ranges of big files by their loopback URL.
    return next((u for u in batch if name in (u.key, u.source_name) or u.key == f"s3://{name}"), None)


class Recovery:
    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx

    def decide(self, batch: list[Unit], exc: ChuteError, tolerant_fits: bool) -> Decision:
        """What to do with a batch that did not load.

        A full disk is no row's fault: one file goes up at once; a batch is tried a
        file at a time (an insert reserves room for its whole block), never row by row.
        """
        if self.source_failed(batch, exc):
            exc = SourceError(str(exc))
        full = isinstance(exc, OutOfSpace)
        if not exc.terminal or (full and len(batch) == 1) or isinstance(exc, OutOfFiles):
            return Decision(Step.RAISE, error=exc)
        if len(batch) > SPLIT_FILES:
            return Decision(Step.SPLIT, error=exc)
        if not full and tolerant_fits:
            return Decision(Step.TOLERANT, error=exc)
        named = None if full else culprit(exc, batch)
        if len(batch) > 1 and named is not None:
            return Decision(Step.DEFER_CULPRIT, named, told_of(exc, batch, named))
        if len(batch) > 1:
            return Decision(Step.SPLIT, error=exc)
        return Decision(Step.ALONE, batch[0], exc)

    @staticmethod
    def split_parts(batch: list[Unit]) -> list[list[Unit]]:
        """The batches a failed batch splits into: each file alone, or for more than SPLIT_FILES
        files, at most SPLIT_PARTS parts of at least SPLIT_FILES files (a part that fails again
        splits again). One bad file among 10,000 costs two dozen batches, not 10,000."""
        if len(batch) <= SPLIT_FILES:
            return [[unit] for unit in batch]
        size = max(SPLIT_FILES, -(-len(batch) // SPLIT_PARTS))
        return [batch[i : i + size] for i in range(0, len(batch), size)]

    def source_failed(self, units: list[Unit], exc: ChuteError) -> bool:
        """A network failure reading remote units into this process's engine: the source's (a URL
        that cuts its body each time), not the target's; its unit fails alone, the others load."""
        return not exc.terminal and not self.ctx.is_server() and all("://" in u.key for u in units)

    def _only_in_odd_lines(self, unit: Unit, field: str) -> bool:
        """Whether no plain JSON object of the file has `field` (a table made from the file was
        inferred without its odd lines: chute.load.inference.ORDINARY_OBJECT)."""
        lines = self.ctx.source.table_expression(unit, "line String", "LineAsString")
        found = self.ctx.target.engine.rows(
            f"SELECT count() AS n FROM (SELECT 1 FROM {lines} WHERE position(line, {quote_str(field)}) > 0 "
            f"AND {ORDINARY_OBJECT} AND has(JSONExtractKeys(line), {quote_str(field)}) LIMIT 1)",
            context=f"{unit.key}: looking for field {field}",
        )
        return not int(found[0]["n"])

    def for_unit(self, unit: Unit, exc: ChuteError) -> Decision:
        """A file the fast path could not load: a careful pass if it is text, else it fails."""
        opts = self.ctx.opts
        gone = GONE.search(str(exc)) is not None
        if gone and not isinstance(exc, UsageError) and not self.ctx.source.unchanged(unit):
            # (the engine's words: a 404, or a file not found)
            message = f"{unit.key}: changed or removed during the load; run again to load it"
            return Decision(Step.FAIL, unit, SourceError(message))
        typed_unfit = (
            unit.fmt.format in WIDE_READ_FORMATS or isinstance(self.ctx.source, CheckedValues)
        ) and UNFIT_VALUE.search(str(exc)) is not None
        careful = (
            (unit.fmt.format in CAREFUL_FORMATS or typed_unfit)
            and not opts.strict
            and not isinstance(exc, (SourceError, UsageError))
            and self.ctx.source.unchanged(unit)
        )
        unknown = UNKNOWN_FIELD.search(str(exc))
        if unknown and careful and unit.fmt.format == "JSONEachRow" and self._only_in_odd_lines(unit, unknown.group(1)):
            return Decision(Step.CAREFUL, unit, exc)  # (the careful pass rejects those lines)
        if unknown:
            # A field the table lacks is a schema question, not a bad row.
            return Decision(
                Step.FAIL,
                unit,
                SchemaError(
                    f"{unit.key}: input field {unknown.group(1)} is not in table {self.ctx.table} "
                    "(use --add-columns to add it)"
                ),
            )
        return Decision(Step.CAREFUL if careful else Step.FAIL, unit, exc)
