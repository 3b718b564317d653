"""scripts/install-source-servers builds a server once per machine, not once per clone."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install-source-servers"

FAKE_GO = """#!/bin/sh
# Stands in for `go install`: counts its runs and leaves a versitygw binary in $GOBIN.
echo run >> "$GO_RUNS"
printf '#!/bin/sh\\necho versitygw\\n' > "$GOBIN/versitygw"
chmod +x "$GOBIN/versitygw"
"""


def _install(tmp_path: Path, clone: str, bin_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "GO_RUNS": str(tmp_path / "go-runs"),
        "CHUTE_SOURCE_SERVERS": str(tmp_path / clone / ".cache" / "source-servers"),
        "CHUTE_MACHINE_CACHE": str(tmp_path / "machine"),
    }
    return subprocess.run([str(SCRIPT), "s3"], capture_output=True, text=True, timeout=60, env=env)


def test_versitygw_is_built_once_per_machine_and_reused_by_a_fresh_clone(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "go").write_text(FAKE_GO)
    (bin_dir / "go").chmod(0o755)
    for clone in ("clone1", "clone2"):
        done = _install(tmp_path, clone, bin_dir)
        assert done.returncode == 0, done.stderr
        binary = tmp_path / clone / ".cache" / "source-servers" / "versitygw-v1.8.0" / "versitygw"
        assert os.access(binary, os.X_OK)
        assert binary.resolve() == (tmp_path / "machine" / "versitygw-v1.8.0" / "versitygw").resolve()
    assert (tmp_path / "go-runs").read_text().count("run") == 1  # the second clone built nothing
    # A server already in CHUTE_SOURCE_SERVERS (the override) is used as it is: nothing built.
    own = tmp_path / "own" / ".cache" / "source-servers" / "versitygw-v1.8.0"
    own.mkdir(parents=True)
    (own / "versitygw").write_text("#!/bin/sh\n")
    (own / "versitygw").chmod(0o755)
    (tmp_path / "machine").rename(tmp_path / "gone")
    assert _install(tmp_path, "own", bin_dir).returncode == 0
    assert not (own / "versitygw").is_symlink() and not (tmp_path / "machine").exists()
