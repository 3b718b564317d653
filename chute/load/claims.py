"""Claims with leases: many chute workers share one job, and no unit loads twice.

A ClickHouse server gives no transaction and no compare-and-set, but an INSERT
is atomic and visible to every SELECT that starts after it returned. The
protocol uses only that (docs/concurrency.md has the argument in full):

1. A worker INSERTs a `held` row for each unit it wants, under a token of its
   own, with `lease_end = now() + lease` in the server's clock.
2. It then reads the live claims of those units. A unit is its own only when
   its claim is the one live claim there; otherwise it withdraws (a
   `released` row) and comes back later. Of two workers that claim a unit at
   once, the one whose INSERT returned last sees the other's claim, so at
   most one of them goes on (both may withdraw; then both try again later).
3. While it works, a heartbeat renews its leases. A lease that could not be
   renewed in time is given up, never renewed late, so a held lease is one
   unbroken interval and nobody else can have won the unit inside it.
4. Just before its rows move into the table, the worker checks that its
   leases are still live, in its own clock and in the server's (`guard`).
5. After the ledger says `done`, it releases the claim.

A claim whose lease ended is dead: its worker died or lost touch, and the next
claimant repairs the unit (deletes what may have got in) and loads it. A claim
of a process on this host that no longer exists is dead at once, so a re-run
after a crash does not wait for the lease.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from chute.errors import ChuteError
from chute.load.books import Books
from chute.scratch import process_alive
from chute.sql import TableName, quote_ident, quote_str
from chute.targets.base import Target

CLAIMS_TABLE = "_chute_claims"
DEFAULT_LEASE_SECONDS = 30
SAFETY_MARGIN = 1 / 3
"""Share of the lease kept in hand: a worker stops trusting its lease this early, so the
check before a commit and the commit itself fit well inside the lease."""

CLAIM_COLUMNS = (
    ("table", "String"),
    ("unit", "String"),
    ("token", "String"),
    ("worker", "String"),
    ("host", "String"),
    ("process", "String"),
    ("state", "String"),
    ("lease_end", "DateTime"),
    ("at", "DateTime"),
)


class ClaimLost(ChuteError):
    """This worker's lease on a unit ended before its rows were committed: another worker
    may own the unit now, so this attempt must not commit. Not a failure of the unit:
    not terminal, so no fallback path takes it for bad rows."""

    terminal = False


@dataclass(frozen=True)
class Holder:
    """A live claim of another worker on a unit."""

    unit: str
    token: str
    worker: str
    host: str
    process: str
    since: str
    lease_end: str


def host_identity() -> str:
    """This machine's name and boot: processes with the same host identity share a pid space
    (containers on one kernel have their own host names)."""
    boot = ""
    with contextlib.suppress(OSError), open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
        boot = fh.read().strip()
    return f"{socket.gethostname()}/{boot}"


def process_identity(pid: int | None = None) -> str:
    """`pid:start` where /proc tells the start time (a pid used again is another process)."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{_start_time(pid)}"


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def process_gone(process: str) -> bool:
    """Whether the process `pid:start` of this host has ended."""
    pid_text, _, start = process.partition(":")
    if not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if not process_alive(pid):
        return True
    return bool(start) and _start_time(pid) not in ("", start)


class Claims:
    """The claims of one worker on the units of one table, kept in `_chute_claims`."""

    def __init__(
        self, target: Target, table: TableName, worker: str | None, lease_seconds: int, books: Books | None = None
    ) -> None:
        if lease_seconds < 3:
            raise ValueError("a lease must be at least 3 seconds")
        self.target = target
        self.books = books or Books(target, table)
        self.table = table
        self.name = TableName(table.database, CLAIMS_TABLE)
        self.lease = lease_seconds
        self.host = host_identity()
        self.process = process_identity()
        self.worker = worker or f"{socket.gethostname()}:{os.getpid()}"
        self.load = uuid.uuid4().hex[:12]
        self._round = 0
        self._lock = threading.Lock()
        self._held: dict[tuple[str, str], float] = {}
        """(unit, token) -> the monotonic time until which this worker trusts the lease."""
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self.round_trips = 0

    # -- setup ----------------------------------------------------------------

    def ensure(self) -> None:
        body = ", ".join(f"{quote_ident(n)} {t}" for n, t in CLAIM_COLUMNS)
        self.books.create(self.name, body, "(`table`, unit, token)", "creating the claims table")

    @contextlib.contextmanager
    def heartbeat(self) -> Iterator[None]:
        """Renew this worker's leases every third of a lease while the block runs."""
        self._stop.clear()
        self._beat = threading.Thread(target=self._renew_loop, name="chute-heartbeat", daemon=True)
        self._beat.start()
        try:
            yield
        finally:
            self._stop.set()
            self._beat.join()
            self._beat = None

    # -- the protocol ---------------------------------------------------------

    def claim(self, units: Sequence[str]) -> tuple[list[str], dict[str, Holder]]:
        """Try to claim `units`: (those now this worker's, {unit: a live holder} of the rest)."""
        if not units:
            return [], {}
        with self._lock:
            self._round += 1
            token = f"{self.load}.{self._round}"
        sent = time.monotonic()
        self._insert([(u, token) for u in units], "held")
        live = self._live(units)
        won: list[str] = []
        busy: dict[str, Holder] = {}
        lost: list[tuple[str, str]] = []
        for unit in units:
            others = [h for h in live.get(unit, []) if h.token != token and not self._dead(h)]
            mine = any(h.token == token for h in live.get(unit, []))
            if mine and not others:
                won.append(unit)
            else:
                lost.append((unit, token))
                if others:
                    busy[unit] = others[0]
        until = sent + self.lease * (1 - SAFETY_MARGIN)
        with self._lock:
            for unit in won:
                self._held[(unit, token)] = until
        if lost:
            self._insert(lost, "released")
        return won, busy

    def release(self, units: Iterable[str]) -> None:
        """Give up this worker's claims on `units` (after their ledger rows are written)."""
        keys = set(units)
        with self._lock:
            pairs = [p for p in self._held if p[0] in keys]
            for pair in pairs:
                del self._held[pair]
        if pairs:
            self._insert(pairs, "released")

    def release_all(self) -> None:
        with self._lock:
            pairs = list(self._held)
            self._held.clear()
        if pairs:
            with contextlib.suppress(ChuteError):
                self._insert(pairs, "released")

    def guard(self, local_only: bool = False) -> None:
        """Raise ClaimLost unless every claim this worker holds is live, in this process's
        clock (renewed in time) and, unless `local_only`, in the server's (lease_end still
        ahead of now())."""
        with self._lock:
            held = dict(self._held)
        if not held:
            return
        now = time.monotonic()
        late = sorted(unit for (unit, _), until in held.items() if until <= now)
        if late:
            raise ClaimLost(f"{late[0]}: the claim on it could not be renewed in time; another worker may load it")
        if local_only:
            return
        tokens = sorted({token for _, token in held})
        rows = self._rows(
            f"SELECT unit, token FROM {self.name.sql} WHERE `table` = {quote_str(str(self.table))} "
            f"AND token IN ({', '.join(quote_str(t) for t in tokens)}) GROUP BY unit, token "
            "HAVING max(lease_end) > now() AND countIf(state != 'held') = 0",
            "checking claims",
        )
        live = {(str(r["unit"]), str(r["token"])) for r in rows}
        with self._lock:
            # A claim released meanwhile (another lane's batch, done) was given up, not lost: its
            # `released` row may already be on the server. Taken for lost, it made the lane that
            # asked take its committed rows out again (issue 46 item 9).
            missing = sorted(unit for unit, token in held if (unit, token) not in live and (unit, token) in self._held)
        if missing:
            raise ClaimLost(f"{missing[0]}: the claim on it ended (by the server's clock); another worker may load it")

    def holders(self, units: Sequence[str]) -> dict[str, list[Holder]]:
        """Live claims of other workers on `units` (claims of processes known gone left out)."""
        mine = self._tokens()
        return {
            unit: kept
            for unit, found in self._live(units).items()
            if (kept := [h for h in found if h.token not in mine and not self._dead(h)])
        }

    def local_workers(self) -> int:
        """Workers of this host (this one included) holding live claims on the table now: they
        share this host's cores."""
        found = self._rows(
            f"SELECT uniqExact(process) AS n FROM (SELECT token, any(process) AS process FROM {self.name.sql} "
            f"WHERE `table` = {quote_str(str(self.table))} AND host = {quote_str(self.host)} GROUP BY unit, token "
            "HAVING max(lease_end) > now() AND countIf(state != 'held') = 0)",
            "reading claims",
        )
        return max(1, int(str(found[0]["n"]))) if found else 1

    def others_working(self) -> bool:
        """Whether another worker holds a live claim on this table's units now."""
        mine = self._tokens()
        return any(h.token not in mine for h in self.all_live())

    def all_live(self) -> list[Holder]:
        """Every live claim on this table's units (claims of processes known gone left out)."""
        return [h for found in self._live(None).values() for h in found if not self._dead(h)]

    # -- internals ------------------------------------------------------------

    def _tokens(self) -> set[str]:
        with self._lock:
            return {token for _, token in self._held}

    def _dead(self, holder: Holder) -> bool:
        return holder.host == self.host and holder.process != self.process and process_gone(holder.process)

    def _insert(self, pairs: Sequence[tuple[str, str]], state: str) -> None:
        lease = f"now() + {self.lease}" if state == "held" else "toDateTime(0)"
        fixed = (
            f"{quote_str(str(self.table))}, {{unit}}, {{token}}, {quote_str(self.worker)}, "
            f"{quote_str(self.host)}, {quote_str(self.process)}, {quote_str(state)}, {lease}, now()"
        )
        values = ", ".join("(" + fixed.format(unit=quote_str(u), token=quote_str(t)) + ")" for u, t in pairs)
        self.round_trips += 1
        self.books.insert(self.name, f"INSERT INTO {self.name.sql} VALUES {values}", "writing claims")

    def _rows(self, sql: str, context: str) -> list[dict[str, object]]:
        self.round_trips += 1
        return self.books.rows(self.name, sql, context)

    def _live(self, units: Sequence[str] | None) -> dict[str, list[Holder]]:
        where = f"`table` = {quote_str(str(self.table))}"
        if units is not None:
            where += f" AND unit IN ({', '.join(quote_str(u) for u in units)})"
        rows = self._rows(
            "SELECT unit, token, any(worker) AS worker, any(host) AS host, any(process) AS process, "
            "toString(min(at)) AS since, toString(max(lease_end)) AS lease_until "
            f"FROM {self.name.sql} WHERE {where} GROUP BY unit, token "
            "HAVING max(lease_end) > now() AND countIf(state != 'held') = 0 ORDER BY unit, since, token",
            "reading claims",
        )
        live: dict[str, list[Holder]] = {}
        for r in rows:
            holder = Holder(
                str(r["unit"]),
                str(r["token"]),
                str(r["worker"]),
                str(r["host"]),
                str(r["process"]),
                str(r["since"]),
                str(r["lease_until"]),
            )
            live.setdefault(holder.unit, []).append(holder)
        return live

    def _renew_loop(self) -> None:
        period = self.lease / 3
        while not self._stop.wait(period):
            self._renew()

    def _renew(self) -> None:
        now = time.monotonic()
        with self._lock:
            # A lease that already lapsed is never renewed: someone else may have won the unit since.
            pairs = [p for p, until in self._held.items() if until > now]
        if not pairs:
            return
        try:
            self._insert(pairs, "held")
        except ChuteError:
            return  # tried again at the next beat; the guard refuses a commit once the lease is too old
        # The renewal counts only if it reached the server before the old lease could end
        # (its send time plus a whole lease): else the lease may have lapsed in between.
        back = time.monotonic()
        with self._lock:
            for pair in pairs:
                until = self._held.get(pair)
                if until is None:
                    continue
                sent_before = until - self.lease * (1 - SAFETY_MARGIN)
                self._held[pair] = now + self.lease * (1 - SAFETY_MARGIN) if back < sent_before + self.lease else 0.0
