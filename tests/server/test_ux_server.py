"""User experience against a ClickHouse server: setup steps ride out dropped connections."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class FlakyProxy:
    """A loopback TCP proxy to a server that drops the next `drop` connections it accepts
    (closed before a byte is answered), and can cut every connection it forwards."""

    def __init__(self, upstream_port: int) -> None:
        import socket
        import threading

        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.drop = 0
        self.dropped = 0
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.drop > 0:
                self.drop -= 1
                self.dropped += 1
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: Any, b: Any) -> None:
        import contextlib

        with contextlib.suppress(OSError):
            while data := a.recv(65536):
                b.sendall(data)
        with contextlib.suppress(OSError):
            b.shutdown(2)

    def cut(self, then_drop: int) -> None:
        """Close every forwarded connection; drop the next `then_drop` new ones."""
        import contextlib

        self.drop = then_drop
        for s in self.open:
            with contextlib.suppress(OSError):
                s.shutdown(2)
        self.open = []

    def close(self) -> None:
        self.listener.close()
        self.cut(0)


def test_setup_steps_on_a_server_survive_dropped_connections(
    tmp_path: Path, clickhouse_server: Any, server_url: str
) -> None:
    from chute import load
    from chute.load.ledger import Ledger
    from chute.sql import TableName
    from chute.targets.server import ServerTarget

    database = server_url.rsplit("/", 1)[1]
    proxy = FlakyProxy(clickhouse_server.http_port)
    try:
        url = f"http://127.0.0.1:{proxy.port}/{database}"
        proxy.drop = 2  # the version check's first two connections
        target = ServerTarget(url)
        assert proxy.dropped == 2 and target.capabilities.version >= (18, 0, 0)

        ledger = Ledger(target, TableName(None, "t"))
        proxy.cut(then_drop=2)  # ledger table creation: its connection gone, the next two refused
        ledger.ensure()
        proxy.cut(then_drop=2)  # a ledger read
        assert ledger.exists() and ledger.latest() == {} and proxy.dropped == 6

        (tmp_path / "a.jsonl").write_text('{"x": 1}\n{"x": 2}\n')
        proxy.drop = 2
        report = load(str(tmp_path / "a.jsonl"), "t", url)
        assert report.ok and report.rows_loaded == 2 and proxy.dropped == 8
    finally:
        proxy.close()


def test_a_wrong_password_or_database_is_exit_2(tmp_path: Path, server_url: str) -> None:
    """The README promises exit code 2 for a bad password; a server's "Wrong password" was 1."""
    import subprocess
    import sys

    (tmp_path / "a.csv").write_text("id\n1\n")
    host = server_url.split("://", 1)[1]
    for target in (f"http://default:wrong-Pa55@{host}", f"http://{host.rsplit('/', 1)[0]}/no_such_db_x"):
        done = subprocess.run(
            [sys.executable, "-m", "chute", "load", str(tmp_path / "a.csv"), "-t", "t", "--target", target],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "wrong-Pa55" not in done.stderr + done.stdout
