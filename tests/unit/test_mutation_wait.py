"""Waiting for a mutation on servers before 20.1 (no `mutations_sync`): done when system.mutations
says so, or when every active part of its partitions is newer than its block. 18.16 can keep a
replicated mutation's is_done at 0 after a replica restarted, its parts all mutated (seen in the
kill trials); the transport is faked to reach that state, which a live server shows only by chance."""

from __future__ import annotations

from typing import Any

import pytest

from chute.errors import TargetError
from chute.sql import TableName
from chute.targets import server
from chute.targets.server import ServerTarget


class _Answers:
    """The two queries' answers: pending mutations, then the oldest active part per partition."""

    def __init__(self, pending: list[dict[str, Any]], oldest: dict[str, int]) -> None:
        self.pending, self.oldest, self.asked = pending, oldest, 0

    def rows(self, sql: str, settings: object = None, context: str = "") -> list[dict[str, Any]]:
        self.asked += 1
        if "system.mutations" in sql:
            return self.pending
        return [{"partition_id": p, "v": str(v)} for p, v in self.oldest.items()]


def _wait(answers: _Answers) -> None:
    ServerTarget._wait_for_mutations(answers, TableName("db", "ev"), "deleting")  # type: ignore[arg-type]


STUCK = [{"p": ["0", "1", "2"], "b": ["39", "39", "37"]}]


def test_a_mutation_whose_parts_are_all_newer_is_done() -> None:
    answers = _Answers(STUCK, {"0": 50, "1": 50, "2": 50})
    _wait(answers)
    assert answers.asked == 2


def test_nothing_pending_is_done_at_once() -> None:
    answers = _Answers([], {})
    _wait(answers)
    assert answers.asked == 1


def test_a_part_older_than_the_mutation_keeps_it_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "MUTATION_TIMEOUT_SECONDS", 0.5)
    answers = _Answers(STUCK, {"0": 50, "1": 38, "2": 50})
    with pytest.raises(TargetError, match="did not finish the delete"):
        _wait(answers)
    assert answers.asked >= 4
