"""The embedded database directory itself: chute's lock on it, whether it can be written, and
a read-only view of one that cannot (chute.engine opens the engine on it)."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import re
import time

from chute.errors import TargetError, UsageError

LOCK_FILE = ".chute-lock"
IDLE = "idle"
"""What a process that holds the directory does between chute calls (see `_read_holder`)."""


class DirectoryBusy(UsageError):
    """Another chute process holds the embedded database directory. Exit code 2 as a usage error,
    but not terminal: the same call works once that process ends (an orchestrator retries)."""

    terminal = False


class DirectoryLock:
    """chute's own lock on an embedded database directory, taken before the engine opens it.

    The engine locks the directory too, but says so in two raw lines; this lock
    names the process that holds the directory and what it does there. The
    file keeps `pid`, `doing` and `since` in JSON; the lock (flock) ends with the
    process, however it ends, so a crash never leaves the directory locked.
    """

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.since = time.time()
        self._what = "using it"

    @classmethod
    def take(cls, directory: str) -> DirectoryLock:
        path = os.path.join(directory, LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _read_holder(fd)
            os.close(fd)
            raise DirectoryBusy(f"{directory} is in use by {holder}; try again when it ends") from None
        engine = _engine_holder(directory)
        if engine is not None:
            os.close(fd)
            raise DirectoryBusy(
                f"{directory} is in use by another program's ClickHouse engine (pid {engine}: chDB, "
                "clickhouse-local); try again when it ends"
            )
        lock = cls(path, fd)
        lock.doing("using it")
        return lock

    def doing(self, what: str) -> None:
        """Say what this process does with the directory (shown to a process that waits)."""
        if what == IDLE or what != self._what:
            self.since = time.time()
        self._what = what
        record = json.dumps({"pid": os.getpid(), "doing": what, "since": self.since}).encode()
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, record, 0)

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
        with contextlib.suppress(OSError):
            os.close(self.fd)  # closing the descriptor ends the lock


def _engine_holder(directory: str) -> str | None:
    """The pid of an engine another program runs on the directory (chDB, clickhouse-local: it
    holds the `status` file locked), else None. The engine would say so in two raw lines."""
    try:
        fd = os.open(os.path.join(directory, "status"), os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            found = re.search(rb"PID: (\d+)", os.pread(fd, 4096, 0))
            return found.group(1).decode() if found else "unknown"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read_holder(fd: int) -> str:
    """ "chute pid N (loading t since 14:02)" from a held lock file, as far as it says."""
    try:
        record = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        record = {}
    if not isinstance(record, dict) or "pid" not in record:
        return "another chute process"
    since = time.strftime("%H:%M", time.localtime(float(record.get("since", time.time()))))
    if record.get("doing") == IDLE:
        return (
            f"the Python process {record['pid']}, which opened it through chute and keeps it open while it "
            f"runs (idle since {since}: end that process, or its notebook's kernel)"
        )
    return f"chute pid {record['pid']} ({record.get('doing', 'using it')} since {since})"


def check_writable(path: str) -> None:
    """Say plainly why a database directory cannot be used, before the engine tries."""
    if os.path.lexists(path) and not os.path.isdir(path):
        raise UsageError(f"the embedded database {path} is a file, not a directory: give a directory (--target)")
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f".chute-probe-{os.getpid()}")
        with open(probe, "w", encoding="utf-8"):
            pass
        os.remove(probe)
    except OSError as exc:
        raise TargetError(f"cannot write to the embedded database {path}: {exc.strerror}") from None


class ReadOnlyView:
    """A database directory that cannot be written (a read-only mount, another user's files),
    opened for reading. The engine writes a `status` file and temporary files into the
    directory it opens even to read, so it opens a scratch directory instead whose entries
    link to the database's own (tables, data, metadata), in its read-only mode."""

    SKIPPED = frozenset({"status", "tmp", LOCK_FILE})

    def __init__(self, path: str) -> None:
        import tempfile

        self.directory = tempfile.mkdtemp(prefix="chute-read-only-")
        atexit.register(self.remove)  # (the command ends without closing its engine)
        for name in os.listdir(path):
            if name not in self.SKIPPED and not name.startswith(".chute-probe-"):
                os.symlink(os.path.join(os.path.abspath(path), name), os.path.join(self.directory, name))
        self.connect_to = f"{self.directory}?mode=ro"

    def remove(self) -> None:
        import shutil

        shutil.rmtree(self.directory, ignore_errors=True)
