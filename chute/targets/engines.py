"""Reading table engines as the server writes them (`system.tables.engine_full`).

Two needs of replicated and sharded targets: a stage table for a
`Replicated*MergeTree` is the same engine without replication (so that ATTACH
PARTITION FROM takes its parts, and it never shares the target's ZooKeeper
path); a `Distributed` table names its cluster, local table and sharding key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from chute.sql import closing_bracket, quote_str, split_top

_HEAD = re.compile(r"^\s*(\w+)\s*")


def split_args(text: str) -> list[str]:
    """The top-level, comma-separated arguments of `text` (the inside of a call's
    parentheses): commas inside quotes, backticks and nested calls do not split."""
    args = [a.strip() for a in split_top(text, ",")]
    return [] if args == [""] else args


def _call(engine_full: str) -> tuple[str, list[str], str] | None:
    """(engine name, its arguments, the rest of the clause: PARTITION BY, ORDER BY, SETTINGS...)."""
    head = _HEAD.match(engine_full)
    if head is None:
        return None
    at = head.end()
    if at >= len(engine_full) or engine_full[at] != "(":
        return head.group(1), [], engine_full[at:]
    end = closing_bracket(engine_full, at)
    if end is None:
        return None
    return head.group(1), split_args(engine_full[at + 1 : end]), engine_full[end + 1 :]


def unreplicated(engine_full: str) -> str | None:
    """The ENGINE clause of a stage for a `Replicated*MergeTree` table: the same engine
    without `Replicated`, its parameters without the ZooKeeper path and replica name,
    the same PARTITION BY, ORDER BY, PRIMARY KEY, SAMPLE BY, TTL and SETTINGS (old-style
    parameters too). None when the engine is not replicated (or not read)."""
    found = _call(engine_full)
    if found is None or not found[0].startswith("Replicated") or not found[0].endswith("MergeTree"):
        return None
    name, args, rest = found
    # Without arguments the server took its default path (newer servers): nothing to drop.
    kept = args[2:] if len(args) >= 2 else []
    return f"{name.removeprefix('Replicated')}({', '.join(kept)}) {rest.strip()}".strip()


def replicated(engine_full: str, path: str, replica: str) -> str | None:
    """The ENGINE clause of a `*MergeTree` table made replicated at the ZooKeeper `path` with
    `replica` (its other parameters and clauses kept); None for another engine."""
    found = _call(engine_full)
    if found is None or not found[0].endswith("MergeTree"):
        return None
    name, args, rest = found
    if name.startswith("Replicated"):
        name, args = name.removeprefix("Replicated"), args[2:]
    quoted = [quote_str(path), quote_str(replica), *args]
    return f"Replicated{name}({', '.join(quoted)}) {rest.strip()}".strip()


def extended_syntax(engine_full: str, partition_key: str, sorting_key: str) -> str:
    """A `*MergeTree(date, [sample,] key, granularity[, params])` clause (the syntax of old
    servers, which current engines refuse) in the extended syntax: the same engine and
    parameters, PARTITION BY, ORDER BY, SAMPLE BY and index_granularity. Any other clause as it is."""
    found = _call(engine_full)
    if found is None or not found[0].endswith("MergeTree") or "ORDER BY" in found[2].upper():
        return engine_full
    name, args, rest = found
    if name.startswith("Replicated"):
        args = args[2:]
    at = next((i for i, a in enumerate(args) if a.strip().isdigit()), None)
    if at is None or at < 2:
        return engine_full
    sample = args[1] if at == 3 else None
    clause = f"{name}({', '.join(args[at + 1 :])})"
    if name.startswith("Replicated"):
        clause = f"{name}({', '.join([*found[1][:2], *args[at + 1 :]])})"
    if partition_key:
        clause += f" PARTITION BY {partition_key}"
    order = sorting_key or args[at - 1]
    clause += f" ORDER BY ({order})" if len(split_args(order)) > 1 else f" ORDER BY {order}"
    if sample:
        clause += f" SAMPLE BY {sample}"
    return f"{clause} SETTINGS index_granularity = {args[at].strip()} {rest.strip()}".strip()


@dataclass(frozen=True)
class DistributedEngine:
    """What `Distributed(cluster, database, table[, sharding_key[, policy]])` names."""

    cluster: str
    database: str
    table: str
    sharding_key: str | None


def _name_arg(arg: str) -> str:
    """A cluster, database or table argument: a quoted string, a `quoted` or a bare name."""
    arg = arg.strip()
    if len(arg) >= 2 and arg[0] == arg[-1] and arg[0] in "'`\"":
        return re.sub(r"\\(.)", r"\1", arg[1:-1])
    return arg


def distributed(engine_full: str) -> DistributedEngine | None:
    """The parts of a Distributed engine clause; None for another engine."""
    found = _call(engine_full)
    if found is None or found[0] != "Distributed" or len(found[1]) < 3:
        return None
    args = found[1]
    key = args[3].strip() if len(args) > 3 and args[3].strip() else None
    return DistributedEngine(_name_arg(args[0]), _name_arg(args[1]), _name_arg(args[2]), key)


RANDOM_KEY = re.compile(r"\b(?:rand|rand32|rand64|randConstant|generateUUIDv4)\s*\(", re.IGNORECASE)
"""A sharding key that is no function of the row: any shard is the right one."""
