"""Files that cannot go into one table, found before anything is made.

A folder of exports often holds files of several kinds (a Parquet dump beside an unrelated
CSV). Loaded as one, the table is made from the first file and every row of the others is
rejected. So before a table, a ledger or a database is made, each file's fields are read
cheaply (a CSV/TSV file's first lines, the keys of a JSON file's first objects, a typed
file's own schema) and the files are grouped: two files are of one group when they share a
field name; a CSV/TSV file also joins files (or the table) of as many fields, since such a
file may have no header line and load by position. An existing table joins the files that
share a column with it. More than one group: the load is refused (UsageError), naming each
group with its files and a command that loads it on its own.

A file whose fields cannot be read here is left out: its own load says what is wrong.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass

from chute.cores import usable_cores
from chute.engine import Engine
from chute.errors import ChuteError
from chute.formats import TEXT_FORMATS
from chute.load.options import LoadOptions
from chute.schema import PROVENANCE_NAMES, Column, describe, spread
from chute.sniff import NUMBER_OR_DATE, PROBE_SETTINGS, Head, read_head
from chute.sources.base import Source
from chute.sources.s3 import glob_regex
from chute.units import Unit

SHAPE_FILES = 256
"""Files whose fields are read at most, per load: past that, the first file of each format
and folder, then others spread over the rest (a few milliseconds each)."""
JSON_SAMPLE = 32
"""Lines of a JSON file whose keys count as its fields."""
SHOWN_FILES = 3
"""Files a group names in the message."""
LISTED_FILES = 10
"""Files a suggested command lists at most (past that: a glob, else the first and `...`)."""


NAMED, MAYBE, POSITIONAL = "named", "maybe", "positional"


@dataclass(frozen=True)
class Shape:
    """A file's (or the table's) fields: names, how many, and how sure the names are: NAMED
    (a typed file's schema, JSON keys, a CSV/TSV header line told apart from the rows by their
    types, or --header), MAYBE (a CSV/TSV first line of distinct names over rows of text: a
    header, or a row), POSITIONAL (a CSV/TSV file without a header line: fields by place)."""

    fields: tuple[str, ...]
    count: int
    kind: str = NAMED

    @property
    def names(self) -> frozenset[str]:
        """The field names, and the first part of each dotted one (`user.id` also names `user`:
        a JSON object `user` loads into the columns of a Nested or Tuple `user`)."""
        return frozenset(self.fields) | {f.split(".", 1)[0] for f in self.fields}


def fits(a: Shape, b: Shape, add_columns: bool = False) -> bool:
    """Whether two files (or a file and the table) can share a table: a field name in common
    (with --add-columns, any two sets of names: the table takes them all); else as many
    fields, where one loads by position (no header line), or both may."""
    if a.names & b.names or (add_columns and {a.kind, b.kind} <= {NAMED, TABLE}):
        return True
    kinds = {a.kind, b.kind}
    if TABLE in kinds and kinds & {POSITIONAL, MAYBE}:
        # Rows by position into a table: as many fields as it has, or fewer (defaults).
        return min(a.count, b.count) == (a if a.kind != TABLE else b).count
    return a.count == b.count and (POSITIONAL in kinds or kinds == {MAYBE})


TABLE = "table"
"""The kind of an existing table's shape: a MAYBE file of as many fields may be rows for it."""


def read_shape(engine: Engine, source: Source, unit: Unit, opts: LoadOptions) -> Shape | None:
    """The fields of `unit`, read cheaply; None when they cannot be read here."""
    declared = source.declared_columns(unit)
    if declared is not None:
        return _named([c.name for c in declared])
    fmt = unit.fmt.format
    if unit.fmt.compression == "bz2":
        return None
    with contextlib.suppress(ChuteError):
        if fmt in ("CSV", "TSV"):
            lines = source.table_expression(unit, "line String", "LineAsString")
            head = read_head(engine, lines, f"{unit.key}: reading its first lines")
            if head.not_text(nul_ok=opts.format is not None) or not head.lines:
                return None
            delimiter = opts.delimiter or (head.delimiter() or "," if fmt == "CSV" else "\t")
            return text_shape(head, delimiter, opts.header)
        if fmt == "JSONEachRow":
            lines = source.table_expression(unit, "line String", "LineAsString")
            found = engine.rows(
                "SELECT arrayDistinct(arrayFlatten(groupArray(JSONExtractKeys(line)))) AS k FROM "
                f"(SELECT line FROM {lines} LIMIT {JSON_SAMPLE}) WHERE isValidJSON(line) AND JSONType(line) = 'Object'",
                PROBE_SETTINGS,
                context=f"{unit.key}: reading its first objects",
            )
            keys = [str(k) for k in found[0]["k"]] if found else []
            return _named(keys) if keys else None
        if fmt not in TEXT_FORMATS:
            columns = describe(engine, source.table_expression(unit, None), f"{unit.key}: reading its schema")
            return _named([c.name for c in columns])
    return None


def text_shape(head: Head, delimiter: str, header: bool | None) -> Shape | None:
    """A CSV/TSV file's shape from its first lines (see Shape)."""
    fields = head.fields(delimiter)
    if header is False:
        return Shape((), len(fields), POSITIONAL)
    while len(fields) > 1 and not fields[-1]:  # (`id,s,`: a delimiter at the end, as exporters write)
        fields = fields[:-1]
    if header is None and any(NUMBER_OR_DATE.match(f) for f in fields if f):
        return Shape((), len(fields), POSITIONAL)  # a row: no header line
    if len(set(fields)) != len(fields) or not all(fields):
        return None  # (a field unnamed or named twice: the load says what is wrong)
    if header:
        return Shape(tuple(fields), len(fields))
    # A header when a later line holds a number or a date where the first holds a name.
    for line in head.lines[1:]:
        values = Head([line]).fields(delimiter)
        if any(v and NUMBER_OR_DATE.match(v) for v in values[: len(fields)]):
            return Shape(tuple(fields), len(fields))
    return Shape(tuple(fields), len(fields), MAYBE)


def _named(names: Sequence[str]) -> Shape:
    return Shape(tuple(names), len(names))


def table_shape(columns: Sequence[Column]) -> Shape:
    """An existing table's shape: the columns an insert fills (not chute's provenance, not
    MATERIALIZED or ALIAS ones)."""
    names = [c.name for c in columns if c.name not in PROVENANCE_NAMES and c.default_kind not in _COMPUTED]
    return Shape(tuple(names), len(names), TABLE)


_COMPUTED = frozenset({"MATERIALIZED", "ALIAS"})


@dataclass
class Group:
    units: list[Unit]
    shapes: list[Shape]
    with_table: bool = False


def groups(
    units: Sequence[Unit], shapes: Sequence[Shape], table: Shape | None, add_columns: bool = False
) -> list[Group]:
    """The units in groups that fit one table each (the table's group first, else the
    biggest); connected by `fits`, through each other and through the table."""
    nodes: list[Shape] = [*shapes, *([table] if table is not None else [])]
    parent = list(range(len(nodes)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(nodes)):
        for j in range(i + 1, len(nodes)):
            if root(i) != root(j) and fits(nodes[i], nodes[j], add_columns):
                parent[root(j)] = root(i)
    found: dict[int, Group] = {}
    for i, (unit, shape) in enumerate(zip(units, shapes, strict=True)):
        group = found.setdefault(root(i), Group([], []))
        group.units.append(unit)
        group.shapes.append(shape)
    if table is not None:
        found.setdefault(root(len(nodes) - 1), Group([], [])).with_table = True
    return sorted(found.values(), key=lambda g: (not g.with_table, -len(g.units)))


def sampled(units: Sequence[Unit]) -> list[Unit]:
    """The units whose fields are read: one per file (a file's first byte range stands for
    it), all of them up to SHAPE_FILES, else the first of each format and folder and others
    spread over the rest."""
    files = [u for u in units if not u.is_range or u.start == 0]
    if len(files) <= SHAPE_FILES:
        return files
    firsts: dict[tuple[str, str], Unit] = {}
    for unit in files:
        firsts.setdefault((unit.fmt.format, os.path.dirname(unit.source_name)), unit)
    chosen = dict.fromkeys(firsts.values())
    for index in spread(len(files), SHAPE_FILES):
        if len(chosen) >= SHAPE_FILES:
            break
        chosen.setdefault(files[index], None)
    return [u for u in files if u in chosen]


def mixed_files(
    engine: Engine,
    source: Source,
    units: Sequence[Unit],
    opts: LoadOptions,
    table: str,
    columns: Sequence[Column] | None,
    target: str | None,
) -> str | None:
    """Why the units cannot go into one table (the message of a refusal), or None when they
    can. `columns`: the table's, where it exists."""
    # (a file that cannot be read, a FIFO say, or an empty one: left to its load, which fails it alone)
    chosen = sampled([u for u in units if u.size > 0 and source.unreadable(u) is None])
    if len(chosen) < (1 if columns is not None else 2):
        return None
    # Each look is a short read on one core: side by side where the engine reads the files itself.
    threads = 1 if source.batch_bytes else opts.workers or usable_cores()
    shapes = engine.side_by_side(lambda u: read_shape(engine, source, u, opts), chosen, threads)
    looked = [(u, outcome.result()) for u, outcome in zip(chosen, shapes, strict=True)]
    read = [(u, shape) for u, shape in looked if shape is not None and shape.count]
    known = table_shape(columns) if columns is not None else None
    if known is not None and not known.names:
        return None
    found = groups([u for u, _ in read], [s for _, s in read], known, opts.add_columns)
    if len(found) < 2:
        return None
    return _refusal(found, table, target, known, [u.source_name for u in units])


def _refusal(found: list[Group], table: str, target: str | None, known: Shape | None, everyone: Sequence[str]) -> str:
    names = _table_names(found, table)
    alone = known is not None and not found[0].units  # the table shares no column with any file
    files = [g for g in found if g.units]
    if alone:
        columns = ", ".join(known.fields[:6]) + (", ..." if len(known.fields) > 6 else "") if known else ""
        single = len(files) == 1 and len(files[0].units) == 1
        them = (
            f"{_shown(files[0].units[0].source_name)} shares"
            if single
            else "these files share"
            if len(files) == 1
            else f"these files, in {len(files)} groups, share"
        )
        it = "it" if single else "them"
        head = f"{them} no column with table {table} ({columns}); nothing was loaded. Load {it} into another table:"
    else:
        head = (
            f"these files cannot go into one table: {len(files)} groups share no column"
            + (f" (the first with table {table})" if known is not None else "")
            + "; nothing was created or loaded. Load each group on its own:"
        )
    lines = [head]
    number = 0
    for group, name in zip(found, names, strict=True):
        if not group.units:  # the table alone
            continue
        fields = list(dict.fromkeys(f for shape in group.shapes for f in shape.fields))
        described = ", ".join(fields[:6]) + (f", +{len(fields) - 6} more" if len(fields) > 6 else "")
        if not fields:
            described = f"{group.shapes[0].count} fields, no header line"
        kinds = "/".join(sorted({u.fmt.format for u in group.units}))
        shown = [_shown(u.source_name) for u in group.units]
        listed = ", ".join(shown[:SHOWN_FILES]) + (
            f" and {len(shown) - SHOWN_FILES} more" if len(shown) > SHOWN_FILES else ""
        )
        number += 1
        lines.append(f"  group {number} ({kinds}: {described}): {listed}")
        at = f" --target {target}" if target else ""
        lines.append(f"    chute load {' '.join(_quoted(f) for f in _sources_of(group, everyone))} --table {name}{at}")
    return "\n".join(lines)


def _table_names(found: list[Group], table: str) -> list[str]:
    """The table each group would go to: the first group keeps the name, the others get one of
    their own (`events_csv`, `events_csv_2`)."""
    names = [table]
    for group in found[1:]:
        base = f"{table}_{'_'.join(sorted({u.fmt.format.lower() for u in group.units}))}"
        name, n = base, 2
        while name in names:
            name, n = f"{base}_{n}", n + 1
        names.append(name)
    return names


def _sources_of(group: Group, everyone: Sequence[str]) -> list[str]:
    """What a command names for the group's files: them, or `dir/*.ext` (`dir/**/*.ext`) where
    that names all of them and no other file of the load."""
    files = [u.source_name for u in group.units]
    if len(files) <= SHOWN_FILES or any("://" in f for f in files):
        return [_shown(f) for f in files] if len(files) <= LISTED_FILES else [f"{_shown(files[0])} ..."]
    folder = os.path.commonpath(files)
    suffixes = {os.path.basename(f).partition(".")[2] for f in files}
    if len(suffixes) == 1 and (suffix := suffixes.pop()):
        nested = any(os.path.dirname(f) != folder for f in files)
        pattern = os.path.join(folder, "**" if nested else "", f"*.{suffix}")
        matches = glob_regex(pattern).fullmatch
        mine = set(files)
        if all(matches(f) for f in files) and not any(matches(o) for o in everyone if o not in mine):
            return [_shown(pattern)]
    return [_shown(f) for f in files] if len(files) <= LISTED_FILES else [f"{_shown(files[0])} ..."]


def _shown(path: str) -> str:
    """A path as the user most likely gave it: relative to the working directory when under it."""
    if "://" in path or not os.path.isabs(path):
        return path
    with contextlib.suppress(ValueError):
        relative = os.path.relpath(path)
        if not relative.startswith(".."):
            return relative
    return path


def _quoted(word: str) -> str:
    import shlex

    return word if word.endswith(" ...") else shlex.quote(word)
