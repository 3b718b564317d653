"""Looking into a target: `chute status` (the ledger) and `chute query`; `chute forget`."""

from __future__ import annotations

import argparse
import json
from typing import Any

from chute.cli.common import EXIT_OK
from chute.inspect import status_and_placement
from chute.load import forget
from chute.load.forget import matched


def forget_command(args: argparse.Namespace) -> int:
    report = forget(args.sources, args.table, args.target, args.password_file, args.insecure, args.keep_rows)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return EXIT_OK
    files = report.files
    shown = files if len(files) <= 10 else [*files[:9], f"... and {len(files) - 9} more"]
    for name in shown:
        print(f"forgot {name}")
    rows = "its rows stay (--keep-rows)" if report.kept_rows else f"{report.rows_deleted:,} rows deleted"
    print(
        f"{len(files)} file(s) of table {report.table} forgotten: {rows}, {report.rejects_deleted:,} rejected rows "
        "deleted; the next load loads them again"
    )
    for note in report.notes:
        print(f"note: {note}")
    return EXIT_OK


def status_command(args: argparse.Namespace) -> int:
    rows, replicas = status_and_placement(args.table, args.target, args.password_file, args.insecure, args.node)
    if args.sources:  # these files only: each in full, and why a load skips it or not
        chosen = set(matched(args.sources, [str(r["source"]) for r in rows], args.table, "nothing to show"))
        rows = [r for r in rows if str(r["source"]) in chosen]
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            print("\n".join(_file_lines(r) for r in rows))
        return EXIT_OK
    if args.json:
        # A table on several nodes: its units and where its rows are; else the units alone.
        print(json.dumps({"units": rows, "replicas": replicas} if replicas else rows, indent=2))
        return EXIT_OK
    if not rows and not replicas:
        print("nothing loaded yet")
        return EXIT_OK
    from rich.console import Console

    console = Console(soft_wrap=False)
    if replicas:
        _print_replicas(console, str(args.table), replicas)
    tables: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        tables.setdefault(str(r["table"]), []).append(r)
    for name, of_table in tables.items():
        _print_status_table(console, name, of_table)
    claimed = [r for r in rows if r.get("claimed_by")]
    if claimed:
        from rich import box
        from rich.table import Table

        prefix, names = _distinct_parts([str(r["source"]) for r in claimed], max(16, console.width - 60))
        console.print("live claims (loading now)" + (f", sources under {prefix}" if prefix else ""), markup=False)
        claims = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for column in ("worker", "source", "since", "lease ends"):
            claims.add_column(column, no_wrap=True)
        for r, source in zip(claimed, names, strict=True):
            claims.add_row(str(r["claimed_by"]), source, str(r["claimed_since"]), str(r["lease_end"]))
        console.print(claims)
    return EXIT_OK


def _file_lines(r: dict[str, Any]) -> str:
    """One unit of the ledger in full: its state, when and by which load, the size and mtime
    recorded (its identity), the file now, and what the next load does with it."""
    import os
    import shlex

    source, table, state = str(r["source"]), str(r["table"]), str(r["state"])
    lines = [
        f"{source} (table {table}): {state} at {str(r['at'])[:19]} UTC, load {r['load_id'] or '-'}: "
        f"{int(r['rows_loaded']):,} rows loaded, {int(r['rows_rejected']):,} rejected",
        f"  recorded: {int(r['size']):,} bytes, modified {r['mtime']} UTC (identity {r['identity']})",
    ]
    path = source.split("#bytes=", 1)[0]
    if "://" not in path and state == "done":
        try:
            st = os.stat(path)
            # (a byte range's identity holds the range's size: its file's mtime tells)
            size = str(r["identity"]).split(":")[0] if path != source else str(st.st_size)
            # (its first two fields: a fingerprint of the content may follow, which this does not read)
            same = str(r["identity"]).split(":")[:2] == [size, str(st.st_mtime_ns)]
            lines.append(
                "  now: the same size and mtime: a load skips it"
                if same
                else f"  now: {st.st_size:,} bytes, another size or mtime: a load follows --on-change (default: skip)"
            )
        except OSError:
            lines.append("  now: not there")
    elif state in ("failed", "started", "dropped", "forgotten"):
        lines.append(f"  {state}: the next load loads it")
    if r["last_error"]:
        lines.append(f"  last error: {r['last_error']}")
    if state == "done":
        lines.append(f"  to load it again: chute forget {shlex.quote(path)} --table {table}")
    return "\n".join(lines)


def _print_replicas(console: Any, name: str, replicas: list[dict[str, Any]]) -> None:
    """Rows of the table on each replica of each shard (the nodes chute reached)."""
    from rich import box
    from rich.table import Table

    shards = {r["shard"] for r in replicas if r["shard"] is not None}
    console.print(f"table {name}: rows per {'shard and ' if shards else ''}replica", markup=False, highlight=False)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in (["shard"] if shards else []) + ["replica", "node", "rows", "active replicas", "queue"]:
        table.add_column(column, no_wrap=True, justify="right" if column in ("rows", "queue") else "left")
    for r in replicas:
        if r["error"]:
            cells = [r["replica"] or "?", r["node"], "-", "no answer", ""]
        else:
            cells = [r["replica"], r["node"], f"{int(r['rows']):,}", str(r["active_replicas"]), str(r["queue"])]
        table.add_row(*([str(r["shard"] or "?")] if shards else []), *cells)
    if shards:
        total: dict[int, int] = {}
        for r in replicas:
            if not r["error"] and r["shard"] is not None:
                total.setdefault(r["shard"], int(r["rows"]))  # a shard's rows: its first replica's
        console.print(table)
        silent = sum(1 for r in replicas if r["error"])
        console.print(
            f"rows in all shards: {sum(total.values()):,}"
            + (f" (of those that answered: {silent} node(s) did not)" if silent else ""),
            markup=False,
            highlight=False,
        )
        return
    console.print(table)


def _print_status_table(console: Any, name: str, rows: list[dict[str, Any]]) -> None:
    """One table's ledger rows; long source paths shown by what tells them apart. Errors go in
    a column where it can be ERROR_WIDTH wide, else each below the table, wrapped between words."""
    from rich import box
    from rich.table import Table

    errors = any(r["last_error"] for r in rows)
    loaded = [f"{int(r['rows_loaded']):,}" for r in rows]
    at = [str(r["at"])[:19] for r in rows]  # to the second
    # The widths of the other columns (state, loaded, rejected, at), 3 apart.
    others = [9, max(6, *map(len, loaded)), 8, max(map(len, at))]
    budget = console.width - sum(others) - 3 * (len(others) + 1)
    column = errors and budget - ERROR_WIDTH - 3 >= SOURCE_WIDTH
    if column:
        budget -= ERROR_WIDTH + 3
    prefix, names = _distinct_parts([str(r["source"]) for r in rows], max(SOURCE_WIDTH, budget))
    cut = len(set(names)) < len({str(r["source"]) for r in rows})
    if cut:  # what tells them apart is in the middle: whole names, folded
        names = [str(r["source"])[len(prefix) :] for r in rows]
    console.print(
        f"table {name}" + (f", sources under {prefix}" if prefix else ""), markup=False, highlight=False, soft_wrap=True
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("source", no_wrap=not cut, overflow="fold", ratio=1 if cut else None)
    table.add_column("state", no_wrap=True)
    table.add_column("loaded", justify="right", no_wrap=True)
    table.add_column("rejected", justify="right", no_wrap=True)
    table.add_column("at", no_wrap=True)
    if column:
        table.add_column("last error", overflow="fold", ratio=1, min_width=ERROR_WIDTH)
    for r, source, count, when in zip(rows, names, loaded, at, strict=True):
        cells = [source, str(r["state"]), count, f"{int(r['rows_rejected']):,}", when]
        table.add_row(*cells, *([_shown_error(str(r["source"]), str(r["last_error"]))] if column else []))
    console.print(table)
    if errors and not column:
        _print_errors_below(console, rows, names)
    if any(r["state"] == "done" for r in rows):
        console.print(
            "a done file is skipped while its size and mtime are as loaded (chute status FILE says); "
            f"to load one again: chute forget FILE --table {name}",
            markup=False,
            highlight=False,
        )


def _print_errors_below(console: Any, rows: list[dict[str, Any]], names: list[str]) -> None:
    """Each last error as `source: error`, wrapped between words at the console's width (a word
    longer than a line, a path say, is cut where the line ends)."""
    import textwrap

    width = max(40, console.width - 1)
    lines = ["last errors:"]
    for r, source in zip(rows, names, strict=True):
        if r["last_error"]:
            text = f"{source}: {_shown_error(str(r['source']), str(r['last_error']))}"
            lines += textwrap.wrap(text, width, initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False)
    console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)


SOURCE_WIDTH = 16
"""The source column's least width (a path is cut from the left to it)."""
ERROR_WIDTH = 28
"""The last error column's least width: narrower, a message folds into a column of words."""


def _shown_error(source: str, error: str) -> str:
    """A ledger error as a status row shows it: without the source the row names already, at
    most 160 characters (`status --json` has it whole)."""
    error = error.removeprefix(f"{source}: ")
    return error if len(error) <= 160 else error[:159] + "…"


def _distinct_parts(sources: list[str], width: int) -> tuple[str, list[str]]:
    """The directory all sources share (shown once), and what tells each apart.

    What is left is cut from the left ("…") to `width`, so a file's name stays in view.
    """
    split = [s.split("/") for s in sources]
    shared = 0
    while all(len(parts) > shared + 1 and parts[shared] == split[0][shared] for parts in split):
        shared += 1
    prefix = "/".join(split[0][:shared]) + "/" if shared else ""
    if len(prefix) < 2:
        prefix = ""
    names = [s[len(prefix) :] for s in sources]
    return prefix, [n if len(n) <= width else "…" + n[-(width - 1) :] for n in names]
