"""Showing a proposal, and reading a saved one back as DDL."""

from __future__ import annotations

import re

from chute.design.model import Proposal
from chute.errors import UsageError
from chute.sql import TableName


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return lines


def render_text(proposal: Proposal) -> str:
    """The evidence as SQL comments, then the DDL: the output is itself a valid --design FILE.sql."""
    p = proposal
    sample = "every row" if p.sample_complete else f"first rows of {p.files_sampled} of {p.files_total} files"
    lines = [
        f"chute design for {p.table}: {p.sample_rows:,} sampled rows ({sample}), measured in {p.seconds:.1f} s",
        "",
        "Columns",
    ]
    lines += _table(
        ["column", "inferred", "chosen", "codec", "why"],
        [[c.name, c.inferred, c.type, c.codec or "LZ4", c.reason] for c in p.columns],
    )
    lines += ["", "Codecs (compressed bytes of the sample under the winning layout)"]
    lines += _table(["column", "codec", "why"], [[c.name, c.codec or "LZ4", c.codec_reason] for c in p.columns])
    lines += ["", "Layouts tried (the sample written into each, codecs chosen per layout)"]
    labels = [f"L{i}" for i in range(1, len(p.layouts) + 1)]
    lines += [f"  {label}: {t.name}: ORDER BY {t.order_by}" for label, t in zip(labels, p.layouts, strict=True)]
    rows = [[c.name, *(f"{t.column_bytes.get(c.name, 0):,}" for t in p.layouts)] for c in p.columns]
    rows.append(["bytes on disk", *(f"{t.bytes_on_disk:,}" for t in p.layouts)])
    rows.append(["bytes per row", *(f"{t.bytes_per_row:.2f}" for t in p.layouts)])
    lines += _table(["column", *labels], rows)
    lines += ["", f"Winner: {p.why}", f"Partition: {p.partition_reason}"]
    lines.append(f"Proposed table with the sample: {p.final_bytes_on_disk:,} bytes on disk")
    lines += [f"Note: {note}" for note in p.notes]
    comments = "\n".join(f"-- {line}".rstrip() for line in lines)
    return f"{comments}\n\n{p.ddl};\n"


_DDL_HEAD = re.compile(
    r"^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?((?:`(?:[^`\\]|\\.)*`|\w+)(?:\.(?:`(?:[^`\\]|\\.)*`|\w+))?)",
    re.IGNORECASE,
)


def _strip_sql_comments(text: str) -> str:
    """Drop `--` comment lines and the final semicolon; refuse a second statement."""
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--")).strip()
    body = body.removesuffix(";").rstrip()
    quote = ""
    escaped = False
    for ch in body:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif quote:
            quote = "" if ch == quote else quote
        elif ch in "'`\"":
            quote = ch
        elif ch == ";":
            raise UsageError("the design file must hold one CREATE TABLE statement, not several")
    return body


def load_ddl_file(path: str, table: str | None = None) -> str:
    """The CREATE TABLE of a saved proposal (`chute design ... > FILE.sql`), ready to run.

    Comment lines are dropped; the statement becomes CREATE TABLE IF NOT EXISTS,
    and with `table` it is renamed to that table, so one saved design serves
    any table name. Raises UsageError when the file is not one CREATE TABLE.
    """
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror}") from None
    body = _strip_sql_comments(text)
    match = _DDL_HEAD.match(body)
    if match is None:
        raise UsageError(f"{path}: not a CREATE TABLE statement")
    name = TableName.parse(table).sql if table else match.group(1)
    return f"CREATE TABLE IF NOT EXISTS {name}{body[match.end() :]}"
