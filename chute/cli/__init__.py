"""The `chute` command: parses flags, calls the library, prints the report.

`parser` defines the command line; `load`, `export`, `measure` (design, bench,
time-queries) and `inspect` (status, forget, query) run the commands; `common` holds
the exit codes. `python -m chute.cli` runs `entry`.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Sequence

from chute.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, parse_size
from chute.cli.copy import copy_command
from chute.cli.export import export_command
from chute.cli.inspect import forget_command, status_command
from chute.cli.load import load_command
from chute.cli.measure import bench_command, design_command, time_queries_command
from chute.cli.parser import ArgsError, arm, build_parser, guess_command, subparsers
from chute.engine import lean_engine_import
from chute.errors import ChuteError, SourceError, UsageError
from chute.inspect import query
from chute.load.ledger import freeze_many_objects
from chute.report import LoadReport

__all__ = [
    "ALLOCATOR_CONF",
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "ArgsError",
    "build_parser",
    "entry",
    "main",
    "parse_size",
    "subparsers",
]

ALLOCATOR_CONF = "background_thread:true,dirty_decay_ms:1000"
"""The engine's allocator (jemalloc, read from JE_MALLOC_CONF when the engine loads): hand freed
pages back within a second, not five, so the process's RSS follows what the engine holds
(a 7 M-row Parquet load under --memory-limit 1GB: 0.7 GiB peak instead of 0.75-1 GiB)."""


USER_ERROR_CODES = frozenset({81, 192, 193, 194, 516})
"""Server answers about what the user gave (no such database, unknown user, wrong password,
authentication failed): exit code 2, as a wrong path or option."""


def _interrupt_on_sigterm() -> None:
    """SIGTERM ends a load as Ctrl-C does (one line, and a JSON object under --json), not silently."""

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    with contextlib.suppress(ValueError):  # (not the main thread: leave it as it is)
        signal.signal(signal.SIGTERM, interrupted)


def _watch_interrupts() -> None:
    """Ctrl-C (or SIGTERM) while the engine runs a statement: Python's handler runs only when it
    returns, which may be minutes for a big batch or query. A thread that the signal wakes says
    so, once the process has not ended within a second, and a second Ctrl-C stops the process at
    once, which every command survives as it survives a kill -9 (the same command goes on from
    what was committed)."""
    import socket
    import threading

    wake, woken = socket.socketpair()
    wake.setblocking(False)
    try:
        signal.set_wakeup_fd(wake.fileno(), warn_on_full_buffer=False)
    except ValueError:  # (not the main thread)
        return
    watched = {signal.SIGINT.value, signal.SIGTERM.value}

    def watch() -> None:
        assert wake.fileno() >= 0  # (the socket Python writes to lives as long as this thread)
        seen = 0
        while True:
            got = sum(1 for number in woken.recv(64) if number in watched)
            if not got:
                continue
            seen += got
            if seen > 1:
                print("chute: error: interrupted; re-run the same command to finish", file=sys.stderr, flush=True)
                os._exit(130)
            time.sleep(1)  # (ended already, as it does between statements: nothing to say)
            print(
                "chute: interrupted: stopping when the statement under way ends (Ctrl-C again to stop now)",
                file=sys.stderr,
                flush=True,
            )

    threading.Thread(target=watch, name="chute-interrupts", daemon=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    if "chdb" not in sys.modules:  # the command owns its process; a user's setting wins
        os.environ.setdefault("JE_MALLOC_CONF", ALLOCATOR_CONF)
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    arm(parser, words)
    if not words or words[0] == "help":
        return _help(parser, words)
    try:
        args = parser.parse_args(words)
    except ArgsError as exc:
        return _fail(str(exc), EXIT_USAGE, as_json="--json" in words)
    try:
        if args.command == "load":
            return load_command(args)
        if args.command == "status":
            return status_command(args)
        if args.command == "forget":
            return forget_command(args)
        if args.command == "bench":
            return bench_command(args)
        if args.command == "design":
            return design_command(args)
        if args.command == "export":
            return export_command(args)
        if args.command == "copy":
            return copy_command(args)
        if args.command == "time-queries":
            return time_queries_command(args)
        fmt = args.format or ("PrettyCompact" if sys.stdout.isatty() else "TSV")
        sys.stdout.write(query(args.sql, args.target, fmt, args.password_file, args.insecure))
        return EXIT_OK
    except ChuteError as exc:
        if args.debug:
            traceback.print_exc()
        told = isinstance(exc, (UsageError, SourceError)) or exc.code in USER_ERROR_CODES
        code = EXIT_USAGE if told else EXIT_FAILED
        return _fail(str(exc), code, as_json=bool(getattr(args, "json", False)), partial=exc.partial)
    except KeyboardInterrupt:
        message = "interrupted"
        if args.command in ("load", "export", "copy", "forget"):  # (what a re-run goes on with)
            message += f"; re-run the same command to finish the {args.command}"
        _fail(message, 130, as_json=bool(getattr(args, "json", False)))
        return 130


def _help(parser: argparse.ArgumentParser, words: list[str]) -> int:
    """`chute` alone: the commands, on stderr, and exit code 2 (a script that lost its command
    fails); `chute help [COMMAND]`: that help on stdout, as `--help` gives it."""
    if not words:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    commands = subparsers(parser)
    asked = words[1] if len(words) > 1 else None
    if asked is None:
        parser.print_help()
        return EXIT_OK
    if asked not in commands:
        return _fail(guess_command(asked, list(commands)), EXIT_USAGE, as_json=False)
    commands[asked].print_help()
    return EXIT_OK


def _fail(message: str, code: int, as_json: bool, partial: LoadReport | None = None) -> int:
    """One line on stderr; under --json also one object on stdout, so a script always gets JSON:
    for a load that stopped midway (`partial`), its report so far, with the files and rows it
    committed before it stopped."""
    if as_json:
        fields = partial.to_dict() if isinstance(partial, LoadReport) else {}
        print(json.dumps({**fields, "ok": False, "error": message}, indent=2))
    if isinstance(partial, LoadReport) and partial.files_loaded:
        message += (
            f" (before it stopped, {partial.files_loaded} file(s) and {partial.rows_loaded:,} rows were "
            "committed; the same command goes on from there)"
        )
    print(f"chute: error: {message}", file=sys.stderr)
    return code


EXIT_PIPE = 141
"""The exit code of a command whose reader left (`chute load --json | head -1`): a process that
SIGPIPE stops has 128 + 13 in a shell. Python ignores SIGPIPE, so a write raises instead."""


def _reader_gone() -> int:
    """Standard output's reader closed it: nothing more can be told there, and a traceback would
    say nothing about the work (a load had committed before its report was printed)."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # (the flush at exit writes there, not to the pipe)
    return EXIT_PIPE


def entry() -> None:
    lean_engine_import()
    freeze_many_objects()
    _interrupt_on_sigterm()
    _watch_interrupts()
    try:
        code = main()
    except SystemExit as exc:  # (rich's answer to a closed pipe, `chute status | head`: exit 1)
        code = exc.code if isinstance(exc.code, int) else 1
    except BrokenPipeError:
        code = _reader_gone()
    # Everything the run wrote is committed, as it would be at a kill -9 (each load is built
    # to survive one): skip the engine's own teardown (~0.2 s of a short run's wall, and the
    # engine once crashed in it). Exit handlers still run; the streams are flushed first.
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
