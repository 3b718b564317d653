"""The seeds' loading methods, rebuilt from their descriptions in SEEDS.md.

Each function loads one file and returns the bytes it put on the wire, so the
suite can run it sequentially or over a pool. This module imports only the
standard library (and orjson when asked for): the Python-loader pool spawns
fresh processes that import it, and they should start as the seed's would.

- seed 1 "direct": the file's gzip bytes POSTed unchanged (`post_file`);
- seed 1 Python loader: decompress, parse every line, add `_source_filename`
  and `_file_ts`, re-serialise, re-gzip at level 1, POST (`python_loader_file`);
- seed 5: `gunzip -c file | clickhouse-client --query "INSERT ..."` (`client_pipe`).
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import shlex
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path

SEND_BLOCK = 1 << 20


@dataclass(frozen=True)
class HttpInsert:
    """Where and how to POST rows: an INSERT statement on a server's HTTP port."""

    host: str
    port: int
    database: str
    statement: str
    settings: tuple[tuple[str, str], ...] = ()

    def path(self) -> str:
        params = {"database": self.database, "query": self.statement, **dict(self.settings)}
        return "/?" + urllib.parse.urlencode(params)


def _post(target: HttpInsert, body: bytes | Path, gzipped: bool) -> int:
    """POST `body` (bytes or a file streamed from disk); raise with the server's message."""
    conn = http.client.HTTPConnection(target.host, target.port, timeout=600, blocksize=SEND_BLOCK)
    headers = {"Content-Encoding": "gzip"} if gzipped else {}
    try:
        if isinstance(body, Path):
            size = body.stat().st_size
            headers["Content-Length"] = str(size)
            with body.open("rb") as fh:
                conn.request("POST", target.path(), body=fh, headers=headers)
                response = conn.getresponse()
        else:
            size = len(body)
            conn.request("POST", target.path(), body=body, headers=headers)
            response = conn.getresponse()
        text = response.read()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {text.decode(errors='replace')[:500]}")
    finally:
        conn.close()
    return size


def post_file(target: HttpInsert, path: Path, gzipped: bool) -> int:
    """Seed 1 "direct": the file's bytes as they are on disk, no parsing, no provenance."""
    return _post(target, path, gzipped)


def _file_ts(path: Path) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(os.stat(path).st_mtime))


def python_loader_file(target: HttpInsert, path: Path, library: str) -> int:
    """Seed 1 Python loader: provenance added by parsing and re-serialising every row."""
    loads: Callable[[bytes], dict[str, object]]
    dumps: Callable[[dict[str, object]], bytes]
    if library == "orjson":
        import orjson

        loads, dumps = orjson.loads, orjson.dumps
    else:
        loads = json.loads

        def dumps(obj: dict[str, object]) -> bytes:
            return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()

    source, file_ts = str(path), _file_ts(path)
    out = []
    for line in gzip.decompress(path.read_bytes()).splitlines():
        if not line.strip():
            continue
        row = loads(line)
        row["_source_filename"] = source
        row["_file_ts"] = file_ts
        out.append(dumps(row))
    body = gzip.compress(b"\n".join(out) + b"\n", compresslevel=1)
    return _post(target, body, gzipped=True)


def warm_up(library: str) -> int:
    """Import what a pool worker needs before the clock starts."""
    if library == "orjson":
        import orjson

        return len(orjson.dumps({}))
    return len(json.dumps({}))


@dataclass(frozen=True)
class ClientCommand:
    """`clickhouse-client` on the server's native TCP port, one INSERT per file."""

    port: int
    database: str
    statement: str
    settings: Mapping[str, str]
    binary: str = "clickhouse-client"

    def shell(self, path: Path, gzipped: bool) -> str:
        client = [self.binary, "--host", "127.0.0.1", "--port", str(self.port), "--database", self.database]
        client += [f"--{k}={v}" for k, v in self.settings.items()]
        client += ["--query", self.statement]
        command = " ".join(shlex.quote(a) for a in client)
        if gzipped:
            return f"gunzip -c {shlex.quote(str(path))} | {command}"
        return f"{command} < {shlex.quote(str(path))}"


def client_pipe(command: ClientCommand, path: Path, gzipped: bool) -> int:
    """Seed 5: the shell pipe; the client's native protocol traffic is not measured (returns 0)."""
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command.shell(path, gzipped)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{command.shell(path, gzipped)}: exit {done.returncode}: {done.stderr.strip()[:500]}")
    return 0


def run_all(pool: Executor | None, fn: Callable[..., int], calls: list[tuple[object, ...]]) -> int:
    """`fn(*call)` for every call, in a pool or one after another; the total of what they return."""
    if pool is None:
        return sum(fn(*call) for call in calls)
    futures = [pool.submit(fn, *call) for call in calls]
    return sum(f.result() for f in futures)
