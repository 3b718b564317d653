"""Following a topic: bounded loads one after another until SIGINT/SIGTERM."""

from __future__ import annotations

import signal
import threading
import time
import urllib.parse
from collections.abc import Callable
from types import FrameType
from typing import Any

from chute.sources.kafka.source import open_sources
from chute.sources.kafka.spec import KafkaSpec


def _with_params(pattern: str, extra: dict[str, str]) -> str:
    parts = urllib.parse.urlsplit(pattern)
    params = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    params.update(extra)
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(params)))


def with_options(patterns: list[str], **options: str | int | None) -> list[str]:
    """kafka:// patterns with options from command-line flags (`group`, `start`, `format`,
    `batch`, `max_units`) as query parameters; None leaves one out; other patterns pass as they are.
    For the CLI: `patterns = with_options(patterns, group=args.group, start=args.start)`."""
    extra = {name: str(value) for name, value in options.items() if value is not None}
    if not extra:
        return list(patterns)
    return [_with_params(p, extra) if p.lower().startswith("kafka://") else p for p in patterns]


def follow_patterns(patterns: list[str], units_per_pass: int) -> list[str]:
    """The URLs each pass of `follow` loads: `start=latest` pinned to now (so a later pass
    does not skip what came meanwhile) and at most `units_per_pass` units per pass."""
    now = str(int(time.time() * 1000))
    out = []
    for pattern in patterns:
        spec = KafkaSpec.parse([pattern])
        extra = {"max_units": str(units_per_pass)}
        if spec.start == "latest":
            extra["start"] = now
        out.append(_with_params(pattern, extra))
    return out


def follow(
    patterns: list[str],
    load_once: Callable[[list[str]], Any],
    idle_seconds: float = 1.0,
    units_per_pass: int = 16,
    stop: threading.Event | None = None,
    on_pass: Callable[[Any], None] | None = None,
) -> None:
    """Keep loading until SIGINT/SIGTERM (or `stop`): bounded runs one after another.

    Each pass is an ordinary bounded load of at most `units_per_pass` units, so
    everything a single load promises holds (a SIGKILL at any moment, then a
    restart, leaves each message once); a signal lets the current pass finish
    and then returns. `load_once(patterns)` runs one load and returns its report.
    """
    stop = stop or threading.Event()
    passes = follow_patterns(patterns, units_per_pass)
    previous: dict[signal.Signals, Any] = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, on_signal)
    try:
        while not stop.is_set():
            before = set(open_sources)
            try:
                report = load_once(passes)
            finally:
                for source in set(open_sources) - before:
                    source.close()  # its consumers and buffers: a pass's own
            if on_pass is not None:
                on_pass(report)
            busy = any(getattr(f, "state", "") == "loaded" for f in getattr(report, "files", []))
            if not busy:
                stop.wait(idle_seconds)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
