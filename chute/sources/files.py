"""Local files: paths, directories (recursive) and globs with `**` and `{a,b}`."""

from __future__ import annotations

import errno
import fnmatch
import glob
import hashlib
import os
import shutil
import stat
import tempfile
import threading
import time

from chute.errors import SourceError, UsageError
from chute.formats import FileFormat, detect
from chute.manifest import manifest_columns
from chute.schema import Column
from chute.sources.base import ROW_NUMBER_FORMATS as ROW_NUMBER_FORMATS  # the loader imports it from here
from chute.sources.base import (
    EngineRowNumbers,
    SourceBase,
    expand_braces,
    known_extension,
    provenance_by_path,
    table_function,
)
from chute.sources.frames import CutShort, check_frames
from chute.sources.ranges import SPLIT_FORMATS, range_url, split_points
from chute.sql import quote_str
from chute.units import Unit

_GLOB_CHARS = set("*?[{")
_PLAIN_NAME_CHARS = frozenset(_GLOB_CHARS | {",", "}", "]", "\\"})
"""Characters no name in a `{a,b}` list of file() may hold."""
FINGERPRINT_BYTES = 64 * 1024
"""A file's fingerprint hashes this much of its start and of its end (the whole of a smaller file)."""
WITNESS_AGE_NS = 2 * 10**9
"""How long before a listing a file's last change (ctime) must lie for its witness to be recorded
(Unit.witness). File systems stamp times at a tick (1-10 ms; 1-2 s on some): a write in the tick
of the stat would leave the change time as it was. Older, the tick is over; the rare file changed
just before a load is fingerprinted again by every later run instead (as all were before)."""


def witness(st: os.stat_result, listed_ns: int) -> str:
    """The witness of a file's stat (Unit.witness); empty where it changed too recently to be one."""
    return f"{st.st_ctime_ns}.{st.st_ino}" if st.st_ctime_ns < listed_ns - WITNESS_AGE_NS else ""


def recorded_fingerprint(recorded: str, st: os.stat_result) -> str | None:
    """The fingerprint a ledger identity (`size:mtime:fingerprint:witness`) holds where the file's
    stat shows it as it was then: same size, mtime, change time and inode. Else None: read it."""
    head, tail = f"{st.st_size}:{st.st_mtime_ns}:", f":{st.st_ctime_ns}.{st.st_ino}"
    if not (recorded.startswith(head) and recorded.endswith(tail)):
        return None
    found = recorded[len(head) : len(recorded) - len(tail)]
    return found if found and ":" not in found else None


def fingerprint(path: str, start: int, end: int) -> str:
    """A hash (BLAKE2b, 64 bits) of the bytes [start, end) of `path`: its first and last
    FINGERPRINT_BYTES, and the length. Two reads of 64 KiB a file (about 0.1 ms each from the page
    cache): with size and mtime, it tells a same-size replacement whose old mtime was restored."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(str(end - start).encode())
    with open(path, "rb") as fh:
        fh.seek(start)
        digest.update(fh.read(min(FINGERPRINT_BYTES, end - start)))
        tail = max(start + FINGERPRINT_BYTES, end - FINGERPRINT_BYTES)
        if tail < end:
            fh.seek(tail)
            digest.update(fh.read(end - tail))
    return digest.hexdigest()


class Skipped:
    """What a directory walk left out, counted for the report's notes."""

    def __init__(self) -> None:
        self.hidden = 0
        """Files and directories whose names start with "." (and files starting with "_", as _SUCCESS)."""
        self.unknown = 0
        """Files whose extension is not a known format."""
        self.example = ""

    def notes(self) -> list[str]:
        parts = []
        if self.hidden:
            parts.append(f"{self.hidden} hidden (names starting with . or _; files and directories)")
        if self.unknown:
            files = "file" if self.unknown == 1 else "files"
            parts.append(f"{self.unknown} {files} of no known format, such as {self.example} (--format reads them)")
        if not parts:
            return []
        return ["in directories, skipped " + " and ".join(parts)]


def _unreadable(exc: OSError) -> None:
    """A directory of the walk that cannot be listed fails the load: its files would be left
    out without a word (os.walk skips it), and a later run would load them as new."""
    raise SourceError(f"{exc.filename}: cannot list the directory ({exc.strerror or exc})")


def _walk(directory: str, skipped: Skipped) -> list[str]:
    found: list[str] = []
    for root, dirs, files in os.walk(directory, onerror=_unreadable):
        skipped.hidden += sum(1 for d in dirs if d.startswith("."))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        shown = [f for f in sorted(files) if not f.startswith((".", "_"))]
        skipped.hidden += len(files) - len(shown)
        prefix = os.path.join(root, "")  # (one join a directory, not a file: 100,000 names)
        found.extend(prefix + f for f in shown)
    return found


def _globbed(pattern: str) -> list[str]:
    """`glob.glob(pattern, recursive=True)`; where only the last name has wildcards (`dir/*.json`),
    one listing filtered at once, without glob's step per name (100,000 names: 0.36 s -> ~0.1)."""
    directory, _, name = pattern.rpartition("/")
    if "**" in pattern or any(c in directory for c in "*?[") or not any(c in name for c in "*?["):
        return glob.glob(pattern, recursive=True)
    prefix = directory + "/" if directory else ("/" if pattern.startswith("/") else "")
    try:
        names = os.listdir(prefix or os.curdir)
    except OSError:
        return []
    if not name.startswith("."):  # (as glob: a wildcard does not match a leading dot)
        names = [n for n in names if not n.startswith(".")]
    return [prefix + n for n in fnmatch.filter(names, name)]


class _Resolved:
    """Files' resolved paths at one lstat a file (os.path.realpath looks at every component of
    the path: 100,000 files cost 20 s on a busy machine): a file that is no symlink resolves as
    its directory, resolved once, plus its name. Its lstat is its stat, kept in `stats`."""

    def __init__(self) -> None:
        self.directories: dict[str, str] = {}
        self.stats: dict[str, os.stat_result] = {}

    def is_file(self, path: str) -> bool:
        """`os.path.isfile` (a link followed), at the lstat that `path` then takes again from here."""
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if stat.S_ISLNK(st.st_mode):
            return os.path.isfile(path)
        self.stats[path] = st
        return stat.S_ISREG(st.st_mode)

    def path(self, path: str) -> str:
        directory, _, name = path.rpartition("/")
        if name in ("", ".", "..") or (not directory and path.startswith("/")):
            return os.path.realpath(path)
        try:
            st = self.stats.get(path) or os.lstat(path)
        except OSError:
            return os.path.realpath(path)
        if stat.S_ISLNK(st.st_mode):
            return os.path.realpath(path)
        real = self.directories.get(directory)
        if real is None:
            real = self.directories[directory] = os.path.realpath(directory or os.curdir).rstrip("/") + "/"
        self.stats[path] = st
        return real + name


def _readable(st: os.stat_result, euid: int) -> bool:
    """Readable by this process (effective user `euid`) for sure by its mode alone (os.access says the rest)."""
    return euid == 0 or (st.st_uid == euid and bool(st.st_mode & stat.S_IRUSR))


class FileSource(SourceBase, EngineRowNumbers):
    """Files on the local file system, read by the engine's file() function."""

    def __init__(
        self,
        patterns: list[str],
        format_override: str | None = None,
        compression_override: str | None = None,
        exclude: list[str] | None = None,
        split_bytes: int | None = None,
        known: frozenset[str] = frozenset(),
        recorded: dict[str, str] | None = None,
    ) -> None:
        """`known`: unit keys the ledger holds for the table (see `_key`); `recorded`: the
        identities of the files it has loaded (see `recorded_fingerprint`)."""
        if not patterns:
            raise UsageError("no source given")
        # (a quoted '~/logs/*.json' reaches us as it is: the shell expands ~ only unquoted)
        self.patterns = [os.path.expanduser(p) if p.startswith("~") else p for p in patterns]
        # The embedded target's own directory holds .json and other files: never a source.
        self.exclude = tuple(os.path.realpath(p) + os.sep for p in exclude or [])
        self.format_override = format_override
        self.compression_override = compression_override
        self.split_bytes = split_bytes
        self.known = frozenset(key.split("#bytes=", 1)[0] if "#" in key else key for key in known)
        self.recorded = recorded or {}
        self._manifests: dict[str, tuple[list[Column], bool] | None] = {}
        self._links: dict[str, str] = {}
        self._links_lock = threading.Lock()
        """Files whose names hold * ? [ { (the engine's file() reads them as a pattern) -> a
        symlink to each in a private directory, named plainly, that the engine reads instead."""
        self._link_dir: str | None = None
        self._stats: dict[str, os.stat_result] = {}
        self._formats: dict[str, FileFormat] = {}
        """Files' stat results, taken while their names were resolved (see `_stat`)."""
        self.notes: list[str] = []
        """For the report: what directory walks skipped, and why."""
        self._unreadable: dict[str, str] = {}
        """Files listed that cannot be read -> why (see `unreadable`)."""
        self._dangling: dict[str, str] = {}
        """Where a symlink listed leads nowhere: the key (its target) -> the link."""

    def _paths(self) -> list[str]:
        paths: list[str] = []
        skipped = Skipped()
        resolved = _Resolved()
        for pattern in self.patterns:
            if os.path.isdir(pattern):
                here = Skipped()
                listed = _walk(pattern, here)
                if not self.format_override:
                    known = [known_extension(p) for p in listed]
                    unknown = [p for p, k in zip(listed, known, strict=True) if not k]
                    here.unknown += len(unknown)
                    here.example = os.path.basename(unknown[0]) if unknown else ""
                    listed = [p for p, k in zip(listed, known, strict=True) if k] if unknown else listed
                if not listed:  # loading nothing is no success: a wrong directory, or --format missing
                    why = here.notes()[0].replace("in directories, skipped", "; skipped") if here.notes() else ""
                    raise SourceError(f"{pattern}: no file to load{why}")
                skipped.hidden += here.hidden
                skipped.unknown += here.unknown
                skipped.example = skipped.example or here.example
                paths.extend(listed)
            elif any(c in pattern for c in _GLOB_CHARS) and not os.path.exists(pattern):
                matched = sorted({m for p in expand_braces(pattern) for m in _globbed(p) if resolved.is_file(m)})
                if not matched:
                    raise SourceError(f"{pattern}: no file matches")
                paths.extend(matched)
            elif os.path.exists(pattern):
                paths.append(pattern)
            else:
                raise SourceError(f"{pattern}: no such file or directory")
        self.notes.extend(skipped.notes())
        # A file is known by its resolved path: reached through a symlinked directory or file
        # it is the same unit (and the same ledger row) as through its own path.
        unique: dict[str, None] = {}  # (in order; a name met again keeps its place)
        stats, kept, exclude, resolve, key = resolved.stats, self._stats, self.exclude, resolved.path, self._key
        for p in paths:
            real = resolve(p)
            if real.startswith(exclude):
                continue
            full = key(p, real)
            unique[full] = None
            st = stats.get(p)
            if st is None:  # (a plain file's lstat is in `stats`: only links need a second look)
                if os.path.islink(p) and not os.path.exists(p):
                    self._dangling[full] = p
            elif full == real:
                kept[full] = st
        return list(unique)

    def _key(self, path: str, real: str | None = None) -> str:
        """The resolved path; but the path as given (made absolute) where the ledger knows the
        file by that name only (loaded by a chute that did not resolve symlinks)."""
        real = real or os.path.realpath(path)
        if not self.known or real in self.known:
            return real
        given = os.path.abspath(path)
        return given if given != real and given in self.known else real

    def units(self) -> list[Unit]:
        units: list[Unit] = []
        seen: dict[tuple[int, int], str] = {}
        euid = os.geteuid()
        listed_ns = time.time_ns()
        # (bound once: a listing of 100,000 files runs this loop as often)
        take, detect_of, recorded_of, add = self._stats.pop, self._detect, self.recorded.get, units.append
        for path in self._paths():
            try:
                found = take(path, None)
                st = found if found is not None else os.stat(path)
            except OSError as exc:  # (a dangling symlink; a file gone since the listing)
                link = self._dangling.get(path)
                why = f"{link}: a symlink to {path}, which does not exist" if link else f"{path}: {exc.strerror}"
                units.append(self._unreadable_unit(path, why))
                continue
            first = seen.setdefault((st.st_dev, st.st_ino), path)
            if first != path:  # a hard link, or the same file under a bind mount
                self.notes.append(f"{path}: the same file as {first} (same device and inode); loaded once")
                continue
            if not stat.S_ISREG(st.st_mode):
                units.append(self._unreadable_unit(path, f"{path}: not a regular file", st))
                continue
            if not _readable(st, euid) and not os.access(path, os.R_OK):
                units.append(self._unreadable_unit(path, f"{path}: permission denied", st))
                continue
            fmt = detect_of(path)
            if self.split_bytes is not None and self._splits(fmt, st.st_size):
                assert self.split_bytes is not None
                for start, end in split_points(path, fmt.format, st.st_size, self.split_bytes):
                    units.append(
                        Unit(
                            key=f"{path}#bytes={start}-{end}",
                            size=end - start,
                            mtime_ns=st.st_mtime_ns,
                            fmt=fmt,
                            origin=path,
                            start=start,
                            end=end,
                            fingerprint=self._fingerprint(path, start, end),
                        )
                    )
                continue
            recorded = recorded_of(path)
            print_ = recorded_fingerprint(recorded, st) if recorded else None
            try:
                print_ = print_ or fingerprint(path, 0, st.st_size)
            except OSError as exc:  # (unreadable, the mode bits said otherwise, or since the listing)
                why = "permission denied" if exc.errno == errno.EACCES else (exc.strerror or str(exc))
                units.append(self._unreadable_unit(path, f"{path}: {why}", st))
                continue
            add(Unit.of_file(path, st.st_size, st.st_mtime_ns, fmt, print_, witness(st, listed_ns)))
        if units and all(u.key in self._unreadable for u in units):
            raise SourceError(self._unreadable[units[0].key])  # nothing to load: as a wrong path
        return units

    def _unreadable_unit(self, path: str, why: str, st: os.stat_result | None = None) -> Unit:
        """A file listing found but no one can read: it fails alone when the load gets to it
        (the others load), named with `why`."""
        self._unreadable[path] = why
        fmt = detect(path, self.format_override, self.compression_override)
        return Unit(key=path, size=st.st_size if st else 0, mtime_ns=st.st_mtime_ns if st else 0, fmt=fmt)

    def unreadable(self, unit: Unit) -> str | None:
        return self._unreadable.get(unit.source_name)

    @staticmethod
    def _fingerprint(path: str, start: int, end: int) -> str:
        try:
            return fingerprint(path, start, end)
        except OSError as exc:
            raise SourceError(f"{path}: {exc.strerror}") from None

    def _detect(self, path: str) -> FileFormat:
        """`detect`, once per file name ending (everything after the name's first dot)."""
        name = path.rsplit("/", 1)[-1]
        dot = name.find(".")
        if dot < 0:
            return detect(path, self.format_override, self.compression_override)
        ending = name[dot:].lower()
        fmt = self._formats.get(ending)
        if fmt is None:
            fmt = self._formats[ending] = detect(path, self.format_override, self.compression_override)
        return fmt

    def _splits(self, fmt: FileFormat, size: int) -> bool:
        return (
            self.split_bytes is not None
            and fmt.format in SPLIT_FORMATS
            and fmt.compression == "none"
            and size > 2 * self.split_bytes
        )

    def declared_columns(self, unit: Unit) -> list[Column] | None:
        directory = os.path.dirname(unit.source_name)
        if directory not in self._manifests:
            self._manifests[directory] = manifest_columns(directory)
        found = self._manifests[directory]
        return found[0] if found else None

    def table_expression(self, unit: Unit, structure: str | None, fmt_name: str | None = None) -> str:
        fmt: FileFormat = unit.fmt
        if unit.is_range:
            url = range_url(unit.origin, unit.start, unit.end)
            parts = [quote_str(url), quote_str(fmt_name or fmt.format)]
            if structure is not None:
                parts.append(quote_str(structure))
            return f"url({', '.join(parts)})"
        return table_function(
            "file", [quote_str(self._readable(unit.key))], fmt_name or fmt.format, structure, fmt.compression
        )

    def _readable(self, path: str) -> str:
        """`path`, or where the engine can read it when its name holds glob characters."""
        if not any(c in path for c in _GLOB_CHARS):
            return path
        with self._links_lock:  # (threads read samples side by side: one link a name, one number a link)
            link = self._links.get(path)
            if link is None:
                if self._link_dir is None:
                    self._link_dir = tempfile.mkdtemp(prefix="chute-names-")
                link = os.path.join(self._link_dir, str(len(self._links)))
                os.symlink(path, link)
                self._links[path] = link
            return link

    def close(self) -> None:
        if self._link_dir is not None:
            shutil.rmtree(self._link_dir, ignore_errors=True)
            self._link_dir = None
            self._links.clear()

    def combined_expression(
        self, units: list[Unit], structure: str, fmt_name: str | None = None
    ) -> tuple[str, dict[str, str]] | None:
        """`file('dir/{a,b,c}', ...)` for files of one directory, format and compression."""
        if any(u.is_range for u in units):
            return None
        directory = os.path.dirname(units[0].key)
        names = [os.path.basename(u.key) for u in units]
        if (
            any(os.path.dirname(u.key) != directory or u.fmt != units[0].fmt for u in units)
            or not _PLAIN_NAME_CHARS.isdisjoint(directory + "".join(names))
            or "'" in directory + "".join(names)
        ):
            return None
        fmt = units[0].fmt
        location = [quote_str(f"{directory}/{{{','.join(names)}}}")]
        call = table_function("file", location, fmt_name or fmt.format, structure, fmt.compression)
        return call, provenance_by_path("_path", [u.key for u in units], units)

    def verify(self, unit: Unit) -> None:
        try:
            check_frames(unit.source_name, unit.fmt.compression)
        except CutShort as exc:
            raise SourceError(
                f"{unit.key}: the {unit.fmt.compression} file is cut short or damaged ({exc}); nothing of it was loaded"
            ) from None
        except OSError as exc:
            raise SourceError(f"{unit.key}: {exc.strerror}") from None

    def unchanged(self, unit: Unit) -> bool:
        try:
            st = os.stat(unit.source_name)
        except OSError:
            return False
        if unit.is_range:
            same = st.st_mtime_ns == unit.mtime_ns and st.st_size >= unit.end
        else:
            same = st.st_size == unit.size and st.st_mtime_ns == unit.mtime_ns
        if not same or not unit.fingerprint:
            return same
        try:
            return fingerprint(unit.source_name, unit.start, unit.end or unit.size) == unit.fingerprint
        except OSError:
            return False
