"""One batch's rows on the wire at a time."""

from __future__ import annotations

import threading
from collections.abc import Iterator


class StreamGate:
    """Held while a batch's rows stream to a server: from the first row read until its last
    body is sent, not until the server answers. The next batch streams once this one's rows
    are all on the wire, while the server writes this one's parts and this one's books are
    kept; the engine's threads read one batch at a time.

    Two batches streaming at once end together, and the server then writes both batches'
    parts while chute waits: 0.3-0.5 s of 2.3 on split cores (the server on one, chute on
    the other). One after the other, only the last batch's parts are written after its last
    byte: 2.41 s -> 2.06 s on split cores, even on shared ones (bench/README.md)."""

    def __init__(self, lock: threading.Lock, bodies: int) -> None:
        self.lock = lock
        self.left = bodies
        """Bodies not yet sent: the gate opens when the last one is."""
        self._mutex = threading.Lock()
        self._held = False

    def __enter__(self) -> StreamGate:
        self.lock.acquire()
        self._held = True
        return self

    def __exit__(self, *_: object) -> None:
        self.release()  # (a body never started, or a failure: open it anyway)

    def release(self) -> None:
        with self._mutex:
            if self._held:
                self._held = False
                self.lock.release()

    def passing(self, body: Iterator[bytes]) -> Iterator[bytes]:
        """`body`, opening the gate once it and the other bodies are all sent."""
        try:
            yield from body
        finally:
            with self._mutex:
                self.left -= 1
                last = self.left == 0
            if last:
                self.release()
