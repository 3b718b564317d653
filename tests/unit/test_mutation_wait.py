"""Waiting for a mutation on servers before 20.1 (no `mutations_sync`): done when system.mutations
says so, or when every active part of its partitions is newer than its block. 18.16 can keep a
replicated mutation's is_done at 0 after a replica restarted, its parts all mutated (seen in the
kill trials); the transport is faked to reach that state, which a live server shows only by chance.
A plain MergeTree's mutation names one block for all partitions (partition '')."""

from __future__ import annotations

from typing import Any

import pytest

from chute.errors import TargetError
from chute.sql import TableName
from chute.targets import mutations
from chute.targets.mutations import wait_for_mutations


class _Answers:
    """The two queries' answers: pending mutations, then the oldest active part per partition."""

    def __init__(self, pending: list[dict[str, Any]], oldest: dict[str, int]) -> None:
        self.pending, self.oldest, self.asked = pending, oldest, 0

    def rows(self, sql: str, context: str = "") -> list[dict[str, Any]]:
        self.asked += 1
        if "system.mutations" in sql:
            return self.pending
        return [{"partition_id": p, "v": str(v)} for p, v in self.oldest.items()]


REPLICATED = [{"p": ["0", "1", "2"], "b": ["39", "39", "37"]}]
PLAIN = [{"p": [""], "b": ["4"]}]


@pytest.mark.parametrize(
    ("pending", "oldest"),
    [
        (REPLICATED, {"0": 50, "1": 50, "2": 50}),  # all parts mutated, is_done still 0
        (REPLICATED, {"0": 50, "2": 40}),  # partition 1 has no part left
        (PLAIN, {"1": 5, "2": 7}),
        ([], {}),
    ],
)
def test_done_when_no_part_is_older_than_the_mutation(pending: list[dict[str, Any]], oldest: dict[str, int]) -> None:
    answers = _Answers(pending, oldest)
    wait_for_mutations(answers.rows, TableName("db", "ev"), "deleting")
    assert answers.asked == (2 if pending else 1)


@pytest.mark.parametrize(
    ("pending", "oldest"),
    [
        (REPLICATED, {"0": 50, "1": 38, "2": 50}),
        (PLAIN, {"1": 1, "2": 7}),  # one block for every partition: partition 1's part is older
        (PLAIN, {"1": 3}),
    ],
)
def test_a_part_older_than_the_mutation_keeps_it_pending(
    monkeypatch: pytest.MonkeyPatch, pending: list[dict[str, Any]], oldest: dict[str, int]
) -> None:
    monkeypatch.setattr(mutations, "MUTATION_TIMEOUT_SECONDS", 0.5)
    answers = _Answers(pending, oldest)
    with pytest.raises(TargetError, match="did not finish the delete"):
        wait_for_mutations(answers.rows, TableName("db", "ev"), "deleting")
    assert answers.asked >= 4


class _Deleting:
    """A server whose DELETE takes effect only on the `works`-th time (18.16 skipped one of two
    made at once for some parts, calling both done): counts of what the DELETE names."""

    def __init__(self, works: int) -> None:
        self.works, self.sent = works, 0

    def rows(self, sql: str, settings: Any = None, context: str = "") -> list[dict[str, Any]]:
        if "system.mutations" in sql:
            return []  # every mutation done, as the server says
        return [{"n": "0" if self.sent >= self.works else "169"}]

    def execute(self, sql: str, settings: Any = None, context: str = "") -> None:
        assert sql.startswith("ALTER TABLE `ev` DELETE WHERE _source IN ('a')")
        self.sent += 1


@pytest.mark.parametrize("works", [1, 2, 3])
def test_a_delete_whose_rows_are_still_there_is_sent_again(works: int) -> None:
    from chute.targets.server import ServerTarget

    server = _Deleting(works)
    server.execute("ALTER TABLE `ev` DELETE WHERE _source IN ('a')")
    ServerTarget._deleted(server, TableName("", "ev"), "DELETE WHERE _source IN ('a')", "test")  # type: ignore[arg-type]
    assert server.sent == works


def test_a_delete_that_never_takes_fails_the_unit() -> None:
    from chute.targets.server import DELETE_ATTEMPTS, ServerTarget

    server = _Deleting(works=99)
    server.sent = 1
    with pytest.raises(TargetError, match="169 row\\(s\\) still there after 3 deletes"):
        ServerTarget._deleted(server, TableName("", "ev"), "DELETE WHERE _source IN ('a')", "test")  # type: ignore[arg-type]
    assert server.sent == 1 + DELETE_ATTEMPTS
