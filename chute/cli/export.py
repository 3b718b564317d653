"""`chute export`: a table or query to files."""

from __future__ import annotations

import argparse
import sys

from chute.cli.common import EXIT_OK, parse_size


def export_command(args: argparse.Namespace) -> int:
    from chute.export import ExportOptions, export
    from chute.report import human_bytes

    options = ExportOptions(
        format=args.format,
        compression=args.compression,
        partition_by=args.partition_by,
        max_file_bytes=parse_size(args.max_file_size) if args.max_file_size else None,
        workers=args.workers,
        password_file=args.password_file,
        insecure=args.insecure,
        s3_endpoint=args.s3_endpoint,
    )
    show = not args.quiet and not args.json and sys.stderr.isatty()

    def say(partitions: int, rows: int, written: int) -> None:
        if show:
            print(
                f"\rchute export: {partitions} partitions, {rows:,} rows, {human_bytes(written)}",
                end="",
                file=sys.stderr,
            )

    report = export(args.source, args.dest, args.target, options, progress=say)
    if show:
        print(file=sys.stderr)
    if args.json:
        print(report.to_json())
    elif not args.quiet:
        skipped = f", {report.partitions_skipped} already written (skipped)" if report.partitions_skipped else ""
        rate = f"{report.rows_written / report.seconds:,.0f} rows/s" if report.seconds > 0 else ""
        print(
            f"exported {report.rows_written:,} rows to {len(report.files)} files in {report.dest} "
            f"({human_bytes(report.bytes_written)}, {report.seconds:.2f} s, {rate}); "
            f"{report.partitions_written} of {report.partitions_total} partitions written{skipped}"
        )
        print(f"manifest: {report.manifest}")
    return EXIT_OK
