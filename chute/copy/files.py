"""The files method: each unit's rows through a file in a directory or an S3 prefix (`--via`).

The source's compressed Native blocks of a unit (what the stream method sends)
are written to a file, published whole (export's destinations: a rename in a
directory, one PUT in S3), then sent from the file into the destination's
stage, and the file removed. A file is named by the source, the table, the
unit's rows and the names of the source's parts: a run killed after a unit's
file was written sends that file, without reading the source's rows again,
while its parts are the same. What the stage got is measured against the
source as with every method.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import uuid
from collections.abc import Iterable, Iterator

from chute.export.dest import TMP_SUFFIX, Dest, LocalDest, S3Dest, local_error, unlink_quietly

SUFFIX = ".native.chc"
"""Native in ClickHouse's compressed framing (as an INSERT with `decompress=1` takes it)."""
CHUNK = 1 << 20


class Files:
    """The files of one copy in `--via`."""

    def __init__(self, via: str, s3_endpoint: str | None = None) -> None:
        self.dest: Dest = (
            S3Dest(via, s3_endpoint) if via.lower().startswith("s3://") else LocalDest(os.path.abspath(via))
        )
        try:
            self.dest.prepare()
        except OSError as exc:
            raise local_error(exc, self.dest.display) from None
        self._lock = threading.Lock()
        self.written = 0
        """Files written by this run (not taken from a killed one)."""
        self.reused = 0

    @property
    def display(self) -> str:
        return self.dest.display

    @staticmethod
    def name(*parts: str) -> str:
        return "chute_copy_" + hashlib.sha1("\n".join(parts).encode()).hexdigest()[:24] + SUFFIX

    def has(self, name: str) -> bool:
        try:
            return name in self.dest.names()
        except OSError as exc:
            raise local_error(exc, self.dest.display) from None

    def write(self, name: str, blocks: Iterable[bytes]) -> int:
        """`blocks` into the file `name`, published whole once all are written; its size."""
        fd, tmp = tempfile.mkstemp(dir=self.dest.work_dir, prefix=f".{uuid.uuid4().hex[:8]}.", suffix=TMP_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as fh:
                for block in blocks:
                    fh.write(block)
            size = self.dest.publish(tmp, name)
        except OSError as exc:
            raise local_error(exc, self.dest.display) from None
        finally:
            unlink_quietly(tmp)
        with self._lock:
            self.written += 1
        return size

    def read(self, name: str) -> Iterator[bytes]:
        """The file's bytes, in chunks (a local file is not read whole)."""
        if isinstance(self.dest, LocalDest):
            try:
                with open(self.dest.location(name), "rb") as fh:
                    while chunk := fh.read(CHUNK):
                        yield chunk
            except OSError as exc:
                raise local_error(exc, self.dest.display) from None
            return
        data = self.dest.read(name) or b""
        for at in range(0, len(data), CHUNK):
            yield data[at : at + CHUNK]

    def reuse(self) -> None:
        with self._lock:
            self.reused += 1

    def remove(self, name: str) -> None:
        try:
            self.dest.remove(name)
        except OSError as exc:
            raise local_error(exc, self.dest.display) from None

    def close(self) -> None:
        self.dest.close()
