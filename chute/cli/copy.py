"""`chute copy`: a table from one ClickHouse to another, verified partition by partition."""

from __future__ import annotations

import argparse
import sys

from chute.cli.common import EXIT_FAILED, EXIT_OK
from chute.errors import UsageError


def copy_command(args: argparse.Namespace) -> int:
    from chute.copy import CopyOptions, copy
    from chute.progress import Progress

    if args.partitions and args.where:
        raise UsageError("give --partitions or --where, not both")
    options = CopyOptions(
        dest_table=args.as_table,
        partitions=tuple(p.strip() for p in (args.partitions or "").split(",") if p.strip()),
        where=args.where,
        method=args.method,
        dry_run=args.dry_run,
        workers=args.workers,
        tries=args.tries,
        cluster=args.cluster,
        shard_by=args.shard_by,
        nodes=tuple(args.node or ()),
        dest_nodes=tuple(args.to_node or ()),
        via=args.via,
        s3_endpoint=args.s3_endpoint,
        source_password_file=args.from_password_file,
        dest_password_file=args.to_password_file,
        insecure=args.insecure,
    )
    show = not args.quiet and not args.json
    with Progress(enabled=show and sys.stderr.isatty(), label="copying", unit="partitions") as progress:
        report = copy(
            args.table,
            args.source,
            args.dest,
            options,
            progress=lambda done, _total, rows, size: progress.update(done, rows, size),
            on_plan=progress.start,
            on_ddl=(lambda ddl: print(f"created table:\n{ddl}", file=sys.stderr)) if show else None,
        )
    if args.json:
        print(report.to_json())
    elif not args.quiet:
        print(_text(report))
    return EXIT_OK if report.ok else EXIT_FAILED


def _text(report: object) -> str:
    from chute.copy import CopyReport
    from chute.report import human_bytes

    assert isinstance(report, CopyReport)
    lines = []
    if report.dry_run:
        if report.ddl:
            lines.append(f"would create {report.dest_table}:\n{report.ddl}")
        lines.append(f"method: {report.method} ({report.method_reason})")
        for u in report.units:
            lines.append(f"  {u.state:8} {u.partition:24} {u.rows:>12,} rows {human_bytes(u.bytes):>10}  {u.reason}")
        todo = [u for u in report.units if u.state == "copy"]
        lines.append(
            f"would copy {len(todo)} of {len(report.units)} partitions ({sum(u.rows for u in todo):,} rows, "
            f"{human_bytes(sum(u.bytes for u in todo))}); nothing was written"
        )
        return "\n".join(lines)
    for u in report.failed:
        lines.append(
            f"FAILED {u.partition}: {u.reason} (source {u.source_rows} rows, checksum {u.source_checksum}; "
            f"copy {u.dest_rows} rows, checksum {u.dest_checksum})"
        )
    lines.extend(f"note: {n}" for n in report.notes)
    wire = f", {human_bytes(report.wire_bytes)} on the wire" if report.wire_bytes else ""
    lines.append(
        f"copied {report.table} to {report.dest_table} in {report.dest}: {len(report.copied)} partitions "
        f"({report.rows_copied:,} rows, {human_bytes(report.bytes_copied)}) copied and verified, "
        f"{len(report.skipped)} unchanged (skipped), {len(report.failed)} failed; "
        f"{report.seconds:.2f} s, method {report.method}{wire}"
    )
    return "\n".join(lines)
