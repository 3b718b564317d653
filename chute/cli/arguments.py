"""Pieces every command's arguments share: a subcommand with its summary and examples, the
target options, and their help texts."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any


def command(sub: Any, name: str, summary: str, examples: str, description: str = "") -> argparse.ArgumentParser:
    """A subcommand with its one-line summary, a description and examples."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=textwrap.fill(f"{summary[0].upper()}{summary[1:]}. {description}".strip(), 79),
        epilog="examples:\n" + "".join(f"  {line}\n" for line in examples.strip().splitlines()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def target_options(p: argparse.ArgumentParser, target_help: str) -> None:
    p.add_argument("--target", help=target_help)
    p.add_argument("--password-file", metavar="FILE", help="file holding the server password (server targets)")
    p.add_argument("--insecure", action="store_true", help="do not verify TLS certificates (https targets)")


TARGET_HELP = (
    "embedded database directory, or http(s)://[user[:password]@]host:port[/database] "
    "(default $CHUTE_TARGET, else a server from $CLICKHOUSE_HOST, else ./chute.db)"
)


ENDS_HELP = "an embedded database directory, or http(s)://[user[:password]@]host:port[/database]"
