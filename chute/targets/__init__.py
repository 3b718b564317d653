"""Targets: where rows end up: an embedded directory or a ClickHouse server.

The loader speaks to a target only through `Target` (in `chute.targets.base`);
a new target is one new module here plus one line in `open_target`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from chute.errors import UsageError
from chute.targets.base import Target

__all__ = ["DEFAULT_TARGET", "Target", "open_target"]

DEFAULT_TARGET = "./chute.db"


def open_target(
    spec: str | None,
    password_file: str | None = None,
    insecure: bool = False,
    connections: int = 2,
    nodes: Sequence[str] = (),
    via_distributed: bool = False,
) -> Target:
    """A target from `--target`, `CHUTE_TARGET`, `CLICKHOUSE_HOST`, or the default directory
    (`via_distributed`: see LoadOptions.insert_via_distributed)."""
    spec = spec or os.environ.get("CHUTE_TARGET")
    if not spec and os.environ.get("CLICKHOUSE_HOST"):
        from chute.targets.server import ServerTarget

        return ServerTarget(None, password_file, insecure, connections, nodes, via_distributed=via_distributed)
    spec = spec or DEFAULT_TARGET
    if spec.startswith(("http://", "https://")):
        from chute.targets.server import ServerTarget

        return ServerTarget(spec, password_file, insecure, connections, nodes, via_distributed=via_distributed)
    if "://" in spec:
        raise UsageError(f"unknown target scheme {spec.split('://', 1)[0]!r}: give a directory or http(s)://host:port")
    if via_distributed:
        raise UsageError("--insert-via-distributed needs a server target (--target http(s)://host:port)")
    from chute.targets.embedded import EmbeddedTarget

    return EmbeddedTarget(spec)
