"""A fixed set of threads that run calls in the order of their batch: server-parse posts files
through it (chute.load.serverparse), so earlier batches' files always go first."""

from __future__ import annotations

import itertools
import queue
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field


@dataclass(order=True)
class _Post:
    priority: tuple[int, int]
    call: Callable[[], None] | None = field(compare=False)
    future: Future[None] | None = field(compare=False)


class Posts:
    """A fixed number of threads that post files for every batch of a load, earlier
    batches first: the server always has that many files to parse, and a batch keeping
    its books (claims, ledger, the move-in) leaves no gap."""

    def __init__(self, threads: int) -> None:
        self._queue: queue.PriorityQueue[_Post] = queue.PriorityQueue()
        self._seq = itertools.count()
        self._threads = [threading.Thread(target=self._run, name="chute-post", daemon=True) for _ in range(threads)]
        for thread in self._threads:
            thread.start()

    def submit(self, batch: int, call: Callable[[], None]) -> Future[None]:
        future: Future[None] = Future()
        self._queue.put(_Post((batch, next(self._seq)), call, future))
        return future

    def _run(self) -> None:
        while True:
            post = self._queue.get()
            if post.call is None or post.future is None:
                return
            if not post.future.set_running_or_notify_cancel():
                continue
            try:
                post.call()
            except BaseException as exc:  # handed to the batch that waits for it
                post.future.set_exception(exc)
            else:
                post.future.set_result(None)

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(_Post((sys.maxsize, next(self._seq)), None, None))
        for thread in self._threads:
            thread.join()
