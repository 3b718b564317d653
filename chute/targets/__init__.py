"""Targets: where rows end up: an embedded directory or a ClickHouse server.

The loader speaks to a target only through `Target` (in `chute.targets.base`);
a new target is one new module here plus one line in `open_target`.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence

from chute.engine import LOCK_FILE, MEMORY
from chute.errors import UsageError
from chute.targets.base import Target

__all__ = [
    "DEFAULT_TARGET",
    "Target",
    "check_database",
    "check_own_directory",
    "is_server",
    "open_target",
    "target_spec",
]

DEFAULT_TARGET = "./chute.db"

_HOST_PORT = re.compile(
    r"(?:[^@/\s]+@)?"  # user[:password]@
    r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9_-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9_-]*[A-Za-z0-9])?)*)"
    r":[0-9]{1,5}(?:/[^/\s]*)?/?"  # :port, /database
)
"""`localhost:8123`, `ch.example.com:8123/db`, `me@10.0.0.5:8123`, `[::1]:8123`: a server."""
_said: set[str] = set()


def target_spec(spec: str | None) -> str | None:
    """The target a `--target` (or $CHUTE_TARGET) names, as `open_target` takes it; the one
    place a target string is read. `host:port` (a name, or a name with a domain, with a port)
    is a server: `http://` is assumed and said in one line on stderr, never a directory named
    so (`./localhost:8123` is one). Any other name with a colon and no slash is refused: it is
    most likely a server address mistyped."""
    spec = spec or os.environ.get("CHUTE_TARGET")
    if spec and spec.startswith("~"):  # (`--target=~/w.db`: the shell expands no ~ after `=`)
        spec = os.path.expanduser(spec)
    if not spec or "://" in spec or ":" not in spec:
        return spec
    if _HOST_PORT.fullmatch(spec):
        url = f"http://{spec}"
        if spec not in _said:
            _said.add(spec)
            here = " (a directory of that name is here: give ./" + spec + " for it)" if os.path.isdir(spec) else ""
            print(f"chute: note: target {spec} taken as the server {url}{here}", file=sys.stderr)
        return url
    if "/" not in spec.split(":", 1)[0]:
        raise UsageError(
            f"target {spec!r}: neither host:port nor a directory; give http(s)://host:port for a server, "
            f"or ./{spec} for a directory of that name"
        )
    return spec


def is_server(spec: str | None) -> bool:
    """Whether `open_target(spec)` would open a server (the same order of places)."""
    spec = target_spec(spec)
    if not spec:
        return bool(os.environ.get("CLICKHOUSE_HOST"))
    return spec.startswith(("http://", "https://"))


def open_target(
    spec: str | None,
    password_file: str | None = None,
    insecure: bool = False,
    connections: int = 2,
    nodes: Sequence[str] = (),
    via_distributed: bool = False,
    existing: bool = False,
    empty_ok: bool = False,
    allow_missing_shards: bool = False,
    cluster: str | None = None,
) -> Target:
    """A target from `--target`, `CHUTE_TARGET`, `CLICKHOUSE_HOST`, or the default directory
    (`via_distributed`, `allow_missing_shards`: see LoadOptions; `cluster`: --cluster, whose nodes
    get the URL's database where it does not exist yet).

    `existing`: commands that read (status, query, export) open only a directory that holds a
    database, so a typo is an error instead of a new empty database (or the engine's files in a
    user's own directory), and read one that cannot be written (a read-only mount) read-only;
    `empty_ok` also takes an empty directory (query: tables made first)."""
    spec = target_spec(spec)
    if not spec and os.environ.get("CLICKHOUSE_HOST"):
        from chute.targets.server import ServerTarget

        return ServerTarget(
            None, password_file, insecure, connections, nodes, via_distributed=via_distributed, cluster=cluster
        ).allowing_missing_shards(allow_missing_shards)
    spec = spec or DEFAULT_TARGET
    if spec.startswith(("http://", "https://")):
        from chute.targets.server import ServerTarget

        return ServerTarget(
            spec, password_file, insecure, connections, nodes, via_distributed=via_distributed, cluster=cluster
        ).allowing_missing_shards(allow_missing_shards)
    if "://" in spec:
        raise UsageError(f"unknown target scheme {spec.split('://', 1)[0]!r}: give a directory or http(s)://host:port")
    if via_distributed:
        raise UsageError("--insert-via-distributed needs a server target (--target http(s)://host:port)")
    if existing:
        check_database(spec, empty_ok)
    else:
        check_own_directory(spec)
    from chute.targets.embedded import EmbeddedTarget

    return EmbeddedTarget(spec, reading=existing)


def check_own_directory(path: str) -> None:
    """UsageError when a command that writes would make its database in a directory of other
    files (a data folder, a home directory): the engine's `metadata/`, `store/`, `data/` and
    `status` would land among them, and a load of that folder into itself found no file. A new
    or empty directory, or one that holds a database, is the target's own."""
    if path == MEMORY or not os.path.isdir(path) or _holds_database(path):
        return
    others = sorted(n for n in os.listdir(path) if not n.startswith(".chute") and n != "lost+found")
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise UsageError(
            f"the embedded database {path} is a directory of other files ({shown}), not a database: "
            f"give a new or empty directory (--target), such as {os.path.join(path, 'chute.db')}"
        )


def _holds_database(path: str) -> bool:
    """One chute opened (its lock file) or one the engine keeps tables in (`metadata/`)."""
    return os.path.isdir(os.path.join(path, "metadata")) or os.path.isfile(os.path.join(path, LOCK_FILE))


def check_database(path: str, empty_ok: bool = False) -> None:
    """UsageError unless `path` is a database directory: one chute opened (its lock file) or
    one the engine keeps tables in (`metadata/`)."""
    if path == MEMORY or _holds_database(path):
        return
    if not os.path.exists(path):
        raise UsageError(f"no database at {path}: the directory does not exist (chute load makes one)")
    if not os.path.isdir(path):
        raise UsageError(f"no database at {path}: not a directory")
    if empty_ok and not os.listdir(path):
        return
    raise UsageError(f"no database at {path}: the directory holds no ClickHouse database")
