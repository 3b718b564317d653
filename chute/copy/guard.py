"""Copies into one table at once: claims in the destination's books, as shared loads make them.

Each run of a copy into a server claims (`chute.load.claims`) a run marker of
its own and each unit before it copies it, names its stage tables after its
claims (`_chute_stage_<table>_<owner>_<random>`) and drops, when it starts,
only the stages of owners with no live claim (runs that were killed). A unit
another run holds is waited for; once released, the ledger tells whether that
run copied it (then it is skipped here) or not (then it is copied here). Just
before a unit's rows replace the destination's partition, the claim is checked
live (`guard`): a run that lost its lease copies nothing in.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from chute.copy.plan import CopyUnit
from chute.load.books import Books
from chute.load.claims import DEFAULT_LEASE_SECONDS, Claims
from chute.sql import TableName
from chute.targets.base import Target
from chute.targets.staging import Stage

T = TypeVar("T")
WAIT_SECONDS = 0.5
"""How often a unit another run holds is looked at again (spread at random)."""


class RunGuard:
    """The claims of one copy run on the destination table (a server's)."""

    def __init__(
        self, dest: Target, table: TableName, books: Books, lease_seconds: int = DEFAULT_LEASE_SECONDS
    ) -> None:
        self.dest = dest
        self.table = table
        self.claims = Claims(dest, table, None, lease_seconds, books)
        self.owner = self.claims.load
        """The tag of this run's stage tables (12 hex digits: `Stage.drop_stale` reads it)."""
        self.marker = f"run:{self.owner}"
        self.mine: set[str] = set()
        """Units claimed at the start (one insert for all: an 18.16 insert is not cheap)."""
        self._lock = threading.Lock()

    def start(self, keys: Sequence[str], shards: Sequence[tuple[Target, TableName]] = ()) -> set[str]:
        """Claim the run marker and the units `keys` (before any stage exists; one insert), then
        drop the stages of runs gone (on the destination, and on the nodes of a Distributed
        destination's `shards`). The units won; the others are claimed one by one (`take`)."""
        self.claims.ensure()
        won, _ = self.claims.claim([self.marker, *keys])
        if self.marker not in won:  # (a key no other run uses: lost only to a clock gone mad)
            raise RuntimeError("could not claim this copy's run marker")
        self.mine = set(won) - {self.marker}
        Stage.drop_stale(self.dest, self.table, self.live_owners)
        for node, local in shards:
            Stage.drop_stale(node, local, self.live_owners)
        return set(self.mine)

    def live_owners(self) -> set[str]:
        return {h.token.split(".", 1)[0] for h in self.claims.all_live()}

    def take(self, unit: CopyUnit, copied_meanwhile: Callable[[], T | None], waiting: Callable[[], None]) -> T | None:
        """Claim `unit`, waiting while another run holds it: None when this run is to copy it,
        else what `copied_meanwhile` says of the copy another run made since this one read the
        ledger (asked once the claim is won: the other run wrote its ledger row before it let go).

        No deadlock: a run reaches units it did not claim at the start only once all those it
        did are under way (`first`), and it lets go of those it finished (`waiting`: the ledger
        rows written, the claims released) before each wait; a unit won here is copied at once."""
        with self._lock:
            if unit.key in self.mine:
                self.mine.discard(unit.key)
                return None  # (claimed at the start; the ledger was read after: see Copier.run)
        rng = random.Random()
        while True:
            # (a read while another run holds it: no claim row written each time it looks)
            won = [] if self.claims.holders([unit.key]) else self.claims.claim([unit.key])[0]
            if won:
                theirs = copied_meanwhile()
                if theirs is not None:
                    self.claims.release([unit.key])
                return theirs
            waiting()
            time.sleep(WAIT_SECONDS * rng.uniform(0.5, 1.5))

    def first(self, units: list[CopyUnit]) -> list[CopyUnit]:
        """`units` with those claimed at the start first (in their order), then the others."""
        return [u for u in units if u.key in self.mine] + [u for u in units if u.key not in self.mine]

    def check(self) -> None:
        """ClaimLost unless this run's claims are live (just before rows move in)."""
        self.claims.guard()

    def release(self, keys: list[str]) -> None:
        self.claims.release(keys)

    def finish(self) -> None:
        self.claims.release_all()
