"""What every public call of chute (load, forget, status, query, export, copy, time_queries)
shares: calls from several threads take turns, and paths may be `pathlib.Path`s."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

Params = ParamSpec("Params")
Returned = TypeVar("Returned")

_turn = threading.RLock()
_depth = 0
"""Public calls under way (one thread's, nested: `load` may call others)."""
_ended: list[Callable[[], None]] = []


def when_calls_end(hook: Callable[[], None]) -> None:
    """Call `hook` whenever the outermost public call returns (or raises)."""
    _ended.append(hook)


def public_call(call: Callable[Params, Returned]) -> Callable[Params, Returned]:
    """A public call that waits for one running in another thread of this process, and reads its
    `os.PathLike` arguments (alone or in a list) as text.

    chDB holds one engine per process: a call that opened another directory closed the engine a
    running one used (which then failed on the engine's "already initialized" error), and two
    loads of one table both found its files new (each loaded them: every row twice). Calls take
    turns, as chute processes on one directory do."""

    @functools.wraps(call)
    def in_turn(*args: Params.args, **kwargs: Params.kwargs) -> Returned:
        args = tuple(_text(a) for a in args)  # type: ignore[assignment]
        kwargs = {k: _text(v) for k, v in kwargs.items()}  # type: ignore[assignment]
        global _depth
        with _turn:
            _depth += 1
            try:
                return call(*args, **kwargs)
            finally:
                _depth -= 1
                if not _depth:
                    for hook in _ended:
                        hook()

    return in_turn


def _text(value: object) -> object:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, os.PathLike) for v in value):
        return [os.fspath(v) if isinstance(v, os.PathLike) else v for v in value]
    return value
