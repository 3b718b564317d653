"""The cores this process may use: they size the engine's threads and each worker's share."""

from __future__ import annotations

import os

CPU_MAX = "/sys/fs/cgroup/cpu.max"


def usable_cores() -> int:
    """Cores this process may run on: its CPU affinity (taskset), within the cgroup's quota (cpu.max)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        with open(CPU_MAX, encoding="ascii") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return max(1, cores)
