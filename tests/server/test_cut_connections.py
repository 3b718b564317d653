"""A connection to the server that drops at random points of the whole run, setup included:
every run finishes by itself (retries, repairs), with each row once and no stage left."""

from __future__ import annotations

import contextlib
import json
import random
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from .test_server import _make_files

FILES = 6
ROWS = 2_000


class CuttingProxy:
    """A loopback TCP proxy that cuts some connections after a random number of bytes (either
    direction), and refuses a few outright: the faults of a flaky network, at any request."""

    def __init__(self, upstream_port: int, seed: int, cut_share: float, refuse_share: float) -> None:
        self.upstream_port = upstream_port
        self.rng = random.Random(seed)
        self.cut_share = cut_share
        self.refuse_share = refuse_share
        self.cuts = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                roll = self.rng.random()
                budget = self.rng.randint(0, 200_000) if roll < self.cut_share + self.refuse_share else None
                refuse = roll < self.refuse_share
            if refuse:
                self.cuts += 1
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            link = _Link(client, upstream, budget, self)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=link.pump, args=(a, b), daemon=True).start()

    def close(self) -> None:
        self.listener.close()


class _Link:
    def __init__(self, client: socket.socket, upstream: socket.socket, budget: int | None, proxy: CuttingProxy) -> None:
        self.sockets = (client, upstream)
        self.budget = budget
        self.proxy = proxy
        self.lock = threading.Lock()

    def pump(self, a: socket.socket, b: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := a.recv(16384):
                with self.lock:
                    if self.budget is not None:
                        self.budget -= len(data)
                        if self.budget < 0:
                            self.proxy.cuts += 1
                            self.cut()
                            return
                b.sendall(data)
        self.cut()

    def cut(self) -> None:
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()


@pytest.mark.slow
def test_twenty_runs_through_a_cutting_proxy_each_finish_exactly_once(tmp_path: Path, clickhouse_server: Any) -> None:
    data = tmp_path / "data"
    _make_files(data, files=FILES, rows=ROWS)
    total_cuts = 0
    for trial in range(20):
        database = f"cut{trial}_{random.randrange(10**6)}"
        clickhouse_server.query(f"CREATE DATABASE {database}")
        proxy = CuttingProxy(clickhouse_server.http_port, seed=trial, cut_share=0.6, refuse_share=0.1)
        try:
            run = subprocess.run(
                [
                    sys.executable, "-m", "chute.cli", "load", str(data), "-t", "ev",
                    "--target", f"http://127.0.0.1:{proxy.port}/{database}",
                    "--batch-mb", "1", "--json",
                ],
                capture_output=True,
                text=True,
                timeout=240,
            )  # fmt: skip
        finally:
            proxy.close()
        total_cuts += proxy.cuts
        assert run.returncode == 0, f"trial {trial} ({proxy.cuts} cuts): {run.stderr}"
        assert json.loads(run.stdout)["ok"]
        got = clickhouse_server.query(
            "SELECT count(), uniqExact(_source, _source_row), "
            "(SELECT count() FROM system.tables WHERE database = currentDatabase() "
            "AND startsWith(name, '_chute_stage_')) FROM ev",
            database=database,
        ).split()
        assert got == [str(FILES * ROWS), str(FILES * ROWS), "0"], (trial, proxy.cuts, got)
        clickhouse_server.query(f"DROP DATABASE {database}")
    assert total_cuts >= 6, total_cuts  # the network really was flaky (20 cuts in 30 runs when written)
