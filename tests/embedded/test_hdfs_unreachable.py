"""HDFS: an unreachable NameNode is one line (no HDFS server needed)."""

from __future__ import annotations

import time

import pytest

from chute.cli import main

from ..harness.servers import free_port


@pytest.mark.parametrize(
    ("address", "message"),
    [
        (f"127.0.0.1:{free_port()}", "cannot reach the NameNode at 127.0.0.1:"),
        ("no-such-namenode.invalid:8020", "cannot resolve the NameNode host no-such-namenode.invalid"),
    ],
    ids=["closed port", "unknown host"],  # the port is random: ids that every collection agrees on
)
def test_unreachable_namenode_is_one_line(
    target: str, capsys: pytest.CaptureFixture[str], address: str, message: str
) -> None:
    url = f"hdfs://{address}/data/"
    started = time.monotonic()
    code = main(["load", url, "--table", "t", "--target", target])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"chute: error: {url}: {message}"), err
    assert time.monotonic() - started < 10
