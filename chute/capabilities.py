"""What a ClickHouse server version can do, held in one place.

New version-dependent behaviour gets a field here rather than a loose
`if version >= ...` somewhere in the loader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Capabilities:
    version: tuple[int, ...]
    low_cardinality: bool
    """LowCardinality columns without the experimental flag (19.x)."""
    datetime64: bool
    """DateTime64 (20.1)."""
    bool_type: bool
    """Bool as its own type (21.12); before it, UInt8."""
    lightweight_delete: bool
    """DELETE FROM (23.3 generally available)."""
    mutations_sync: bool
    """The mutations_sync setting (20.1); before it, poll system.mutations."""
    dedup_token: bool
    """insert_deduplication_token (22.2)."""
    codecs: bool
    """CODEC(...) in column definitions (19.1)."""
    ip_types: bool
    """IPv4 / IPv6 (19.3)."""
    map_type: bool
    """Map(K, V) (21.1)."""
    url_compression: bool
    """url(URL, format, structure, compression) (21.1); before it, three arguments only."""
    reads_header_files: bool
    """INSERT ... SELECT FROM url(..., 'CSVWithNames') keeps the first data row (21.1;
    measured on 18.16: it drops it)."""
    s3_function: bool
    """s3(URL, key, secret, format, structure[, compression]) (20.1: keys and compression;
    19.15's experimental s3() took neither)."""
    s3_cluster: bool
    """s3Cluster(cluster, URL, ...): the nodes of a cluster read (21.5)."""
    s3_row_number: bool
    """`_row_number` (the row's number in its object) from s3()/s3Cluster() for JSON lines,
    CSV, TSV, Parquet and Avro. Not in the s3 docs' list of virtual columns; fixed in 2025
    and in 26.4 (PRs 87220, 100116), still asked for text formats in 26.2 (issue 98009); run
    and verified on 26.9 (the embedded engine), so gated there until an older release is shown."""
    hides_secrets: bool
    """Secret keys of s3() shown as [HIDDEN] in query_log, server logs and errors (22.11)."""

    @classmethod
    def for_version(cls, text: str) -> Capabilities:
        parts = tuple(int(p) for p in re.findall(r"\d+", text)[:3]) or (0,)
        v = parts + (0,) * (3 - len(parts))
        return cls(
            version=v,
            low_cardinality=v >= (19, 0, 0),
            datetime64=v >= (20, 1, 0),
            bool_type=v >= (21, 12, 0),
            lightweight_delete=v >= (23, 3, 0),
            mutations_sync=v >= (20, 1, 0),
            dedup_token=v >= (22, 2, 0),
            codecs=v >= (19, 1, 0),
            ip_types=v >= (19, 3, 0),
            map_type=v >= (21, 1, 0),
            url_compression=v >= (21, 1, 0),
            reads_header_files=v >= (21, 1, 0),
            s3_function=v >= (20, 1, 0),
            s3_cluster=v >= (21, 5, 0),
            s3_row_number=v >= (26, 9, 0),
            hides_secrets=v >= (22, 11, 0),
        )

    @property
    def version_text(self) -> str:
        return ".".join(str(p) for p in self.version)

    def adapt_type(self, type_sql: str) -> str:
        """A type the server can store, for a type the embedded engine inferred."""
        t = type_sql
        if not self.low_cardinality:
            t = _unwrap(t, "LowCardinality")
        if not self.bool_type:
            t = re.sub(r"\bBool\b", "UInt8", t)
        if not self.datetime64:
            t = re.sub(
                r"DateTime64\(\s*\d+\s*(,\s*('[^']*'))?\s*\)",
                lambda m: f"DateTime({m.group(2)})" if m.group(2) else "DateTime",
                t,
            )
        if not self.ip_types:
            t = re.sub(r"\bIPv[46]\b", "String", t)
        if not self.map_type and t.startswith("Map("):
            t = "String"
        if t.startswith(("JSON", "Object(", "Dynamic", "Variant(")):
            t = "String"
        return t


def _unwrap(type_sql: str, wrapper: str) -> str:
    """Remove every `wrapper(...)` around a type, keeping the inner type."""
    prefix = wrapper + "("
    while prefix in type_sql:
        start = type_sql.index(prefix)
        depth = 0
        for i in range(start + len(prefix) - 1, len(type_sql)):
            if type_sql[i] == "(":
                depth += 1
            elif type_sql[i] == ")":
                depth -= 1
                if depth == 0:
                    inner = type_sql[start + len(prefix) : i]
                    type_sql = type_sql[:start] + inner + type_sql[i + 1 :]
                    break
        else:
            break
    return type_sql


EMBEDDED = Capabilities.for_version("99.0.0")
"""The embedded engine is always current."""
