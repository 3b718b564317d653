"""The one place that runs SQL in the embedded ClickHouse engine (chDB).

chDB keeps one engine per process; connections to the same database directory
share it and may run statements at the same time from different threads.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

from chute.calls import when_calls_end
from chute.enginedir import IDLE, DirectoryLock, ReadOnlyView, check_writable
from chute.enginedir import LOCK_FILE as LOCK_FILE  # (targets import it from here)
from chute.errors import TargetError, UsageError, translate_engine_error

Settings = Mapping[str, "str | int | float"]
Item = TypeVar("Item")
Result = TypeVar("Result")


def render_settings(settings: Settings | None) -> str:
    """A SETTINGS clause (or nothing) from a mapping; values are quoted if text."""
    if not settings:
        return ""
    parts = []
    for key, value in settings.items():
        if not key.replace("_", "").isalnum():
            raise UsageError(f"invalid setting name {key!r}")
        if isinstance(value, str):
            from chute.sql import quote_str

            parts.append(f"{key} = {quote_str(value)}")
        else:
            parts.append(f"{key} = {value}")
    return " SETTINGS " + ", ".join(parts)


MEMORY = ":memory:"

BIG_QUERIES = (
    "SET max_query_size = 1073741824, max_ast_elements = 10000000, max_expanded_ast_elements = 10000000, "
    "max_ast_depth = 10000, max_parser_depth = 10000, max_parser_backtracks = 1000000000"
)
"""Limits on one statement's size and shape, raised for each connection: chute's SQL grows with a
file's columns (a 2,000-column CSV's careful pass is megabytes of SQL, past the default 256 KiB
and 50,000 AST elements). The depth limits guard the engine's stack: chute's SQL keeps its
nesting flat (no level per column), so 10,000 is room to spare."""

ENGINE_START = "background_pool_size=16"
"""The engine's own settings, given when the first connection starts it. 16 threads for merges and
mutations (a ClickHouse server's default; chDB's is 2): each part's mutation waits about 0.3 s
mostly idle, so an UPDATE or DELETE over 400 day partitions (the careful pass mending
`_source_row`, a re-run removing a killed run's rows) took 70 s with 2 threads, 12 s with 16."""

HTTP_TRIES = "SET http_max_tries = 4"
"""A URL that cuts its body: 4 tries (0.1 + 0.2 + 0.4 s apart), not the engine's 10 with up to 10 s
between them (about 33 s a read), on every read of a connection: inference and the header and
shape looks read a URL too, not only the load's own queries (whose settings say the same)."""

_lean_import = False


def lean_engine_import() -> None:
    """Load the engine without pyarrow (and numpy), which its package imports only for Arrow
    results that chute never asks for: 0.2-0.4 s less start-up on two cores. Only for a
    process chute owns (the `chute` command): the package keeps its Arrow APIs off for good."""
    global _lean_import
    _lean_import = True


def _import_engine() -> Any:
    blocked = _lean_import and "chdb" not in sys.modules and "pyarrow" not in sys.modules
    if blocked:
        sys.modules["pyarrow"] = None  # type: ignore[assignment]  # `import pyarrow` fails: the package goes without
    try:
        import chdb  # imported late: loading the engine takes a moment
    finally:
        if blocked and "pyarrow" in sys.modules and sys.modules["pyarrow"] is None:
            del sys.modules["pyarrow"]
    return chdb


ProgressListener = Callable[[int, Mapping[str, int]], None]
"""Told (a connection's number, the engine's progress of its running statement: `read_rows`,
`read_bytes`, `total_bytes_to_read`, ...) about ten times a second, from the thread that runs it."""

_listener: ProgressListener | None = None


@contextlib.contextmanager
def engine_progress(listener: ProgressListener) -> Iterator[None]:
    """While open, every statement of this process's engine tells `listener` how far it has
    read: a batch of files is one statement, so this is how a bar moves within a batch."""
    global _listener
    _listener = listener
    for engine in list(_engines.values()):
        engine.watch(True)
    try:
        with _signals_kept():
            yield
    finally:
        _listener = None
        for engine in list(_engines.values()):
            engine.watch(False)


@contextlib.contextmanager
def _no_terminal_stderr() -> Iterator[None]:
    """The engine rings the terminal bell (BEL on stderr) after a statement of 5 s or more when
    stderr is a terminal, as its client does (`--chime`, not settable through a connection);
    it decides when a connection starts. Each connection starts with stderr elsewhere, so no
    bell reaches the user's terminal from a long batch."""
    try:
        tty = os.isatty(2)
    except OSError:
        tty = False
    if not tty:
        yield
        return
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


_stderr_lock = threading.Lock()
"""One connection starts at a time while stderr is moved: two threads moving it at once
could leave it pointing nowhere for good."""


def _connect(chdb: Any, target: str) -> Any:
    with _stderr_lock, _no_terminal_stderr():
        return chdb.connect(target)


@dataclass(frozen=True)
class StatementResult:
    rows_written: int
    bytes_written: int
    elapsed: float


@contextlib.contextmanager
def _globless_cwd() -> Iterator[None]:
    """The engine keeps the working directory it starts in; where that name holds `*?[{`, its
    schema inference finds no file at all, whatever the (absolute) path (measured on chDB 26.9;
    a SELECT of the same file works). It starts in `/` then; chute's paths are absolute."""
    cwd = os.getcwd()
    if not any(c in cwd for c in "*?[{"):
        yield
        return
    os.chdir("/")
    try:
        yield
    finally:
        os.chdir(cwd)


class Engine:
    """An embedded engine bound to one database directory (or memory)."""

    _lock = threading.Lock()
    _open_path: str | None = None

    def __init__(self, path: str, config_file: str | None = None, reading: bool = False) -> None:
        chdb = _import_engine()
        self.path = path
        self._holder: DirectoryLock | None = None
        self._view: ReadOnlyView | None = None
        self._connect_to = path
        """What each connection opens: the directory, or a read-only view of it."""
        if path != MEMORY:
            try:
                check_writable(path)
            except TargetError:
                if not reading or not os.path.isdir(path):
                    raise
                self._view = ReadOnlyView(path)  # a directory one may read but not write
                self._connect_to = self._view.connect_to
        with Engine._lock:
            if Engine._open_path not in (None, path):
                raise UsageError(
                    f"this process already uses the embedded database {Engine._open_path!r}; "
                    "chDB holds one database directory per process"
                )
            if path != MEMORY and self._view is None:
                self._holder = DirectoryLock.take(path)
            try:
                # A config file is read once, when the first connection starts the engine.
                config = os.path.abspath(config_file) if config_file else None
                target = self._connect_to + ("&" if "?" in self._connect_to else "?") + ENGINE_START
                if config:
                    target += f"&config-file={config}"
                with _globless_cwd():
                    self._conn = _connect(chdb, target)
                self._raise_limits(self._conn)
            except Exception as exc:
                if self._holder is not None:
                    self._holder.release()
                if self._view is not None:
                    self._view.remove()
                raise translate_engine_error(exc, f"cannot open embedded database {path}") from exc
            Engine._open_path = path
        self._local = threading.local()
        self._extra: list[Any] = []
        self._helpers: ThreadPoolExecutor | None = None
        """Threads kept for `side_by_side`, each with its connection (made once)."""
        self._helper_count = 0
        if _listener is not None:
            self.watch(True)

    def _connection(self) -> Any:
        """A connection per thread: chDB runs one statement per connection."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if threading.current_thread() is threading.main_thread():
                conn = self._conn
            else:
                import chdb

                conn = _connect(chdb, self._connect_to)
                self._extra.append(conn)
                if _listener is not None:
                    _listen(conn, len(self._extra))
                self._raise_limits(conn)
            self._local.conn = conn
        return conn

    def watch(self, on: bool) -> None:
        """Send the progress of this engine's statements to the listener (or stop)."""
        for number, conn in enumerate([self._conn, *self._extra]):
            if on:
                _listen(conn, number)
            else:
                with contextlib.suppress(Exception):
                    conn.set_progress_callback(None)

    def _raise_limits(self, conn: Any) -> None:
        """BIG_QUERIES and HTTP_TRIES on a connection; a read-only one (which may not change
        settings) keeps the engine's: it runs the user's queries and chute's small ones."""
        if self._view is None:
            conn.query(BIG_QUERIES)
            conn.query(HTTP_TRIES)

    @property
    def read_only(self) -> bool:
        """Opened for reading only (the directory cannot be written): writes are refused."""
        return self._view is not None

    def execute(self, sql: str, settings: Settings | None = None, context: str = "") -> StatementResult:
        """Run a statement that returns no rows (DDL, INSERT, DELETE)."""
        try:
            res = self._connection().query(sql + render_settings(settings))
        except Exception as exc:
            raise translate_engine_error(exc, context) from exc
        finally:
            _raise_interrupt()
        return StatementResult(int(res.rows_written()), int(res.bytes_written()), float(res.elapsed()))

    def rows(self, sql: str, settings: Settings | None = None, context: str = "") -> list[dict[str, Any]]:
        """Run a query and return its (small) result as dicts."""
        try:
            res = self._connection().query(sql + render_settings(settings), "JSONEachRow")
        except Exception as exc:
            raise translate_engine_error(exc, context) from exc
        finally:
            _raise_interrupt()
        # Strings are bytes in the engine: text that is not UTF-8 (a Latin-1 file's first
        # line, a binary file read as lines) comes back with U+FFFD in place of bad bytes.
        data = res.bytes().decode("utf-8", errors="replace")
        return [json.loads(line) for line in data.splitlines() if line.strip()]

    def text(self, sql: str, fmt: str = "TSV", settings: Settings | None = None, context: str = "") -> str:
        try:
            res = self._connection().query(sql + render_settings(settings), fmt)
        except Exception as exc:
            raise translate_engine_error(exc, context) from exc
        finally:
            _raise_interrupt()
        return str(res.bytes().decode("utf-8", errors="replace"))

    def stream(self, sql: str, fmt: str, settings: Settings | None = None, context: str = "") -> Iterator[bytes]:
        """Run a query and yield its output block by block (bounded memory)."""
        for view, _owner in self.stream_views(sql, fmt, settings, context):
            yield bytes(view)

    def stream_views(
        self, sql: str, fmt: str, settings: Settings | None = None, context: str = ""
    ) -> Iterator[tuple[memoryview, object]]:
        """`stream` without a copy of each block: (the block's bytes, the engine's result that owns
        them). The view is valid only while its owner is referenced: keep the pair together."""
        try:
            result = self._connection().send_query(sql + render_settings(settings), fmt)
        except Exception as exc:
            raise translate_engine_error(exc, context) from exc
        try:
            while True:
                try:
                    chunk = result.fetch()
                except Exception as exc:
                    raise translate_engine_error(exc, context) from exc
                finally:
                    _raise_interrupt()
                if chunk is None:
                    return
                yield chunk.get_memview().view(), chunk
        finally:
            with contextlib.suppress(Exception):
                result.close()

    def side_by_side(self, work: Callable[[Item], Result], items: Sequence[Item], threads: int) -> list[Future[Result]]:
        """`work` on each item, on up to `threads` threads at once (this one among them), each
        with its own connection: small statements that keep one core busy each (a DESCRIBE, the
        first lines of a file) finish in about half the time on two cores. The outcomes in the
        items' order, done: `result()` gives an item's value or raises its error."""
        outcomes: list[Future[Result]] = [Future() for _ in items]
        claimed = iter(range(len(items)))
        claim = threading.Lock()

        def drain() -> None:
            while True:
                with claim:
                    index = next(claimed, None)
                if index is None:
                    return
                try:
                    outcomes[index].set_result(work(items[index]))
                except Exception as exc:  # (KeyboardInterrupt and the like stop the caller's thread)
                    outcomes[index].set_exception(exc)

        helpers = min(threads, len(items)) - 1
        if helpers > 0:
            if self._helpers is None or self._helper_count < helpers:
                if self._helpers is not None:
                    self._helpers.shutdown(wait=True)
                self._helpers = ThreadPoolExecutor(helpers, thread_name_prefix="chute-engine")
                self._helper_count = helpers
            started = [self._helpers.submit(drain) for _ in range(helpers)]
        else:
            started = []
        try:
            drain()
        finally:
            for helper in started:
                helper.result()
        return outcomes

    def close(self) -> None:
        """Close the connections; the directory may be opened again afterwards."""
        if self._helpers is not None:
            self._helpers.shutdown(wait=True)
            self._helpers = None
        for conn in self._extra:
            with contextlib.suppress(Exception):
                conn.close()
        self._extra.clear()
        with contextlib.suppress(Exception):
            self._conn.close()
        with Engine._lock:
            Engine._open_path = None
        if self._holder is not None:
            self._holder.release()
            self._holder = None
        if self._view is not None:
            self._view.remove()
            self._view = None
        if _engines.get(self.path) is self:
            del _engines[self.path]


_interrupts: list[Callable[[], None]] = []
"""Signals (Ctrl-C; SIGTERM in the command) that arrived while the engine ran a statement, as their
handlers to call once it returns: Python runs a handler inside the next progress callback, and the
engine drops whatever a callback raises (the interrupt was lost, the statement went on)."""


def _raise_interrupt() -> None:
    """Run the handler of a signal kept during the statement that just ended (in the main thread,
    where Python runs signal handlers): Ctrl-C's raises KeyboardInterrupt here."""
    if _interrupts and threading.current_thread() is threading.main_thread():
        handler = _interrupts[0]
        _interrupts.clear()
        handler()


def _forward(number: int, payload: Mapping[str, int]) -> None:
    listener = _listener
    if listener is not None:
        with contextlib.suppress(Exception):  # a drawing error must not fail a load
            listener(number, payload)


def _in_callback(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code is _forward.__code__:
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def _signals_kept() -> Iterator[None]:
    """While progress callbacks run (main thread only): a SIGINT or SIGTERM whose handler Python
    would run inside a callback is kept for when the statement returns (`_raise_interrupt`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[signal.Signals, Callable[[int, FrameType | None], Any]] = {}

    def keep(signum: int, frame: FrameType | None) -> None:
        handler = previous[signal.Signals(signum)]
        if not _in_callback(frame):
            handler(signum, frame)
            return
        _interrupts.append(lambda: handler(signum, None))

    for kind in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(kind)
        if callable(handler):  # (a Python handler: default_int_handler, the command's SIGTERM)
            previous[kind] = handler
            signal.signal(kind, keep)
    try:
        yield
    finally:
        for kind, handler in previous.items():
            signal.signal(kind, handler)
        _raise_interrupt()  # (one kept in a statement whose caller did not ask)


def _listen(conn: Any, number: int) -> None:
    with contextlib.suppress(Exception):  # (an engine without progress callbacks: no live bar)
        conn.set_progress_callback(functools.partial(_forward, number))


def say_doing(what: str) -> None:
    """Tell the lock of this process's embedded directory (if any) what it does there."""
    for engine in _engines.values():
        if engine._holder is not None:
            engine._holder.doing(what)


when_calls_end(lambda: say_doing(IDLE))
"""A process that called chute (a notebook, a worker) keeps its engine, and so the directory:
another process is told it is idle, not still "loading"."""


_engines: dict[str, Engine] = {}


def close_engines() -> None:
    """Close every engine of this process (the next open starts the engine afresh)."""
    for engine in list(_engines.values()):
        engine.close()


def shared_engine() -> Engine:
    """The engine this process has open (chDB holds one per process), else one in memory."""
    return next(iter(_engines.values()), None) or open_engine(MEMORY)


def open_engine(path: str, config_file: str | None = None, reading: bool = False) -> Engine:
    """The engine for a directory (or MEMORY), shared by every call in this process.

    With `config_file` (chDB's server-style XML, e.g. to keep a query log) the
    engine is started afresh with it. `reading`: the caller only reads, so a directory
    that cannot be written is opened read-only instead of refused."""
    real = path if path == MEMORY else os.path.abspath(path)
    if config_file is not None:
        close_engines()
    engine = _engines.get(real)
    if engine is None:
        if _engines:
            for old in list(_engines.values()):
                old.close()
            _engines.clear()
        engine = Engine(real, config_file, reading)
        _engines[real] = engine
    return engine
