"""How auto shares JSON-lines files between the two ways that keep every value honest on a server
whose parser would change some unchecked (18.16): client-convert (this machine parses, checks and
sends Native; the server stores) and checked server-parse (the server parses the file as it is;
this machine proves the integers and dates it stored, chute.load.verify and chute.load.checks.textproof).

Each way costs each side CPU in proportion to the bytes it parses. Measured on the streams set
(1 M rows, 400 MB of JSON in 20 gzip files, 18.16, bench/bench_split.py, bench/README.md) on a
quiet machine, the server on one core and chute on the other, medians of 5, in CPU seconds per
GB of uncompressed input:

    client-convert    this machine 4.6    the server 2.8
    checked parse     this machine 4.5    the server 6.5

Where the server has cores of its own (another host, or this one with chute held to some of its
cores by taskset or a cgroup), both sides work at once and the load takes as long as the busier
side: auto gives the server the share of the bytes that ends both sides together, where that
is at least MIN_GAIN sooner than converting all here. A load shared both ways pays for both
(two kinds of batches, the proof's reads): measured there, sharing 59% took 2.52 s against
client-convert's 2.16 s while the model promised 1 % less. Where both share the same cores,
every CPU second counts against the same cores: the way with the least CPU in all wins
(client-convert, 7.4 against 11.0).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

CONVERT_CLIENT = 4.6
CONVERT_SERVER = 2.8
PARSE_CLIENT = 4.5
PARSE_SERVER = 6.5
"""CPU seconds per GB of uncompressed input (module docstring)."""
MIN_GAIN = 0.1
"""A share must promise to end this much sooner than converting all here (module docstring)."""
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
MIN_SHARE = 0.1
"""Below this share of the bytes, the server parses nothing (a batch of its own costs round trips)."""


@dataclass(frozen=True)
class Share:
    parse: float
    """The share of the bytes the server parses (0: all converted here)."""
    why: str


def cores_apart(host: str, client_cores: int, server_cores: int, machine: int | None = None) -> tuple[bool, int]:
    """(whether the server computes on cores of its own, how many). On this host, it does only
    where this process may use fewer cores than the machine has (the rest are taken to be the
    server's: an 18.16 server counts every core as its own whatever its affinity)."""
    machine = machine or os.cpu_count() or 1
    if host.lower() not in LOCAL_HOSTS:
        return True, server_cores
    if client_cores >= machine:
        return False, server_cores
    return True, max(1, min(server_cores, machine - client_cores))


def share(apart: bool, client_cores: int, server_cores: int) -> Share:
    """The share of the bytes the server parses, by the costs above, and why."""
    convert = CONVERT_CLIENT / client_cores, CONVERT_SERVER / server_cores
    parse = PARSE_CLIENT / client_cores, PARSE_SERVER / server_cores
    if not apart:
        total_convert, total_parse = CONVERT_CLIENT + CONVERT_SERVER, PARSE_CLIENT + PARSE_SERVER
        where = "the server shares this machine's cores"
        if total_parse < total_convert:
            return Share(1.0, f"{where}: checked server-parse costs the least CPU ({total_parse:.1f} s/GB in all)")
        return Share(0.0, f"{where}: client-convert costs the least CPU ({total_convert:.1f} s/GB in all)")
    # Both sides busy until the later ends: client(f) = (1-f)c0 + f c1, server(f) = (1-f)s0 + f s1.
    slope = (parse[1] - convert[1]) - (parse[0] - convert[0])
    f = (convert[0] - convert[1]) / slope if slope > 0 else (1.0 if parse[0] < convert[0] else 0.0)
    f = min(1.0, max(0.0, f))
    mixed = max((1 - f) * convert[0] + f * parse[0], (1 - f) * convert[1] + f * parse[1])
    alone = max(convert)
    if f < MIN_SHARE or mixed > (1 - MIN_GAIN) * alone:
        f = 0.0
    if f == 0.0:
        return Share(
            f,
            f"converted here: about {alone:.1f} s/GB with the server on {server_cores} core"
            f"{'s' if server_cores > 1 else ''} of its own, against {max(parse):.1f} letting it parse, checked",
        )
    return Share(
        f,
        f"the server ({server_cores} core{'s' if server_cores > 1 else ''} of its own) parses "
        f"{f:.0%} of the bytes, checked, while this machine ({client_cores}) converts the rest: "
        f"about {mixed:.1f} s/GB, against {alone:.1f} converting all here and {max(parse):.1f} "
        "letting the server parse all (bench/README.md)",
    )


def parsed_units(sizes: Sequence[tuple[str, int]], fraction: float) -> set[str]:
    """The units the server parses: the last ones, up to `fraction` of the bytes (the first
    batches, converted here, start beside them)."""
    total = sum(s for _, s in sizes)
    chosen: set[str] = set()
    taken = 0
    for key, size in reversed(sizes):
        if fraction <= 0 or taken + size / 2 > fraction * total:
            break
        chosen.add(key)
        taken += size
    return chosen


def shared_out(
    sizes: Sequence[tuple[str, int]], host: str, client_cores: int, server_cores: int
) -> tuple[Share, set[str]]:
    """auto's share for a load of these units (key, uncompressed bytes), and the units the server parses."""
    apart, server = cores_apart(host, client_cores, server_cores)
    got = share(apart, client_cores, server)
    return got, parsed_units(sizes, got.parse)
