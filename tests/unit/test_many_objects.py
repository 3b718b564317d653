"""`many_objects` in the chute command: what a load made with the collector paused is frozen
out of later collections only after many objects (a re-run's 100,000 units and entries), not
after a small batch's few (a long `--follow` run would freeze each batch's young cycles)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from chute.load import ledger


@pytest.fixture()
def command(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(ledger, "_freeze_after", True)
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_many_objects_are_frozen_and_a_few_are_not(command: None) -> None:
    with ledger.many_objects():
        few: list[list[int]] = [[] for _ in range(100)]
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    with ledger.many_objects():
        many: list[list[int]] = [[] for _ in range(ledger.FREEZE_OBJECTS + 1000)]
    assert gc.get_freeze_count() > ledger.FREEZE_OBJECTS and gc.isenabled()
    assert len(few) + len(many) > 0


def test_the_library_never_freezes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger, "_freeze_after", False)
    gc.unfreeze()
    with ledger.many_objects():
        many: list[list[int]] = [[] for _ in range(ledger.FREEZE_OBJECTS + 1000)]
    assert gc.get_freeze_count() == 0 and len(many) > 0
