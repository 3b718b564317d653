"""Scratch files: the copies of user data chute writes outside the target.

They live in one private directory, ``<tempdir>/chute-<uid>/`` (mode 0700), are
created mode 0600, and carry the writer's process id in their names
(``chute-sample-<pid>-<random>.jsonl``): a run removes what runs that no longer
exist (killed, or crashed) left there.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
import uuid

from chute.errors import UsageError

_NAME = re.compile(r"^chute-[a-z-]+?-(\d+)-[0-9a-f]+(\.\w+)?$")


def scratch_dir() -> str:
    """The private directory, made if missing; refused if someone else could read it."""
    path = os.path.join(tempfile.gettempdir(), f"chute-{os.getuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise UsageError(f"{path}: not a directory of this user; remove it (chute keeps scratch copies there)")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return path


def scratch_file(kind: str, suffix: str, create: bool = True) -> str:
    """A new scratch file's path; created empty with mode 0600 unless `create` is false
    (for files the engine insists on creating itself; the directory still guards them)."""
    path = os.path.join(scratch_dir(), f"chute-{kind}-{os.getpid()}-{uuid.uuid4().hex}{suffix}")
    if create:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    return path


def sweep() -> int:
    """Remove the scratch files of processes that are gone; returns how many."""
    directory = scratch_dir()
    removed = 0
    for name in os.listdir(directory):
        match = _NAME.match(name)
        if match is None or process_alive(int(match.group(1))):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(directory, name))
            removed += 1
    return removed


def process_alive(pid: int) -> bool:
    """Whether a process of this host with this pid exists (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True
