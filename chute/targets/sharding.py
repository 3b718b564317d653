"""Distributed tables from one server target: each shard's table written on a node of that shard.

A `Shards` belongs to one `ServerTarget` (its home node). It reads each
Distributed table's layout once per load, finds a node of every shard that
answers (the home node, the --node ones, then the cluster's hosts at the home
node's HTTP port), remembers it, asks again after it fails, and writes a batch
into every shard all-or-nothing as far as the servers allow.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from chute.errors import ChuteError, CommitUncertain, ShardUnavailable, TransientTargetError, UsageError
from chute.sql import TableName, quote_ident, quote_str
from chute.targets.cluster import Shard, ShardLayout, replica_rows, replication, shard_layout, wait_for_replicas
from chute.targets.engines import distributed
from chute.targets.retries import NoNode, retrying
from chute.targets.staging import CommitCheck, Stage, default_commands, stage_name
from chute.transport import ServerAddress

if TYPE_CHECKING:
    from chute.targets.server import ServerTarget

Fill = Callable[["ServerTarget", TableName, Shard | None, Mapping[str, str]], None]
"""Fills a stage table on a node: for a shard (its rows only), or None (all rows: a random key);
the stage itself fills the columns of the mapping (Stage.defaults): they are not sent."""
Send = Callable[[TableName, dict[str, str | int | float], Mapping[str, str]], None]
"""Sends every row of a batch into a table of the home node, with these settings of the server's;
that table fills the columns of the mapping itself: they are not sent."""
ROUTED_SETTINGS: dict[str, str | int | float] = {"insert_distributed_sync": 1, "load_balancing": "in_order"}
"""The route table's INSERT returns once every shard has its rows; each shard's rows go to its
first replica that answers (the home node where it is one: prefer_localhost_replica)."""


def where(select: str, condition: str) -> str:
    """`select`'s rows for which `condition` holds (the engine or the shard filters them)."""
    return f"SELECT * FROM ({select}) WHERE {condition}"


class Shards:
    def __init__(
        self,
        home: ServerTarget,
        nodes: Sequence[ServerAddress],
        connect: Callable[[ServerAddress], ServerTarget],
    ) -> None:
        self.home = home
        self.nodes = list(nodes)
        """Other nodes of the cluster (--node): where the shards of a Distributed table are written."""
        self._connect = connect
        self._layouts: dict[str, ShardLayout | None] = {}
        self._peers: dict[tuple[str, int], ServerTarget] = {}
        """(cluster, shard) -> the node of that shard that rows go to."""
        self._probed: dict[tuple[str, int, str], int | None] = {}
        """(host, port, cluster) of a node that answered -> its shard in that cluster (None: none)."""
        self._lock = threading.Lock()
        self._round_robin: dict[str, Iterator[int]] = {}
        self.rows_loaded: dict[tuple[str, int], int] = {}
        """Rows committed per (cluster, shard) by this load."""
        self._nodes: dict[tuple[str, int, str], ServerTarget] = {}
        """(host, port, cluster) of a node that answered -> the node."""
        self.allow_missing = False
        """--allow-missing-shards: a random key's batches pass over a shard no node of which answers."""
        self._missing_told: set[tuple[str, int]] = set()
        self._reach_checked: set[str] = set()
        self.via_distributed = False
        """--insert-via-distributed: a batch is sent once, to the home node, which routes its rows
        into each shard's stage (`write_routed`)."""

    def peers(self) -> list[ServerTarget]:
        """The other nodes rows went to (not the home node)."""
        return [p for p in self._peers.values() if p is not self.home]

    def layout(self, table: TableName) -> ShardLayout | None:
        """The shards of a Distributed table (read once per load); None for another table."""
        key = str(table)
        if key not in self._layouts:
            database = quote_str(table.database) if table.database else "currentDatabase()"
            found = self.home.rows(
                f"SELECT engine_full FROM system.tables WHERE database = {database} AND name = {quote_str(table.table)}"
            )
            engine = distributed(str(found[0]["engine_full"])) if found else None
            if engine is None:
                if not found:
                    return None  # not created yet: asked again later
                self._layouts[key] = None
            else:
                layout = shard_layout(lambda sql: self.home.rows(sql), table, engine)
                if not layout.shards:
                    raise UsageError(f"table {table}: cluster {engine.cluster} is not in this server's remote_servers")
                if layout.engine.sharding_key is None and len(layout.shards) > 1:
                    raise UsageError(
                        f"table {table}: Distributed over {len(layout.shards)} shards without a sharding key "
                        "takes no inserts"
                    )
                self._layouts[key] = layout
        return self._layouts[key]

    # -- the books, the replicas, the counts ---------------------------------------------

    def prepare(self, layout: ShardLayout, live_owners: Callable[[], set[str]] | None) -> None:
        self._check_reach(layout)
        if self.via_distributed:  # a killed run's route tables, and its stages on every node (write_routed)
            with contextlib.suppress(ChuteError):
                Stage.drop_stale(self.home, layout.table, live_owners)
            for shard in layout.shards:
                with contextlib.suppress(ChuteError):
                    for peer in self.replicas(layout, shard):
                        Stage.drop_stale(peer, layout.local, live_owners)
            return
        for shard in layout.shards:
            with contextlib.suppress(ChuteError):  # a shard that is down keeps its stages for later
                Stage.drop_stale(self.peer(layout, shard), layout.local, live_owners)

    def _check_reach(self, layout: ShardLayout) -> None:
        """Once per load, before any row is written: a random key's table has every shard reached
        (a node of each answers), or the load fails naming the one that does not; with
        --allow-missing-shards its batches go to the others, with a note. (A keyed table's
        batches fail by themselves on a shard that is down: their rows have nowhere else to go.)"""
        if not layout.random or str(layout.table) in self._reach_checked:
            return
        self._reach_checked.add(str(layout.table))
        for shard in layout.shards:
            try:
                self.peer(layout, shard)
            except ShardUnavailable as exc:
                self._missing(layout, shard, exc)

    def _missing(self, layout: ShardLayout, shard: Shard, exc: ShardUnavailable) -> None:
        """A random key's shard that no node answers for: the error that fails the load, or (allowed)
        a note once per shard."""
        if not self.allow_missing:
            raise ShardUnavailable(
                f"{exc}; its rows would all go to the other shards: give a node of it with --node, or "
                "load into the shards that answer with --allow-missing-shards",
                code=exc.code,
                name=exc.name,
            ) from exc
        key = (layout.engine.cluster, shard.num)
        with self._lock:
            told = key in self._missing_told
            self._missing_told.add(key)
        if not told:
            self.home.notes.append(
                f"shard {shard.num} of cluster {layout.engine.cluster} did not answer ({exc}): its batches went "
                "to the other shards (--allow-missing-shards)"
            )

    def books_target(self, layout: ShardLayout) -> ServerTarget:
        return self.peer(layout, layout.shards[0])

    def settle(self, layout: ShardLayout) -> None:
        """Wait until every replica of each shard's table has fetched the rows."""
        for shard in layout.shards:
            try:
                peer = self.peer(layout, shard)
                note = wait_for_replicas(peer.rows, layout.local, where=f" (shard {shard.num})")
            except ChuteError as exc:
                note = f"shard {shard.num} of {layout.engine.cluster}: replicas not checked ({exc})"
            self.home.notes.extend([note] if note else [])

    def stats(self, layout: ShardLayout) -> tuple[int, int]:
        """(rows, bytes) counted on each shard's own table: a Distributed count may include rows
        still on their way (asynchronous inserts of others), or fail on a shard that is down."""
        rows = size = 0
        for shard in layout.shards:
            try:
                peer = self.peer(layout, shard)
                n, b = Stage.stats(peer, layout.local, table_totals=peer.capabilities.table_totals)
            except ChuteError as exc:
                self.home.notes.append(f"shard {shard.num} of {layout.engine.cluster}: not counted ({exc})")
                continue
            rows, size = rows + n, size + b
            loaded = self.rows_loaded.get((layout.engine.cluster, shard.num), 0)
            self.home.notes.append(
                f"shard {shard.num} of {layout.engine.cluster} ({peer.address.host}:{peer.address.port}): "
                f"{loaded:,} rows loaded, {layout.local} holds {n:,}"
            )
        return rows, size

    def placement(self, table: TableName) -> list[dict[str, Any]]:
        """Where the table's rows are: one entry per node that holds a copy (each replica of
        each shard of a Distributed table; each replica of a replicated one, among the home node
        and the --node ones), with its rows; a node that does not answer is listed with its
        error. Empty for a table on the home node alone."""
        home = self.home
        layout = self.layout(table)
        if layout is None and replication(home.rows, table) is None:
            return []
        found = []
        addresses = self._candidates(layout) if layout is not None else [home.address, *self.nodes]
        for address in dict.fromkeys(addresses):
            node = f"{address.host}:{address.port}"
            try:
                peer = home if address == home.address else self._connect(address)
                shard = _shard_of(peer, layout.engine.cluster) if layout is not None else None
                if layout is not None and shard is None:
                    continue  # a node outside the table's cluster
                local = layout.local if layout is not None else table
                if peer.table_columns(local) is None:
                    continue
                found.append(replica_rows(peer.rows, local, shard, node))
            except ChuteError as exc:
                found.append({"shard": None, "replica": "", "node": node, "rows": None, "error": str(exc)})
        return sorted(found, key=lambda r: (r["shard"] or 0, r["replica"], r["node"]))

    # -- a node of each shard ------------------------------------------------------------

    def _candidates(self, layout: ShardLayout) -> list[ServerAddress]:
        """Nodes that may hold a shard: the home node, the --node ones, then the cluster's hosts
        at the home node's HTTP port (the usual layout: the same port everywhere)."""
        home = self.home.address
        found = [home, *self.nodes]
        found += [dataclasses.replace(home, host=h) for s in layout.shards for h in s.host_names]
        unique: dict[tuple[str, int], ServerAddress] = {}
        for address in found:
            unique.setdefault((address.host, address.port), address)
        return list(unique.values())

    def peer(self, layout: ShardLayout, shard: Shard) -> ServerTarget:
        """A node of `shard` that answers (asked in turn; remembered): ShardUnavailable if none."""
        cluster = layout.engine.cluster
        with self._lock:
            known = self._peers.get((cluster, shard.num))
            if known is not None:
                return known
            # Another replica found before (the one in use failed and was forgotten): that one.
            for probe, num in self._probed.items():
                if probe[2] == cluster and num == shard.num and probe in self._nodes:
                    return self._peers.setdefault((cluster, num), self._nodes[probe])
            errors = []
            for address in self._candidates(layout):
                probe = (address.host, address.port, cluster)
                if probe in self._probed:
                    continue
                try:
                    peer = self.home if address == self.home.address else self._connect(address)
                    num = _shard_of(peer, cluster)
                except ChuteError as exc:
                    errors.append(f"{address.host}:{address.port}: {exc}")
                    continue
                self._probed[probe] = num
                self._nodes[probe] = peer
                if num is not None:
                    self._peers.setdefault((cluster, num), peer)
            found = self._peers.get((cluster, shard.num))
            if found is not None:
                return found
        hosts = ", ".join(shard.hosts)
        raise NoNode(
            f"shard {shard.num} of cluster {cluster} ({hosts}): no node of it answers over HTTP"
            + (f" ({errors[-1]})" if errors else "; give one with --node http(s)://host:port")
        )

    def replicas(self, layout: ShardLayout, shard: Shard) -> list[ServerTarget]:
        """Every node of `shard` that answers (all candidates asked once); ShardUnavailable if none."""
        cluster = layout.engine.cluster
        self.peer(layout, shard)
        with self._lock:
            for address in self._candidates(layout):
                probe = (address.host, address.port, cluster)
                if probe in self._probed:
                    continue
                try:
                    peer = self.home if address == self.home.address else self._connect(address)
                    self._probed[probe], self._nodes[probe] = _shard_of(peer, cluster), peer
                except ChuteError:
                    continue
            return [self._nodes[p] for p, num in self._probed.items() if num == shard.num and p in self._nodes]

    def on_shard(self, layout: ShardLayout, shard: Shard, call: Callable[[ServerTarget], None]) -> None:
        """`call` on a node of `shard`; where that node fails, once more on another that answers
        (another replica). ShardUnavailable, naming the shard, when none does."""
        for attempt in range(2):
            peer = self.peer(layout, shard)
            try:
                call(peer)
                return
            except TransientTargetError as exc:
                self._forget(layout, shard)
                if attempt == 1:
                    raise ShardUnavailable(
                        f"shard {shard.num} of cluster {layout.engine.cluster} ({peer.address.host}:"
                        f"{peer.address.port}): {exc}",
                        code=exc.code,
                        name=exc.name,
                    ) from exc

    def _forget(self, layout: ShardLayout, shard: Shard) -> None:
        """A shard's node failed: ask its nodes again next time (another replica may answer)."""
        cluster = layout.engine.cluster
        with self._lock:
            peer = self._peers.pop((cluster, shard.num), None)
            if peer is not None:
                self._probed.pop((peer.address.host, peer.address.port, cluster), None)

    def _next_shard(self, layout: ShardLayout) -> Shard:
        """For a random key: the next shard in turn by weight, passing over shards that are down."""
        cluster = layout.engine.cluster
        with self._lock:
            turns = self._round_robin.setdefault(
                cluster, itertools.cycle([s.num for s in layout.shards for _ in range(s.weight)])
            )
            first = next(turns)  # one turn per batch (taking a whole cycle always began with shard 1)
        by_num = {s.num: s for s in layout.shards}
        last: ShardUnavailable | None = None
        for num in [first, *(s.num for s in layout.shards if s.num != first)]:
            try:
                self.peer(layout, by_num[num])
                return by_num[num]
            except ShardUnavailable as exc:
                self._missing(layout, by_num[num], exc)  # (raises unless --allow-missing-shards)
                last = exc
        assert last is not None
        raise last

    # -- a batch into every shard -----------------------------------------------------------

    def write(
        self,
        layout: ShardLayout,
        context: str,
        fill: Fill,
        count_by_source: bool,
        before_commit: CommitCheck | None,
        constants: Mapping[str, str] | None = None,
    ) -> dict[str, int]:
        """Write a batch into a Distributed table's shards, all-or-nothing per batch as far as
        the servers allow: every shard's stage is filled (at once) before any is attached, so
        a shard that is down or fails while rows are sent leaves nothing anywhere.
        `constants`: as Target.write_batch's, filled by each stage."""
        return retrying(lambda: self._write_once(layout, context, fill, count_by_source, before_commit, constants))

    def _write_once(
        self,
        layout: ShardLayout,
        context: str,
        fill: Fill,
        count_by_source: bool,
        before_commit: CommitCheck | None,
        constants: Mapping[str, str] | None,
    ) -> dict[str, int]:
        home, cluster = self.home, layout.engine.cluster
        shards = [self._next_shard(layout)] if layout.random else list(layout.shards)
        peers = {s.num: self.peer(layout, s) for s in shards}
        with contextlib.ExitStack() as stack:
            stages = {}

            def unavailable(s: Shard, exc: TransientTargetError) -> ShardUnavailable:
                self._forget(layout, s)
                return ShardUnavailable(
                    f"shard {s.num} of cluster {cluster} ({peers[s.num].address.host}:"
                    f"{peers[s.num].address.port}): {exc}",
                    code=exc.code,
                    name=exc.name,
                )

            for s in shards:
                peer = peers[s.num]
                peer.stage_owner, peer.commit_guard = home.stage_owner, home.commit_guard
                try:
                    stages[s.num] = stack.enter_context(
                        Stage(
                            peer,
                            layout.local,
                            context,
                            drop_sync=False,
                            owner=home.stage_owner,
                            guard=home.commit_guard,
                            defaults=constants,
                        )
                    )
                except TransientTargetError as exc:
                    raise unavailable(s, exc) from exc

            def one(s: Shard) -> None:
                try:
                    stage = stages[s.num]
                    fill(peers[s.num], stage.table or layout.local, None if layout.random else s, stage.defaults)
                except TransientTargetError as exc:
                    raise unavailable(s, exc) from exc

            if len(shards) == 1:
                one(shards[0])
            else:
                with ThreadPoolExecutor(len(shards)) as pool:
                    for future in [pool.submit(one, s) for s in shards]:
                        future.result()
            # Every shard's stage counted and checked before any moves in: a shard that fails
            # now leaves nothing anywhere. Once one moved in, a failure is CommitUncertain.
            counted = {}
            for s in shards:
                try:
                    counted[s.num] = stages[s.num].checked(count_by_source, before_commit)
                except TransientTargetError as exc:
                    raise unavailable(s, exc) from exc
            return self._move_in_all(cluster, [(s, stages[s.num], counted[s.num]) for s in shards], unavailable)

    def write_routed(
        self,
        layout: ShardLayout,
        context: str,
        send: Send,
        count_by_source: bool,
        before_commit: CommitCheck | None,
        constants: Mapping[str, str] | None = None,
    ) -> dict[str, int]:
        """--insert-via-distributed: the batch crosses the wire once, into a Distributed table of
        the home node over stages of one name, one on every node of every shard that answers;
        the server routes each row by the table's own key (weights included) to one replica of
        its shard. Then every stage is counted and checked, and those with rows move in, as
        `write` does: a crash leaves nothing but stages, dropped by the next run.
        `constants` (as Target.write_batch's) are filled by the route table: a Distributed
        table fills the columns an INSERT leaves out with its own defaults, then routes."""
        return retrying(
            lambda: self._write_routed_once(layout, context, send, count_by_source, before_commit, constants)
        )

    def _write_routed_once(
        self,
        layout: ShardLayout,
        context: str,
        send: Send,
        count_by_source: bool,
        before_commit: CommitCheck | None,
        constants: Mapping[str, str] | None,
    ) -> dict[str, int]:
        home, cluster, local = self.home, layout.engine.cluster, layout.local
        name = stage_name(local, home.stage_owner)
        nodes = [(s, peer) for s in layout.shards for peer in self.replicas(layout, s)]
        with contextlib.ExitStack() as stack:
            stages = []
            for s, peer in nodes:
                peer.stage_owner, peer.commit_guard = home.stage_owner, home.commit_guard
                stage = Stage(peer, local, context, drop_sync=False, owner=home.stage_owner, name=name)
                stages.append((s, stack.enter_context(stage)))
            # Named as a stage of the Distributed table: a killed run's is dropped by the next (prepare).
            route = TableName(layout.table.database, stage_name(layout.table, home.stage_owner))
            database = local.database or str(home.rows("SELECT currentDatabase() AS d")[0]["d"])
            home.execute(
                f"CREATE TABLE {route.sql} AS {layout.table.sql} ENGINE = Distributed({quote_ident(cluster)}, "
                f"{quote_ident(database)}, {quote_ident(name)}, {layout.engine.sharding_key})",
                context=context,
            )
            try:
                filled = dict(constants or {})
                if filled:
                    home.execute(f"ALTER TABLE {route.sql} {', '.join(default_commands(filled))}", context=context)
                send(route, dict(ROUTED_SETTINGS), filled)
            finally:
                with contextlib.suppress(ChuteError):
                    home.execute(f"DROP TABLE IF EXISTS {route.sql}")
            counted: list[tuple[Shard, Stage, dict[str, int]]] = []
            for s, stage in stages:
                counts = stage.checked(count_by_source)
                if sum(counts.values()):
                    if before_commit:
                        before_commit(stage.table, counts)
                    counted.append((s, stage, counts))
            return self._move_in_all(cluster, counted)

    def _move_in_all(
        self,
        cluster: str,
        counted: list[tuple[Shard, Stage, dict[str, int]]],
        first_failed: Callable[[Shard, TransientTargetError], ChuteError] | None = None,
    ) -> dict[str, int]:
        """Each counted stage into its shard's table, in turn; rows per source. A failure of the
        first (nothing moved in yet) is raised as it is, or as `first_failed` makes it; of a
        later one, CommitUncertain."""
        totals: dict[str, int] = {}
        for i, (s, stage, counts) in enumerate(counted):
            try:
                moved = stage.move_in(counts)
            except TransientTargetError as exc:
                if i == 0 and not isinstance(exc, CommitUncertain):
                    if first_failed is None:
                        raise
                    raise first_failed(s, exc) from exc
                raise CommitUncertain(str(exc), code=exc.code, name=exc.name) from exc
            with self._lock:
                key = (cluster, s.num)
                self.rows_loaded[key] = self.rows_loaded.get(key, 0) + sum(moved.values())
            for source, n in moved.items():
                totals[source] = totals.get(source, 0) + n
        return totals


def _shard_of(peer: ServerTarget, cluster: str) -> int | None:
    found = peer.rows(
        f"SELECT shard_num FROM system.clusters WHERE cluster = {quote_str(cluster)} AND is_local = 1 "
        "ORDER BY shard_num LIMIT 1"
    )
    return int(found[0]["shard_num"]) if found else None
