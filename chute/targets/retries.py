"""Transient failures of a server, tried again with backoff: the rule every server write shares."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from chute.errors import CommitUncertain, ShardUnavailable, TransientTargetError
from chute.remote.http import retry

RETRIES = 4
BACKOFF_SECONDS = 0.5

_T = TypeVar("_T")


class NoNode(ShardUnavailable):
    """No node of the shard answered at all: asking again at once would not help."""


def retrying(call: Callable[[], _T]) -> _T:
    """`call` again after transient failures (connection lost, timeout, server busy), with backoff.

    Safe for a staged write because each attempt has its own stage table; never after
    CommitUncertain, when rows may already be in (the caller repairs first)."""
    return retry(
        lambda _: call(),
        RETRIES + 1,
        BACKOFF_SECONDS,
        lambda exc: isinstance(exc, TransientTargetError) and not isinstance(exc, (CommitUncertain, NoNode)),
    )
