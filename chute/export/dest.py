"""Where `chute export` puts files: a local directory, or an S3 prefix (each file
one PUT once written, so an object under its final key is always complete)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
import uuid
from typing import Any, Protocol

from chute.errors import ChuteError, OutOfSpace, TargetError, UsageError
from chute.remote.s3 import S3Client, split_url

TMP_SUFFIX = ".chute-tmp"
S3_MAX_OBJECT_BYTES = 4 * 2**30
"""Files cut at this size for S3 when --max-file-size is not given: one PUT takes at most 5 GiB."""


def fsync_file(path: str) -> None:
    """Flush a written file to the disk before it is renamed into place."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def unlink_quietly(path: str) -> None:
    """Remove a file that may be gone already."""
    with contextlib.suppress(OSError):
        os.remove(path)


def local_error(exc: OSError, where: str) -> ChuteError:
    """One line for a local destination that cannot be written: a directory the user may not
    write (or a file in its place) is a usage error; a full disk stops the export."""
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        return OutOfSpace(f"cannot write into {where}: {reason}")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EEXIST, errno.ENOENT):
        return UsageError(f"cannot write into {where}: {reason}")
    return TargetError(f"cannot write into {where}: {reason}")


class Dest(Protocol):
    """Where exported files go: a local directory or an S3 prefix."""

    display: str
    work_dir: str
    """A local directory for files being written (temporary names)."""

    def prepare(self) -> None: ...

    def names(self) -> dict[str, int]:
        """Files at the destination (not below it) with their sizes."""
        ...

    def read(self, name: str) -> bytes | None: ...

    def write(self, name: str, data: bytes) -> None:
        """Replace `name` with `data` in one step (readers see the old or the new)."""
        ...

    def publish(self, tmp: str, name: str) -> int:
        """Put a finished temporary file in place as `name`; returns its size."""
        ...

    def remove(self, name: str) -> None: ...

    def location(self, name: str) -> str: ...

    def close(self) -> None: ...


class LocalDest:
    def __init__(self, path: str) -> None:
        self.root = path
        self.display = path
        self.work_dir = path

    def prepare(self) -> None:
        """Make the directory and prove it writable before any partition is read."""
        if os.path.lexists(self.root) and not os.path.isdir(self.root):
            raise UsageError(
                f"cannot export into {self.root}: it is a file; give a directory "
                "(one file per partition goes into it, with a manifest)"
            )
        try:
            os.makedirs(self.root, exist_ok=True)
            for name in os.listdir(self.root):
                if name.endswith(TMP_SUFFIX):  # files a killed run left half-written
                    unlink_quietly(os.path.join(self.root, name))
            with tempfile.NamedTemporaryFile(dir=self.root, prefix=".probe.", suffix=TMP_SUFFIX):
                pass
        except OSError as exc:
            raise local_error(exc, self.root) from None

    def names(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for entry in os.scandir(self.root):
            if entry.is_file() and not entry.name.endswith(TMP_SUFFIX):
                # (another thread of the run may remove a file between the listing and its stat)
                with contextlib.suppress(FileNotFoundError):
                    found[entry.name] = entry.stat().st_size
        return found

    def read(self, name: str) -> bytes | None:
        try:
            with open(os.path.join(self.root, name), "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def write(self, name: str, data: bytes) -> None:
        tmp = os.path.join(self.root, f".{name}.{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, os.path.join(self.root, name))

    def publish(self, tmp: str, name: str) -> int:
        fsync_file(tmp)
        final = os.path.join(self.root, name)
        os.replace(tmp, final)
        return os.path.getsize(final)

    def remove(self, name: str) -> None:
        unlink_quietly(os.path.join(self.root, name))

    def location(self, name: str) -> str:
        return os.path.join(self.root, name)

    def close(self) -> None:
        pass


class S3Dest:
    """An S3 prefix: each file is uploaded whole with one PUT once written, so an
    object under its final key is always complete (S3 replaces objects atomically)."""

    def __init__(self, url: str, endpoint: str | None) -> None:
        self.bucket, prefix = split_url(url)
        self.prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
        self.display = f"s3://{self.bucket}/{self.prefix}"
        self.s3 = S3Client(endpoint)
        self.work_dir = tempfile.mkdtemp(prefix="chute-export-")

    def prepare(self) -> None:
        pass

    def names(self) -> dict[str, int]:
        return {
            o.key[len(self.prefix) :]: o.size
            for o in self.s3.list_objects(self.bucket, self.prefix)
            if "/" not in o.key[len(self.prefix) :]
        }

    def _request(self, method: str, name: str, body: Any = None) -> Any:
        what = self.location(name)
        response = self.s3.send_object(method, self.bucket, self.prefix + name, what, body)
        if response.status_code not in (200, 204, 404) or (response.status_code == 404 and method != "GET"):
            if response.status_code == 404 and method == "DELETE":
                return response
            raise self.s3.failure(response, self.bucket, what)
        return response

    def read(self, name: str) -> bytes | None:
        response = self._request("GET", name)
        return None if response.status_code == 404 else bytes(response.content)

    def write(self, name: str, data: bytes) -> None:
        self._request("PUT", name, data)

    def publish(self, tmp: str, name: str) -> int:
        size = os.path.getsize(tmp)
        with open(tmp, "rb") as fh:
            self._request("PUT", name, fh)
        return size

    def remove(self, name: str) -> None:
        self._request("DELETE", name)

    def location(self, name: str) -> str:
        return f"{self.display}{name}"

    def close(self) -> None:
        shutil.rmtree(self.work_dir, ignore_errors=True)
