"""The settings the embedded engine starts with, on every connection chute opens."""

from __future__ import annotations

import threading
from pathlib import Path

from chute.engine import MEMORY, open_engine


def _settings(engine) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    got = engine.rows(
        "SELECT (SELECT toUInt32(value) FROM system.server_settings WHERE name = 'background_pool_size') AS pool, "
        "toUInt32(getSetting('http_max_tries')) AS tries"
    )[0]
    return int(got["pool"]), int(got["tries"])


def test_the_engine_starts_with_16_mutation_threads_and_4_http_tries(tmp_path: Path) -> None:
    """chDB starts with 2 threads for merges and mutations: each part's mutation waits about
    0.3 s, so mending or removing rows over 400 day partitions took 70 s (16 threads: 12 s). Its
    URL reads tried 10 times, up to 10 s apart, in inference too: a cut URL cost 100 s a load."""
    for path in (str(tmp_path / "db"), MEMORY):
        engine = open_engine(path)
        try:
            seen: list[tuple[int, int]] = [_settings(engine)]
            # A worker thread's connection (the loader's) keeps the same.
            worker = threading.Thread(target=lambda: seen.append(_settings(engine)))  # noqa: B023
            worker.start()
            worker.join()
            assert seen == [(16, 4), (16, 4)], (path, seen)
        finally:
            engine.close()


def test_statements_side_by_side_run_on_two_connections_and_keep_each_outcome() -> None:
    """Engine.side_by_side: the short reads of inference and of the files' shapes run on the
    load's cores at once, each thread on its own connection; each item's value or error comes
    back in the items' order."""
    engine = open_engine(MEMORY)
    try:
        threads: set[int] = set()
        started = threading.Barrier(2, timeout=30)

        def work(n: int) -> int:
            threads.add(threading.get_ident())
            if n < 2:
                started.wait()  # the first two items run at the same time, or this times out
            if n == 3:
                engine.rows("SELECT throwIf(1, 'item three')")
            return int(engine.rows(f"SELECT {n} * 10 AS v")[0]["v"])

        outcomes = engine.side_by_side(work, [0, 1, 2, 3, 4], 2)
        assert [o.result() for o in outcomes[:3]] == [0, 10, 20] and outcomes[4].result() == 40
        assert "item three" in str(outcomes[3].exception())
        assert len(threads) == 2 and threading.get_ident() in threads
        # One thread: in this one, in order.
        alone = engine.side_by_side(lambda n: threading.get_ident(), [1, 2], 1)
        assert {o.result() for o in alone} == {threading.get_ident()}
    finally:
        engine.close()
