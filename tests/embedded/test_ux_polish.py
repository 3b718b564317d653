"""A new user's first hour, part two: a mistyped command, a read-only database, error
classes, one unreadable file among many, rejects of an earlier failed attempt."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run(*args: str, env: dict[str, str] | None = None, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chute.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def test_a_mistyped_command_is_named_first_even_with_options(tmp_path: Path) -> None:
    typo = run("laod", "logs/", "--table", "logs", "--target", str(tmp_path / "db"))
    assert typo.returncode == 2
    assert typo.stderr == "chute: error: unknown command laod; did you mean load?\n"
    assert not (tmp_path / "db").exists()
