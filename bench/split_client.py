"""One client of the suite's split mode, run under `taskset -c 1` while the server is on core 0.

Imports and warms up before the clock starts (a fresh interpreter is not what is timed),
loads once, and prints one JSON line: seconds, this process's CPU seconds, bytes sent.

    python bench/split_client.py raw HOST PORT DATABASE FORMAT GZIPPED FILE...
    python bench/split_client.py chute METHOD TARGET_URL DIRECTORY [SPARE]

SPARE is chute's --spare-client/--spare-server as `client` or `server` (default: neither).
"""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PARALLEL = 4


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def raw(host: str, port: str, database: str, fmt: str, gzipped: str, files: list[str]) -> dict[str, object]:
    from bench import baselines

    target = baselines.HttpInsert(
        host, int(port), database, f"INSERT INTO t FORMAT {fmt}", (("date_time_input_format", "best_effort"),)
    )
    with ThreadPoolExecutor(min(PARALLEL, len(files))) as pool:
        cpu0, t0 = _cpu(), time.perf_counter()
        sent = baselines.run_all(pool, baselines.post_file, [(target, Path(f), gzipped == "1") for f in files])
        return {"seconds": time.perf_counter() - t0, "cpu": _cpu() - cpu0, "sent": sent}


def chute_load(method: str, target: str, directory: str, spare: str = "") -> dict[str, object]:
    import chute
    from chute.engine import shared_engine

    shared_engine()  # the engine started, as a long-running loader has it
    cpu0, t0 = _cpu(), time.perf_counter()
    report = chute.load(
        [directory], table="t", target=target, options=chute.LoadOptions(method=method, spare=spare or None)
    )
    seconds = time.perf_counter() - t0
    if not report.ok:
        raise SystemExit(f"chute failed: {[f.error for f in report.files if f.error]}")
    return {
        "seconds": seconds,
        "cpu": _cpu() - cpu0,
        "sent": report.bytes_sent,
        "rows": report.rows_loaded,
        "methods": report.methods,
        "why": report.method_why,
    }


def main(argv: list[str]) -> int:
    kind, args = argv[0], argv[1:]
    result = raw(*args[:5], args[5:]) if kind == "raw" else chute_load(*args)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
