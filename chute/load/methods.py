"""Where a server reads units itself (url(), s3(), s3Cluster()), or parses the bytes chute sends as they are.

Three ways rows reach a server target: "client-convert" (the local engine reads, casts
and sends Native; chute.load.writer), "server-side" (the server reads the source itself,
this module), "server-parse" (file bytes sent as they are, the server parses them;
chute.load.serverparse).
"""

from __future__ import annotations

import copy
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from chute.capabilities import Capabilities
from chute.cores import usable_cores
from chute.errors import ChuteError, UsageError
from chute.load.balance import shared_out
from chute.load.checks.missing import watched
from chute.load.checks.typed import binary_read
from chute.load.checks.types import checked, strip_wrappers
from chute.load.context import LoadContext
from chute.load.options import LoadOptions
from chute.load.serverparse import ServerParse, server_time
from chute.load.sizing import uncompressed_size
from chute.schema import Column
from chute.sources.base import ROW_NUMBER_FORMATS, ServerReadable, Source
from chute.sql import quote_ident, quote_str
from chute.targets.base import Target
from chute.units import Unit

PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def origin(unit: Unit) -> str:
    """scheme://host[:port] of a URL unit; s3://bucket of an object."""
    parts = urllib.parse.urlsplit(unit.key)
    return f"{parts.scheme}://{parts.netloc}"


UNCOUNTED = (
    ": a missing value there (a JSON null or absent key, an empty field or \\N) took its column's "
    "default and is not in the defaults count (--method client-convert counts them)"
)


class ServerRead(NamedTuple):
    """How a server target reads one unit itself."""

    expression: str
    """The table function call (url(), s3(), s3Cluster()); probed once per origin."""
    select: str
    """The SELECT of `INSERT INTO table (columns) SELECT ...`."""


def server_side_select(
    source: Source,
    unit: Unit,
    fmt_name: str,
    inputs: Sequence[Column],
    capabilities: Capabilities,
    provenance: Mapping[str, str] | None = None,
    load_id: str = "",
    cluster: str | None = None,
) -> ServerRead | None:
    """The SELECT with which a server reads `unit` itself and fills provenance; None
    when the source cannot hand the unit over (its `server_blocker` says why).

    `provenance` maps the provenance columns to the table's types, when they are
    filled. `_source` and `_source_mtime` are constants: one unit per statement.
    `_source_row`: a url()/s3() read numbers rows in file order when one thread reads
    (max_threads 1); across a cluster only the node reading the object knows a row's
    place in it, so `_row_number`, which callers check first (`s3_row_number`).
    """
    if not isinstance(source, ServerReadable):
        return None
    # Old servers take names in a structure string only bare (`a` would name a field "`a`").
    # A typed file's values are read wide and cast exactly, as chute's own read does (checks.typed.binary_read).
    checks = typed_checks(unit, capabilities)
    reads = [binary_read(c.name, c.type, unit.fmt.format) if checks else None for c in inputs]
    plain = ", ".join(
        f"{c.name if PLAIN_NAME.match(c.name) else quote_ident(c.name)} {read.read_as if read else c.type}"
        for c, read in zip(inputs, reads, strict=True)
    )
    expression = source.server_expression(unit, plain, fmt_name, capabilities, cluster)
    if expression is None:
        return None
    exprs = [
        f"{read.value} AS {quote_ident(c.name)}" if read else quote_ident(c.name)
        for c, read in zip(inputs, reads, strict=True)
    ]
    if provenance is not None:
        values = {
            "_source": quote_str(unit.source_name),
            "_source_mtime": server_time(unit.mtime_ns, capabilities),
            "_source_row": "_row_number + 1" if cluster is not None else "rowNumberInAllBlocks() + 1",
            "_load_id": quote_str(load_id),
        }
        exprs += [f"CAST({v}, {quote_str(provenance[n])}) AS {n}" for n, v in values.items()]
    return ServerRead(expression, f"SELECT {', '.join(exprs)} FROM {expression}")


def typed_checks(unit: Unit, capabilities: Capabilities) -> bool:
    """Whether a server reading this typed (not text) file can check its values as chute does."""
    return not unit.fmt.is_text and capabilities.checked_typed_reads


def check_cluster(opts: LoadOptions, target: Target, source: Source, units: list[Unit]) -> None:
    """--cluster: refused at once, in one line, where it cannot be honoured."""
    if opts.cluster is None or not units or not isinstance(source, ServerReadable):
        return  # (files chute reads itself: --cluster only says where tables are made)
    if opts.method in ("client-convert", "server-parse"):
        raise UsageError(f"--cluster reads on the server's nodes: it does not go with --method {opts.method}")
    caps = target.capabilities
    blocker = source.server_blocker(units[0], caps, opts.cluster)
    if blocker is not None:
        raise UsageError(blocker if blocker.startswith("--cluster") else f"--cluster: {blocker}")
    if not opts.provenance:
        return
    if not caps.s3_row_number:
        raise UsageError(
            f"--cluster with provenance needs _row_number from s3Cluster() (server 26.9+, this one is "
            f"{caps.version_text}): pass --no-provenance, or load without --cluster"
        )
    numberless = next((u for u in units if u.fmt.format not in ROW_NUMBER_FORMATS), None)
    if numberless is not None:
        raise UsageError(
            f"--cluster with provenance: {numberless.key}: {numberless.fmt.format} objects carry no "
            "_row_number; pass --no-provenance, or load without --cluster"
        )


class Methods:
    """Which way a batch reaches a server target, and the SQL of the server-side way."""

    def __init__(self, ctx: LoadContext) -> None:
        self.ctx = ctx
        self.parse = ServerParse(ctx)
        self.uncounted_files = 0
        """Files the server parsed itself, whose missing values it leaves uncounted (`_uncounted`)."""

    def scrubbed(self, exc: ChuteError) -> ChuteError:
        """`exc` with its message cleaned of source secrets (server-side SQL carries them)."""
        text = self.ctx.source.scrub(str(exc))
        if text == str(exc):
            return exc
        clean = copy.copy(exc)
        clean.args = (text,)
        return clean

    def unchecked_by_server(self, unit: Unit) -> list[str]:
        """Columns whose values a server parsing the text itself would change without a word
        (wrapped integers, rolled-over dates: chute.load.checks.types.checked; floats an ulp off before
        26.7: Capabilities.precise_floats; CSV text's `\\N` and empty fields before 19.13:
        Capabilities.csv_text_like_engine; TSV text's unknown escapes before 20.5:
        Capabilities.tsv_text_like_engine; CSV text's spaces where the server trims them:
        ServerInfo.csv_keeps_spaces; a DEFAULT expression's column, where the server fills a
        missing field with its type's default: ServerInfo.omitted_defaults); chute's own read
        checks them."""
        if not unit.fmt.is_text:
            if typed_checks(unit, self.ctx.target.capabilities):
                return []
            fmt = unit.fmt.format
            return [c.name for c in self.ctx.input_columns() if binary_read(c.name, c.type, fmt) is not None]
        capabilities = self.ctx.target.capabilities
        floats = not capabilities.precise_floats
        texts = (
            unit.fmt.format == "CSV"
            and not (capabilities.csv_text_like_engine and self.parse.server().csv_keeps_spaces)
        ) or (unit.fmt.format == "TSV" and not capabilities.tsv_text_like_engine)
        # A column's DEFAULT expression, where the server fills a field a record lacks with 0.
        computed = not self.parse.server().omitted_defaults
        return [
            c.name
            for c in self.ctx.input_columns()
            if checked(c.type)
            or (floats and strip_wrappers(c.type)[0] in ("Float32", "Float64"))
            or (texts and strip_wrappers(c.type)[0] in ("String", "FixedString"))
            or (computed and c.default_kind == "DEFAULT" and bool(c.default_expression))
        ]

    def server_parses(self, unit: Unit, method: str) -> bool:
        """May the server parse `unit`'s text itself? Asked for (--method {method}): yes, with a
        note naming the columns it does not check. Chosen by auto: where it checks them all, or,
        with --spare-client, where chute checks the values it stored against its own read of
        those columns (chute.load.verify). Without it auto reads such files here: that read costs
        this machine what client-convert does, and the server a parse more (bench/README.md)."""
        unchecked = self.unchecked_by_server(unit)
        if not unchecked:
            return True
        spare_client = self.ctx.opts.spare == "client" or unit.key in self.parse.mixed
        if method == "server-parse" and self.ctx.opts.method == "auto" and self.ctx.fill_provenance and spare_client:
            checked_after = self.parse.verifier.columns(unit, unchecked)
            if checked_after is not None:  # chute checks what the server stored (chute.load.verify)
                self.parse.verified[unit.key] = checked_after
                return True
        if method == "server-parse" and self.parse.mix is not None and self.parse.mix.parse > 0:
            return False  # (auto shares the files between the two ways: the report's methods say why)
        columns = ", ".join(unchecked[:5]) + (", ..." if len(unchecked) > 5 else "")
        spare = "; --spare-client lets it parse integers and dates while chute checks them"
        also = spare if method == "server-parse" else ""
        if self.ctx.opts.method == method:
            self.ctx.note(
                f"--method {method}: the server parses values itself; out-of-range values of {columns} "
                "are not rows in the rejects table but what the server's parser makes of them"
            )
            return True
        self.ctx.note(
            f"{method} not used: the server's parser would change values of {columns} without a word "
            "(wrap or clamp numbers that do not fit; trim spaces around CSV text; on servers before 19.13, "
            "keep a CSV \\N as text; before 20.5, drop the backslash of an unknown TSV escape such as \\q); "
            f"chute reads and checks them (--method {method} lets the server parse{also})"
        )
        return False

    def balance(self, units: list[Unit]) -> None:
        """auto, before the batches are made: which JSON-lines files the server parses, checked,
        while this machine converts the others (chute.load.balance). Asked once per load."""
        ctx, parse = self.ctx, self.parse
        if ctx.opts.method != "auto" or ctx.opts.spare is not None or not ctx.fill_provenance or not units:
            return
        if not ctx.is_server() or parse.mix is not None:
            return

        def both_ways(unit: Unit) -> bool:
            columns = self.unchecked_by_server(unit) if parse.blocker(unit) is None else None
            return bool(columns) and parse.verifier.columns(unit, columns or []) is not None

        if all(both_ways(u) for u in units):  # (else one way for the whole load, as before)
            host = str(getattr(getattr(ctx.target, "address", None), "host", ""))
            sizes = [(u.key, uncompressed_size(u) or u.size) for u in units]
            parse.mix, parse.mixed = shared_out(sizes, host, usable_cores(), parse.server().cores)

    def server_side_possible(self, unit: Unit) -> bool:
        """Whether a server target may read `unit` itself (before any probe): such units
        load one per statement, so that each is its own ledger entry."""
        ctx = self.ctx
        source = ctx.source
        return (
            ctx.opts.method in ("auto", "server-side")
            and ctx.is_server()
            and isinstance(source, ServerReadable)
            and source.server_blocker(unit, ctx.target.capabilities, ctx.read_cluster) is None
        )

    def server_select(self, batch: list[Unit]) -> str | None:
        """The SELECT a server target runs to read a URL or an S3 object itself, or None.

        Chosen by --method auto or server-side (or --cluster) when the target is a server,
        the source can hand the server the unit (url(), s3(), s3Cluster()), and the server
        reaches it (probed once per origin). The server parses straight into the table's
        types and fills provenance. Where it cannot, auto converts here with a note;
        server-side and --cluster fail the unit, saying why.
        """
        ctx, unit = self.ctx, batch[0]
        asked = ctx.opts.method == "server-side" or ctx.read_cluster is not None
        source = ctx.source
        if (
            ctx.opts.method not in ("auto", "server-side")
            or not isinstance(source, ServerReadable)
            or not ctx.is_server()
        ):
            if asked:
                option = "--cluster" if ctx.read_cluster is not None else "--method server-side"
                raise UsageError(f"{unit.key}: {option} needs a server target and an http(s):// or s3:// source")
            return None
        blocker = source.server_blocker(unit, ctx.target.capabilities, ctx.read_cluster)
        if blocker is None and ctx.read_cluster is None and not self.server_parses(unit, "server-side"):
            return None
        if blocker is None:
            if len(batch) != 1:  # not batched when the server may read them (server_side_possible)
                return None
            read = self._server_read(unit, asked)
            if read is None:
                return None
            blocker = self.server_unreached(read.expression, unit)
            if blocker is None:
                return read.select
        if asked:
            raise UsageError(f"{unit.key}: the server cannot read it itself ({blocker})")
        ctx.note(f"{origin(unit)}: the server cannot read it itself ({blocker}); converted here")
        return None

    def _server_read(self, unit: Unit, asked: bool) -> ServerRead | None:
        ctx = self.ctx
        caps = ctx.target.capabilities
        fmt_name = ctx.format_name(unit)
        if fmt_name.endswith("WithNames") and not caps.reads_header_files:
            if asked:
                raise UsageError(
                    f"{unit.key}: server {caps.version_text} loses a row of "
                    "files with a header line when it reads them itself; use --method convert"
                )
            return None
        types = {c.name: c.type for c in ctx.info.columns} if ctx.fill_provenance else None
        return server_side_select(
            ctx.source, unit, fmt_name, ctx.input_columns(), caps, types, ctx.load_id, ctx.read_cluster
        )

    def server_unreached(self, expression: str, unit: Unit) -> str | None:
        """Why the server cannot read `unit` (its error, without secrets), None when it can.
        Probed once per origin (scheme, host, port; an S3 bucket): reaching one object
        there means reaching the rest."""
        ctx = self.ctx
        where = origin(unit)
        if where not in ctx.server_reach:
            try:
                ctx.target.rows(f"SELECT 1 AS ok FROM {expression} LIMIT 1", context=f"{unit.key}: probing")
                ctx.server_reach[where] = None
            except ChuteError as exc:
                ctx.server_reach[where] = str(self.scrubbed(exc))
        return ctx.server_reach[where]

    def pass_through(self, batch: list[Unit]) -> bool:
        """Whether the server parses the batch's files itself (server-parse): asked for, or
        chosen by auto for every unit (chute.load.serverparse says when and why)."""
        ctx = self.ctx
        if ctx.opts.method == "client-convert" or (len(batch) != 1 and not ctx.fill_provenance):
            return False
        return all(self.parse.choose(unit, self.server_parses) for unit in batch)

    def _uncounted(self, files: int) -> None:
        """One note for the files the server parsed itself: their missing values are not counted
        (an 18.16 server gives a missing value its default with no trace; chute.load.checks.missing).
        Called under the context's lock."""

        def note(n: int) -> str:
            return f"{n} file{'s' if n > 1 else ''} parsed by the server{UNCOUNTED}"

        notes = self.ctx.report.notes
        before = note(self.uncounted_files)
        self.uncounted_files += files
        if before in notes:
            notes[notes.index(before)] = note(self.uncounted_files)
        else:
            notes.append(note(self.uncounted_files))

    def ran(self, batch: list[Unit], method: str, why: str = "") -> None:
        """The report's count of units per method, and why each method ran."""
        ctx = self.ctx
        if not ctx.is_server():
            return
        with ctx.lock:
            methods = ctx.report.methods
            methods[method] = methods.get(method, 0) + len(batch)
            for unit in batch:
                reason = f"{method}: {why or self.parse.why.get(unit.key) or 'the source is read here'}"
                if reason not in ctx.report.method_why:
                    ctx.report.method_why.append(reason)
            # (chute counts them in the files whose values it checks after the server: chute.load.verify)
            uncounted = [
                u
                for u in batch
                if method == "server-side" or u.key not in self.parse.verified or u.key in self.parse.uncounted
            ]
            if method != "client-convert" and any(
                watched(c, u.fmt.format) for u in uncounted for c in ctx.input_columns()
            ):
                self._uncounted(len(uncounted))
