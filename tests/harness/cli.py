"""The `chute` command run as a user runs it: a process of its own, no CHUTE_TARGET of the
caller's environment (so the default target is the working directory's ./chute.db)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_chute(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chute.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, "CHUTE_TARGET": "", **(env or {})},
    )
