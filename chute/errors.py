"""One exception tree for everything chute raises.

    ChuteError                  base; ``terminal`` says whether a retry can help
    ├── UsageError              bad arguments, invalid names (terminal)
    ├── SourceError             a source cannot be read or understood (terminal)
    │   └── NotText               a text file that is not text (binary, compressed)
    ├── SchemaError             input and table do not fit together (terminal)
    ├── TargetError             the target refused or failed (code kept)
    │   ├── OutOfSpace            the disk is full: the load stops (terminal)
    │   └── TransientTargetError  worth retrying (server down, memory, too many parts, I/O)
    │       ├── CommitUncertain     failed while moving rows in: repair, then retry
    │       └── ShardUnavailable    no node of a Distributed table's shard answers
    └── AttachedLate            rows went in after this worker's claim may have ended

Units that fail while loading are no exception: the returned report says which
(``report.ok`` is false). A TransientTargetError (``terminal`` false) comes out
of a call after chute's own retries: an orchestrator may retry the whole call.

Errors of the engine are translated at the boundary (``engine.py``) so users
see one line with the ClickHouse error code and name, never a traceback.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "ChuteError",
    "CommitUncertain",
    "NotText",
    "OutOfSpace",
    "SchemaError",
    "ShardUnavailable",
    "SourceError",
    "TargetError",
    "TransientTargetError",
    "UsageError",
    "translate_engine_error",
]

# ClickHouse error codes that are worth a retry: memory limits, too many parts,
# timeouts, network and file system hiccups.
TRANSIENT_CODES = frozenset({159, 160, 164, 202, 209, 210, 241, 242, 252, 319, 425, 999, 1000})
TOO_MANY_PARTS = 252
NOT_ENOUGH_SPACE = 243


class ChuteError(Exception):
    """Base of every chute error; ``str()`` is a one-line message for users."""

    terminal: bool = True

    def __init__(self, message: str, *, code: int | None = None, name: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.name = name
        self.partial: Any = None
        """Where a load stopped with this error: its report so far (a chute.report.LoadReport),
        the files and rows committed before it stopped."""


class UsageError(ChuteError):
    """Wrong arguments: a missing path, an invalid table name, a bad option."""


class SourceError(ChuteError):
    """A source that cannot be listed, read or understood."""


class NotText(SourceError):
    """A file read as text (CSV, TSV, JSON lines) whose first bytes say it is not:
    Parquet named .csv, a gzip file without .gz."""


class SchemaError(ChuteError):
    """Input fields and the table's columns do not fit together."""


class TargetError(ChuteError):
    """The target database reported an error; ``code`` is the ClickHouse code."""


class TransientTargetError(TargetError):
    """A target error that may pass on a retry."""

    terminal = False


class OutOfSpace(TargetError):
    """The target's disk is full. Terminal, and not about the rows: every file
    would fail the same way, so the load stops (a re-run resumes it)."""


class OutOfFiles(TargetError):
    """The target cannot open the files a part needs (errno 24): a part of a wide table keeps
    two files a column open while it is written. Not about the rows either: the load stops."""


OUT_OF_FILES_HINT = (
    " (a part keeps two files a column open while it is written: raise the open-files limit, "
    "a server's LimitNOFILE or a process's ulimit -n, or load fewer columns)"
)


class ShardUnavailable(TransientTargetError):
    """No node of a shard of a Distributed table answers: the rows bound for it cannot be
    written now (the units that have such rows fail; a re-run finishes them)."""


class AttachedLate(ChuteError):
    """A batch's rows went in, but this worker's claim on its units may have ended while they
    were on their way (a stalled connection): another worker may have loaded them too. The
    caller takes its own rows out again and leaves the units to that worker."""

    terminal = False


class CommitUncertain(TransientTargetError):
    """The connection failed while rows were being moved into the table: some may
    be in. Retrying blindly could double them; the caller must repair first."""


# "Code: 60. DB::Exception: msg (UNKNOWN_TABLE) (version 26.9)" on current
# versions; "Code: 60, e.displayText() = DB::Exception: msg, e.what() = ..." on 18.x.
_CODE_RE = re.compile(r"Code:\s*(\d+)[.,]\s*(?:e\.displayText\(\) = )?(?:DB::\w*Exception:\s*)?(.*)", re.S)
_TAIL_RE = re.compile(r"(?:,\s*e\.what\(\) = [\w:]+)?\s*(?:\(version [^)]*\))?\s*$")
_NAME_RE = re.compile(r"\s*\(([A-Z][A-Z0-9_]+)\)\s*$")
_NESTED_RE = re.compile(r"^(?:Code:\s*\d+[.,]\s*DB::\w*Exception:\s*)+")
_REPEATED_TAIL_RE = re.compile(r"(?:\s*\(([A-Z][A-Z0-9_]+)\)(?:\s*\(version [^)]*\))?\.?)+\s*$")


def parse_server_error(text: str) -> tuple[int | None, str | None, str]:
    """(code, name, message) from a ClickHouse error text of any version."""
    match = _CODE_RE.search(text)
    if not match:
        return None, None, " ".join(text.split())
    code = int(match.group(1))
    message = match.group(2).strip()
    # The embedded engine may wrap its own message once more: "Code: 73. DB::Exception: Code: 73.
    # DB::Exception: msg (NAME) (version v). (NAME) (version v)."
    message = _NESTED_RE.sub("", message)
    message = _REPEATED_TAIL_RE.sub(r" (\1)", message)
    message = _TAIL_RE.sub("", message)
    name_match = _NAME_RE.search(message)
    name = None
    if name_match:
        name = name_match.group(1)
        message = message[: name_match.start()]
    return code, name, " ".join(message.split())


THROW_IF = 395
"""FUNCTION_THROW_IF_VALUE_IS_NON_ZERO: chute's own checks (`throwIf`), whose message says it all."""
_EXECUTING_RE = re.compile(r":? while executing 'FUNCTION throwIf.*?'(?=[.:]|$)", re.S)


_PIPELINE_RE = re.compile(r":?\s*While executing \w+\.?")
"""The engine's processor names ("While executing ParallelParsingBlockInputFormat"): nothing
for users. The file a data error names, "(in file/uri ...)", stays: chute.load.recovery reads it."""
ZLIB_INFLATE_FAILED = 354
_INFLATE = {
    "buffer error": "the gzip data ends too soon (a file cut short?)",
    "data error": "not gzip data, or damaged",
}


def make_target_error(code: int | None, name: str | None, message: str, context: str = "") -> TargetError:
    if code == THROW_IF:
        message = _EXECUTING_RE.sub("", message)
    message = _PIPELINE_RE.sub("", message).rstrip(": ")
    if code == ZLIB_INFLATE_FAILED:
        meaning = next((m for k, m in _INFLATE.items() if k in message), "damaged gzip data")
        message = f"{meaning}: {message}"
    if len(message) > 600:
        message = message[:600] + "..."
    label = f"[{code} {name}] " if code is not None and name else (f"[{code}] " if code is not None else "")
    text = f"{context}: {label}{message}" if context else f"{label}{message}"
    cls: type[TargetError] = TransientTargetError if code in TRANSIENT_CODES else TargetError
    if code == NOT_ENOUGH_SPACE or "No space left on device" in message:
        cls = OutOfSpace
    elif "Too many open files" in message:
        cls = OutOfFiles
        text += OUT_OF_FILES_HINT
    elif code == TOO_MANY_PARTS and "partitions for" in message:
        # 252 also means "too many partitions for a single INSERT block": no retry fixes that.
        cls = TargetError
    return cls(text, code=code, name=name)


def translate_engine_error(exc: BaseException, context: str = "") -> TargetError:
    """Map an engine exception to a TargetError keeping the code and name."""
    text = str(exc)
    if isinstance(exc, UnicodeDecodeError) and isinstance(exc.object, bytes):
        # chDB decodes the engine's message as UTF-8; one quoting bytes of a non-UTF-8
        # (or binary) input fails there, and the message is in the exception's bytes.
        text = exc.object.decode("utf-8", errors="replace")
    code, name, message = parse_server_error(text.strip())
    return make_target_error(code, name, message, context)
