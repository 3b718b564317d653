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
