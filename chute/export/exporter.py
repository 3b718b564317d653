"""`chute export`: a table or query to files, one per partition, in parallel.

The engine selects each partition and serialises it (Native, CSV, TSV, JSON
lines; Parquet through the engine's own writer); chute only moves the byte
blocks: it compresses them (zstd, lz4, gzip), starts a new file at a block
boundary when `--max-file-size` is reached, writes under a hidden temporary
name and renames when the file is complete. A manifest (`_chute_export.json`)
lists files, row counts, sizes and the exact column types: `chute load DIR`
needs no column list, and a re-run skips partitions already written.

A server source is read by the embedded engine through the server's HTTP
interface (the `url()` table function), so both targets share one writer and
the filter of each partition runs on the server.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
import urllib.parse
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from typing import Any

from chute.calls import public_call
from chute.cores import usable_cores
from chute.engine import Engine
from chute.errors import ChuteError, SourceError, TargetError, UsageError
from chute.export.dest import (
    S3_MAX_OBJECT_BYTES,
    TMP_SUFFIX,
    Dest,
    LocalDest,
    S3Dest,
    local_error,
    unlink_quietly,
)
from chute.export.model import (
    COMPRESSIONS,
    FORMATS,
    PARQUET_CODECS,
    ExportedFile,
    ExportOptions,
    ExportReport,
    Partition,
    ProgressCallback,
    is_query,
    normalize_compression,
    partition_id,
)
from chute.export.pieces import PieceWriter, rows_in_block
from chute.manifest import MANIFEST, MANIFEST_VERSION
from chute.schema import Column
from chute.sql import TableName, expression, one_statement, quote_ident, quote_str
from chute.targets import Target, open_target


@public_call
def export(
    source: str,
    dest: str,
    target: str | None = None,
    options: ExportOptions | None = None,
    progress: ProgressCallback | None = None,
) -> ExportReport:
    """Write a table (or the result of a query) to files under `dest`, resumably."""
    opts = options or ExportOptions()
    fmt_key = opts.format.lower()
    if fmt_key == "json":
        fmt_key = "jsonl"
    if fmt_key not in FORMATS:
        raise UsageError(f"unknown export format {opts.format!r}: use one of {', '.join(FORMATS)}")
    compression = normalize_compression(opts.compression, fmt_key)
    if opts.max_file_bytes is not None and opts.max_file_bytes < 1:
        raise UsageError("--max-file-size must be positive")
    if opts.partition_by is not None:
        expression(opts.partition_by, "--partition-by")
    out: Dest
    if dest.lower().startswith("s3://"):
        out = S3Dest(dest, opts.s3_endpoint)
        if opts.max_file_bytes is None:  # one PUT takes at most 5 GiB
            opts = replace(opts, max_file_bytes=S3_MAX_OBJECT_BYTES)
    elif "://" in dest:
        raise UsageError(
            f"unknown destination scheme {dest.split('://', 1)[0]!r}: give a directory or s3://bucket/prefix"
        )
    else:
        out = LocalDest(os.path.abspath(os.path.expanduser(dest)))  # (a quoted ~/...: as the shell would)
    started = time.monotonic()
    tgt = open_target(target, opts.password_file, opts.insecure, existing=True)
    try:
        exporter = _Exporter(tgt, source, out, fmt_key, compression, opts)
        report = exporter.run(progress)
    except OSError as exc:  # the local directory (S3 errors are ChuteErrors already)
        raise local_error(exc, out.display) from None
    finally:
        out.close()
    report.seconds = time.monotonic() - started
    return report


UNKNOWN_DATABASE, UNKNOWN_TABLE = 81, 60


class _Exporter:
    def __init__(
        self, target: Target, source: str, out: Dest, fmt_key: str, compression: str, opts: ExportOptions
    ) -> None:
        self.target = target
        self.source = source
        self.out = out
        self.dest = out.display
        self.work = out.work_dir
        self.fmt_key = fmt_key
        self.format_name, ext = FORMATS[fmt_key]
        self.compression = compression
        suffix = COMPRESSIONS[compression] if fmt_key != "parquet" else ""
        self.extension = f"{ext}.{suffix}" if suffix else ext
        self.opts = opts
        self.workers = max(1, opts.workers or usable_cores())
        self.source_sql = f"(\n{one_statement(source)}\n)" if is_query(source) else TableName.parse(source).sql
        self.remote = target.is_server  # a server: read through its HTTP interface
        self.lock = threading.Lock()
        self.manifest: dict[str, Any] = {}

    # -- planning -------------------------------------------------------------

    def _columns(self) -> list[Column]:
        try:
            text = self.target.text(
                f"SELECT * FROM {self.source_sql} LIMIT 0", "JSONCompact", context="reading the source"
            )
        except TargetError as exc:
            if exc.code not in (UNKNOWN_TABLE, UNKNOWN_DATABASE):
                raise
            where = self.target.display_name
            if is_query(self.source):
                raise UsageError(f"the query names a table or database that {where} does not have: {exc}") from None
            raise UsageError(f"no table {self.source} in {where} (chute status lists what is loaded)") from None
        try:
            meta = json.loads(text)["meta"]
        except (ValueError, KeyError) as exc:
            raise SourceError(f"cannot read the columns of {self.source}: {exc}") from None
        return [Column(m["name"], m["type"]) for m in meta]

    def _partitions(self) -> tuple[list[Partition], str | None]:
        """Partition values with their row counts, and the expression's type."""
        expr = self.opts.partition_by
        if not expr:
            rows = self.target.rows(f"SELECT count() AS n FROM {self.source_sql}", context="counting the source rows")
            return [Partition("all", int(rows[0]["n"]), "all")], None
        found = self.target.rows(
            f"SELECT toString({expr}) AS value, count() AS n FROM {self.source_sql} GROUP BY value ORDER BY value",
            context=f"listing the partitions of {expr}",
        )
        typed = self.target.rows(
            f"SELECT toTypeName({expr}) AS t FROM {self.source_sql} LIMIT 1", context="typing the partition key"
        )
        parts = [Partition(r["value"], int(r["n"])) for r in found]
        seen: dict[str, str | None] = {}
        for p in parts:
            p.pid = partition_id(p.value)
            if p.pid in seen and seen[p.pid] != p.value:
                p.pid = "h" + hashlib.sha1((p.value or "").encode()).hexdigest()[:16]
            seen[p.pid] = p.value
        return parts, typed[0]["t"] if typed else None

    def _filter(self, part: Partition, type_name: str | None) -> str:
        expr = self.opts.partition_by
        if not expr:
            return "1"
        if part.value is None:
            return f"isNull({expr})"
        # A constant of the key's own type keeps the engine's partition pruning.
        inner = re.sub(r"^Nullable\((.*)\)$", r"\1", type_name or "String")
        return f"({expr}) = CAST({quote_str(part.value)}, {quote_str(inner)})"

    def _settings_fingerprint(self, columns: list[Column]) -> dict[str, Any]:
        return {
            "source": self.source,
            "format": self.format_name,
            "compression": self.compression,
            "partition_by": self.opts.partition_by,
            "max_file_size": self.opts.max_file_bytes,
            "columns": [{"name": c.name, "type": c.type} for c in columns],
        }

    def _read_manifest(self, fingerprint: dict[str, Any]) -> dict[str, Any]:
        text = self.out.read(MANIFEST)
        if text is None:
            if any(not n.startswith(".") for n in self.out.names()):
                raise UsageError(f"{self.dest} is not empty and holds no chute export; give an empty directory")
            return {}
        try:
            manifest: dict[str, Any] = json.loads(text)
        except ValueError as exc:
            raise UsageError(
                f"{self.out.location(MANIFEST)}: unreadable manifest ({exc}); remove it to export again"
            ) from None
        old = {k: manifest.get(k) for k in fingerprint}
        if old != fingerprint:
            changed = ", ".join(k for k in fingerprint if old.get(k) != fingerprint[k])
            raise UsageError(
                f"{self.dest} holds an export made with another {changed}; export to another directory or remove it"
            )
        return manifest

    # -- running --------------------------------------------------------------

    def run(self, progress: ProgressCallback | None) -> ExportReport:
        columns = self._columns()  # a wrong table or query fails before the directory is made
        if not columns:
            raise SourceError(f"{self.source}: no columns")
        self.out.prepare()
        fingerprint = self._settings_fingerprint(columns)
        old = self._read_manifest(fingerprint)
        parts, type_name = self._partitions()
        report = ExportReport(self.source, self.dest, self.format_name, self.compression)
        report.partitions_total = len(parts)
        report.rows_total = sum(p.rows for p in parts)
        report.manifest = self.out.location(MANIFEST)
        todo, kept = self._sort_out(parts, old, report)
        self._start_manifest(fingerprint, columns, parts, old.get("partitions", {}), kept, todo)
        structure = ", ".join(f"{quote_ident(c.name)} {c.type}" for c in columns)
        self._write_all(todo, type_name, structure, report, progress)
        self.manifest["complete"] = True
        self.manifest["rows"] = sum(int(p["rows"]) for p in self.manifest["partitions"].values())
        self.manifest["files"].sort(key=lambda f: f["path"])
        self._write_manifest()
        report.files.sort(key=lambda f: f.path)
        return report

    def _sort_out(
        self, parts: list[Partition], old: dict[str, Any], report: ExportReport
    ) -> tuple[list[Partition], list[dict[str, Any]]]:
        """The partitions to write, and the files of those a previous run finished (kept and
        counted as skipped); files of partitions to write again or gone from the source go."""
        present = self.out.names()
        old_parts: dict[str, Any] = old.get("partitions", {})
        old_files: list[dict[str, Any]] = old.get("files", [])
        current = {p.pid for p in parts}
        todo: list[Partition] = []
        kept: list[dict[str, Any]] = []
        for part in parts:
            entry = old_parts.get(part.pid)
            files = [f for f in old_files if f["partition"] == part.pid]
            if entry and entry.get("rows") == part.rows and self._files_intact(files, present):
                kept.extend(files)
                report.partitions_skipped += 1
            else:
                self._remove(files)
                self._remove_named(part, present)
                todo.append(part)
        self._remove([f for f in old_files if f["partition"] not in current])  # partitions gone from the source
        return todo, kept

    def _start_manifest(
        self,
        fingerprint: dict[str, Any],
        columns: list[Column],
        parts: list[Partition],
        old_parts: dict[str, Any],
        kept: list[dict[str, Any]],
        todo: list[Partition],
    ) -> None:
        """The manifest before any partition is written: the kept partitions and their files."""
        self.manifest = {
            "chute_export": MANIFEST_VERSION,
            **fingerprint,
            "structure": ", ".join(f"{quote_ident(c.name)} {c.type}" for c in columns),
            "extension": self.extension,
            "complete": False,
            "rows": sum(p.rows for p in parts),
            "partitions": {p.pid: {"value": p.value, "rows": p.rows} for p in parts if p.pid in old_parts},
            "files": kept,
        }
        for part in todo:
            self.manifest["partitions"].pop(part.pid, None)
        self._write_manifest()

    def _write_all(
        self,
        todo: list[Partition],
        type_name: str | None,
        structure: str,
        report: ExportReport,
        progress: ProgressCallback | None,
    ) -> None:
        """Write the partitions in parallel, each one's files into the manifest as it finishes."""
        done = 0

        def one(part: Partition) -> list[ExportedFile]:
            files = self._export_partition(part, type_name, structure)
            written = sum(f.rows for f in files)
            with self.lock:
                self.manifest["partitions"][part.pid] = {"value": part.value, "rows": written}
                self.manifest["files"].extend(asdict(f) for f in files)
                self._write_manifest()
            return files

        # Largest first: the last partitions to finish are then the small ones.
        todo.sort(key=lambda p: -p.rows)
        with ThreadPoolExecutor(min(self.workers, max(1, len(todo)))) as pool:
            for written in pool.map(one, todo):
                done += 1
                report.files.extend(written)
                report.rows_written += sum(f.rows for f in written)
                report.bytes_written += sum(f.bytes for f in written)
                report.partitions_written += 1
                if progress:
                    progress(done, report.rows_written, report.bytes_written)

    def _files_intact(self, files: list[dict[str, Any]], present: dict[str, int]) -> bool:
        return bool(files) and all(present.get(f["path"]) == f["bytes"] for f in files)

    def _remove(self, files: list[dict[str, Any]]) -> None:
        for f in files:
            self.out.remove(f["path"])

    def _remove_named(self, part: Partition, present: dict[str, int]) -> None:
        """Files of a partition that a killed run put in place before its manifest said so."""
        pattern = re.compile(rf"^{re.escape(part.pid)}(\.\d{{3,}})?\.{re.escape(self.extension)}$")
        for name in present:
            if pattern.match(name):
                self.out.remove(name)

    def _write_manifest(self) -> None:
        self.out.write(MANIFEST, json.dumps(self.manifest, indent=1).encode())

    def _file_name(self, part: Partition, n: int) -> str:
        return f"{part.pid}.{self.extension}" if n == 0 else f"{part.pid}.{n:03d}.{self.extension}"

    def _select(self, part: Partition, type_name: str | None, structure: str) -> str:
        """The engine SELECT that reads one partition (through the server when remote)."""
        query = f"SELECT * FROM {self.source_sql} WHERE {self._filter(part, type_name)}"
        if not self.remote:
            return query
        return f"SELECT * FROM {self._server_url(query, structure)}"

    def _server_url(self, query: str, structure: str) -> str:
        address = getattr(self.target, "address", None)
        if address is None:
            raise UsageError("exporting needs an embedded or an http(s) server target")
        if self.opts.insecure:
            raise UsageError("--insecure is not supported by export: the engine checks TLS certificates")
        params = {
            "database": address.database,
            "user": address.user,
            "password": address.password,
            "query": f"{query} FORMAT Native",
        }
        url = address.base_url + "?" + urllib.parse.urlencode(params)
        return f"url({quote_str(url)}, 'Native', {quote_str(structure)})"

    def _scrubbed(self, exc: ChuteError) -> ChuteError:
        """The same error with the server password removed (it travels in the url() call)."""
        address = getattr(self.target, "address", None)
        password = getattr(address, "password", "")
        if not password:
            return exc
        text = str(exc)
        for secret in {password, urllib.parse.quote_plus(password), urllib.parse.quote(password)}:
            text = text.replace(secret, "***")
        return type(exc)(text, code=exc.code, name=exc.name)

    def _export_partition(self, part: Partition, type_name: str | None, structure: str) -> list[ExportedFile]:
        engine = self.target.engine
        try:
            if self.fmt_key == "parquet":
                return self._export_parquet(engine, part, type_name, structure)
            return self._export_stream(engine, part, type_name, structure)
        except ChuteError as exc:
            raise self._scrubbed(exc) from None

    def _export_parquet(
        self, engine: Engine, part: Partition, type_name: str | None, structure: str
    ) -> list[ExportedFile]:
        """Parquet: the engine writes whole files (row groups need the engine's writer)."""
        settings = {"output_format_parquet_compression_method": PARQUET_CODECS[self.compression]}
        if self.opts.max_file_bytes is None:
            select = self._select(part, type_name, structure)
            return [self._engine_write(engine, part, 0, select, structure, settings)]
        # Cut the partition into Native pieces of the size asked, then turn each into Parquet.
        pieces = self._write_pieces(engine, part, type_name, structure, "Native", "none", publish=False)
        converted: list[tuple[str, int]] = []
        try:
            for piece in pieces:
                select = f"SELECT * FROM file({quote_str(piece.path)}, 'Native', {quote_str(structure)})"
                converted.append(self._engine_file(engine, part, select, structure, settings))
        except BaseException:
            for tmp, _ in converted:
                unlink_quietly(tmp)
            raise
        finally:
            for piece in pieces:
                unlink_quietly(piece.path)
        return self._publish(part, converted)

    def _engine_write(
        self, engine: Engine, part: Partition, n: int, select: str, structure: str, settings: dict[str, str]
    ) -> ExportedFile:
        return self._publish(part, [self._engine_file(engine, part, select, structure, settings)])[0]

    def _engine_file(
        self, engine: Engine, part: Partition, select: str, structure: str, settings: dict[str, str]
    ) -> tuple[str, int]:
        """The engine writes one Parquet file under a temporary name: (path, rows)."""
        tmp = os.path.join(self.work, f".{part.pid}.{uuid.uuid4().hex[:8]}.parquet{TMP_SUFFIX}")
        try:
            result = engine.execute(
                f"INSERT INTO FUNCTION file({quote_str(tmp)}, 'Parquet', {quote_str(structure)}) {select}",
                {**settings, "engine_file_truncate_on_insert": 1},
                context=f"exporting partition {part.pid}",
            )
        except BaseException:
            unlink_quietly(tmp)
            raise
        return tmp, result.rows_written

    def _publish(self, part: Partition, written: list[tuple[str, int]]) -> list[ExportedFile]:
        """Put a partition's finished files in place under their names (temporary files go)."""
        files: list[ExportedFile] = []
        try:
            for n, (tmp, rows) in enumerate(written):
                name = self._file_name(part, n)
                files.append(ExportedFile(name, part.pid, rows, self.out.publish(tmp, name)))
        finally:
            for tmp, _ in written:
                unlink_quietly(tmp)
        return files

    def _header(self, structure_columns: list[str]) -> bytes:
        if self.format_name == "CSVWithNames":
            return (",".join('"' + n.replace('"', '""') + '"' for n in structure_columns) + "\n").encode()
        if self.format_name == "TSVWithNames":
            esc = [n.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n") for n in structure_columns]
            return ("\t".join(esc) + "\n").encode()
        return b""

    def _export_stream(
        self, engine: Engine, part: Partition, type_name: str | None, structure: str
    ) -> list[ExportedFile]:
        return self._write_pieces(engine, part, type_name, structure, self.format_name, self.compression)

    def _write_pieces(
        self,
        engine: Engine,
        part: Partition,
        type_name: str | None,
        structure: str,
        format_name: str,
        compression: str,
        publish: bool = True,
    ) -> list[ExportedFile]:
        """Stream one partition from the engine into files, cut at block boundaries.

        Files are written under temporary names in the work directory; with
        `publish` they then go in place under their names, else the caller gets
        the temporary paths (in `path`)."""
        # Blocks go out without a header; each file gets its own header line.
        stream_format = {"CSVWithNames": "CSV", "TSVWithNames": "TSV"}.get(format_name, format_name)
        header = self._header([c["name"] for c in self.manifest["columns"]]) if stream_format != format_name else b""
        select = self._select(part, type_name, structure)
        cap = self.opts.max_file_bytes
        files: list[ExportedFile] = []
        writer: PieceWriter | None = None
        rows_counted = True
        try:
            # NaN and infinities as JSON strings ("nan", "inf"), which the readers take back: as
            # bare JSON they would be null, and a reload NULL or 0.
            denormals = {"output_format_json_quote_denormals": 1} if stream_format == "JSONEachRow" else None
            for chunk in engine.stream(select, stream_format, denormals, context=f"exporting partition {part.pid}"):
                if not chunk:
                    continue
                if writer is not None and cap is not None and writer.size >= cap:
                    files.append(writer.finish())
                    writer = None
                if writer is None:
                    writer = PieceWriter(self.work, part.pid, compression, header)
                rows = rows_in_block(chunk, stream_format)
                if rows is None:
                    rows_counted = False
                writer.write(chunk, rows or 0)
            if writer is not None:
                files.append(writer.finish())
                writer = None
            if not rows_counted or sum(f.rows for f in files) != part.rows:
                # Quoted newlines (CSV) or a source that changed: count each file with the engine.
                for f in files:
                    found = engine.rows(
                        f"SELECT count() AS n FROM file({quote_str(f.path)}, {quote_str(format_name)}, "
                        f"{quote_str(structure)}, {quote_str(compression)})",
                        context=f"counting rows of a file of partition {part.pid}",
                    )
                    f.rows = int(found[0]["n"])
        except BaseException:
            if writer is not None:
                writer.abort()
            for f in files:  # a partition is written whole or not at all
                unlink_quietly(f.path)
            raise
        if not publish:
            return files
        return self._publish(part, [(f.path, f.rows) for f in files])
