"""Transient failures of a server, tried again with backoff: the rule every server write shares."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from chute.errors import CommitUncertain, ShardUnavailable, TargetError, TransientTargetError
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


# A system-table read on servers before 19.x fails when another table goes away while
# it is listed (ClickHouse issue 3982): read again. The missing table is someone else's.
# Workers that share a job drop many stages at once (server-parse: one per file): ten tries,
# 10 s of waits in all.
_VANISHED_TABLE = re.compile(r"Table (\S+) doesn't exist")
_SYSTEM_READ = re.compile(r"\bFROM\s+system\.", re.IGNORECASE)
SYSTEM_READ_ATTEMPTS = 10


def listing_race(sql: str, exc: TargetError) -> bool:
    """A system-table read that failed on a table dropped while it was listed (not a
    missing system table): 18.16 lists every table of a database, then looks each up."""
    vanished = _VANISHED_TABLE.search(str(exc))
    return (
        exc.code == 60
        and _SYSTEM_READ.search(sql) is not None
        and vanished is not None
        and not vanished.group(1).strip("`.").startswith("system.")
    )
