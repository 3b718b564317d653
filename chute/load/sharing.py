"""One job, many workers: a batch is loaded only under this worker's claims (chute.load.claims).

A unit another worker holds waits for the end of this worker's own share:
then it is done (skipped here), or its holder's lease ended and it is taken
over. A claimed unit's ledger state is read afresh before it loads.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence

from chute.cores import usable_cores
from chute.load.claims import Claims
from chute.load.context import LoadContext
from chute.load.outcome import Plan
from chute.report import FileState
from chute.units import Unit

SHARE_RECOUNT_SECONDS = 2.0
"""How often a worker counts the workers on its host (a claims read)."""


class Sharing:
    def __init__(self, ctx: LoadContext, claims: Claims) -> None:
        self.ctx = ctx
        self.claims = claims
        self.waiting: dict[str, Unit] = {}
        """Units another worker held when this one wanted them: looked at again at the end."""
        self._lock = threading.Lock()
        self._counted_at = -SHARE_RECOUNT_SECONDS

    def wait_for(self, units: Sequence[Unit]) -> None:
        with self._lock:
            for unit in units:
                self.waiting[unit.key] = unit

    def is_waiting(self, unit: Unit) -> bool:
        with self._lock:
            return unit.key in self.waiting

    def claimed(self, batch: list[Unit], plan: Plan, engine_reads: bool = True) -> list[Unit]:
        """The units of `batch` this worker now holds and still has to load.

        Units another worker holds wait for the end. The ledger is read again for
        the rest: another worker may have loaded them since the plan was made, or
        died while loading them (then they are repaired: their rows removed first).
        `engine_reads`: the engine here reads the batch (else the server parses it,
        and this host's cores need no sharing out).
        """
        won, _busy = self.claims.claim([u.key for u in batch])
        mine = set(won)
        self.wait_for([u for u in batch if u.key not in mine])
        with self._lock:
            for key in mine:
                self.waiting.pop(key, None)
        units = [u for u in batch if u.key in mine]
        if engine_reads:
            self._share_cores()
        load, settled = self._fresh(units, plan)
        for unit in list(load):
            if unit.is_range and not self._earlier_ranges_done(unit):
                load.remove(unit)
                settled.append(unit.key)
                self.wait_for([unit])
        self.claims.release(settled)
        return load

    def _share_cores(self) -> None:
        """Workers on one host share its cores: each takes its part of them (unless --workers
        says otherwise), so that two workers on two cores do not run four engine threads."""
        if self.ctx.opts.workers is not None:
            return
        now = time.monotonic()
        if now - self._counted_at < SHARE_RECOUNT_SECONDS:
            return
        self._counted_at = now
        cores = usable_cores()
        self.ctx.workers = max(1, cores // self.claims.local_workers())

    def _fresh(self, units: list[Unit], plan: Plan) -> tuple[list[Unit], list[str]]:
        """(units to load, keys settled without loading) by the ledger as it stands now."""
        ctx = self.ctx
        fresh = ctx.ledger.latest([u.key for u in units])
        load: list[Unit] = []
        settled: list[str] = []
        for unit in units:
            entry, earlier = fresh.get(unit.key), ctx.ledger_latest.get(unit.key)
            if entry is not None:
                ctx.ledger_latest[unit.key] = entry
            changed_here = entry is not None and (earlier is None or earlier.seq != entry.seq)
            if entry is None:
                load.append(unit)
            elif entry.state == "done" and unit.matches(entry.identity):
                settled.append(unit.key)  # loaded, by another worker since the plan if changed_here
                plan.results[unit.key].state = FileState.SKIPPED
            elif entry.state == "done" and not changed_here:
                load.append(unit)  # changed since it was loaded; the plan said reload
            elif entry.state == "failed" and changed_here:
                settled.append(unit.key)  # another worker failed it during this run: not again
                result = plan.results[unit.key]
                result.state, result.error, result.rows_rejected = FileState.FAILED, entry.error, entry.rows_rejected
            elif entry.state == "done":
                settled.append(unit.key)  # loaded again by another worker in this run
            else:
                plan.replace.add(unit.key)  # started by a worker that is gone, or failed before
                load.append(unit)
        return load, settled

    def _earlier_ranges_done(self, unit: Unit) -> bool:
        """Whether the ranges before `unit` of its file are all loaded (read afresh): a
        range numbers its rows after theirs, so it waits while another worker loads them."""
        ctx = self.ctx
        earlier = [r.key for r in ctx.ranges_of.get(unit.origin, []) if r.start < unit.start]
        if not earlier:
            return True
        fresh = ctx.ledger.latest(earlier)
        ctx.ledger_latest.update(fresh)
        if all(k in fresh and fresh[k].state == "done" for k in earlier):
            return True
        # Failed for good, or nobody's: the range goes on, and `place_range` says why it cannot load.
        held = self.claims.holders(earlier)
        with self._lock:
            return not held and not any(k in self.waiting for k in earlier)

    def load_waiting(
        self, one: Callable[[list[Unit]], None], batches: Callable[[list[Unit]], list[list[Unit]]]
    ) -> None:
        """Units other workers held: done when they are done; taken over when their claims end."""
        rng = random.Random()
        idle = 0
        while True:
            with self._lock:
                waiting = sorted(self.waiting.values(), key=lambda u: (u.origin, u.start, u.key))
            if not waiting:
                return
            held = self.claims.holders([u.key for u in waiting])
            free = [u for u in waiting if u.key not in held]
            if free:
                for batch in batches(free):
                    one(batch)
                with self._lock:
                    if len(self.waiting) < len(waiting):
                        idle = 0
                        continue
            # Nothing moved: wait a moment (apart from other workers) before looking again; soon
            # at first (a holder near its end releases within a batch), then less often.
            pause = min(1.0, self.ctx.opts.lease_seconds / 10, 0.05 * 2**idle)
            idle += 1
            time.sleep(pause * rng.uniform(0.5, 1.5))

    def drop_stale_stages(self) -> None:
        """Stage tables of workers that hold no live claim (killed): theirs alone."""
        claims = self.claims
        self.ctx.target.prepare(self.ctx.table, lambda: {h.token.split(".", 1)[0] for h in claims.all_live()})
