"""S3 and S3-compatible object stores: `s3://bucket/prefix/**/*.parquet`.

chute lists the objects itself (ListObjectsV2, signed with SigV4) so that every
object is a ledger unit with a key, size and ETag; the engine reads them with
its s3() table function.

Credentials come from the standard environment variables only, and the embedded
engine takes them from the same environment (its AWS credential chain): no key,
secret or token is written into the SQL it runs. Only the server-side path
(`server_expression`) hands the key and secret to a server's s3(), and only to
servers that hide them in their logs; every message chute makes, from engine or
server text too, is scrubbed of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from chute.capabilities import Capabilities
from chute.errors import SourceError, UsageError
from chute.formats import detect
from chute.manifest import MANIFEST, declared, parse_manifest
from chute.remote.s3 import ENGINE_GLOB_CHARS, S3Client, S3Object, split_url
from chute.remote.sigv4 import quote_path
from chute.schema import Column
from chute.sources.base import (
    EngineRowNumbers,
    ServerReadable,
    SourceBase,
    common_directory,
    expand_braces,
    known_extension,
    provenance_by_path,
    table_function,
)
from chute.sql import quote_str
from chute.units import Unit

GLOB_CHARS = frozenset("*?[")
COMBINE_UNSAFE = ENGINE_GLOB_CHARS | {",", "\\"}


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a key pattern: `*` and `?` stay within a '/' segment, `**` crosses them
    (`a/**/b` matches `a/b` too), `[...]` is a character class."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        c = pattern[i]
        end = pattern.find("]", i + 2) if c == "[" else -1
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif end > 0:
            body = pattern[i + 1 : end]
            negate = body.startswith(("!", "^"))
            body = body[1:] if negate else body
            # (a backslash, `[` and doubled set operators mean something inside a regex class: escaped)
            body = "".join("\\" + ch if ch in "\\[&~|" else ch for ch in body)
            out.append("[" + ("^" if negate else "") + body + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z", re.S)


class S3Source(SourceBase, EngineRowNumbers, ServerReadable):
    """Objects in S3 or an S3-compatible store, read by the engine's s3() function."""

    def __init__(
        self,
        patterns: list[str],
        format_override: str | None = None,
        compression_override: str | None = None,
        endpoint: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not patterns:
            raise UsageError("no source given")
        self.patterns = patterns
        self.format_override = format_override
        self.compression_override = compression_override
        self.s3 = S3Client(endpoint, env)
        self.credentials = self.s3.credentials
        self.endpoint = self.s3.endpoint
        """A custom endpoint (path-style URLs); None: AWS (virtual-hosted URLs)."""
        self._manifests: dict[tuple[str, str], tuple[list[Column], bool] | None] = {}

    @property
    def page_size(self) -> int:
        """Keys per ListObjectsV2 page (S3's maximum)."""
        return self.s3.page_size

    @page_size.setter
    def page_size(self, value: int) -> None:
        self.s3.page_size = value

    def scrub(self, text: str) -> str:
        """`text` without any secret (for messages that may carry server or engine text),
        also as quoted into SQL."""
        return self.s3.scrub(text)

    def object_url(self, bucket: str, key: str) -> str:
        """The http(s) URL of an object (with key '': of its bucket, for listing)."""
        return self.s3.object_url(bucket, key)

    # -- listing ------------------------------------------------------------

    def _under(self, bucket: str, prefix: str) -> list[S3Object]:
        """Everything under a prefix, as a directory walk would find it: hidden names
        ('.x', '_SUCCESS') skipped, and without --format only known extensions."""
        found = []
        for obj in self.s3.list_objects(bucket, prefix):
            rest = obj.key[len(prefix) :]
            *dirs, name = rest.split("/")
            if any(d.startswith(".") for d in dirs) or name.startswith((".", "_")):
                continue
            if self.format_override or known_extension(name):
                found.append(obj)
        return found

    def _resolve(self, pattern: str) -> list[S3Object]:
        bucket, key_pattern = split_url(pattern)
        found: list[S3Object] = []
        for alternative in expand_braces(key_pattern):
            first_glob = min((alternative.index(c) for c in GLOB_CHARS if c in alternative), default=-1)
            if alternative == "" or alternative.endswith("/"):
                found += self._under(bucket, alternative)
            elif first_glob >= 0:
                regex = glob_regex(alternative)
                found += [o for o in self.s3.list_objects(bucket, alternative[:first_glob]) if regex.match(o.key)]
            else:
                obj = self.s3.head(bucket, alternative, f"s3://{bucket}/{alternative}")
                # Not an object: a "directory" if anything is under it (this also names a missing bucket).
                found += [obj] if obj is not None else self._under(bucket, alternative + "/")
        if not found:
            if key_pattern == "" or key_pattern.endswith("/"):
                known = "" if self.format_override else " with a known extension (or pass --format)"
                raise SourceError(f"{pattern}: no object under this prefix{known}")
            if key_pattern == expand_braces(key_pattern)[0] and not set(key_pattern) & GLOB_CHARS:
                raise SourceError(f"{pattern}: no such object")
            raise SourceError(f"{pattern}: no object matches")
        return found

    def units(self) -> list[Unit]:
        objects: dict[str, S3Object] = {}
        for pattern in self.patterns:
            for obj in self._resolve(pattern):
                objects.setdefault(obj.url, obj)
        units = []
        for obj in objects.values():
            fmt = detect(obj.key, self.format_override, self.compression_override)
            units.append(Unit(key=obj.url, size=obj.size, mtime_ns=obj.mtime_ns, fmt=fmt, etag=obj.etag))
        return units

    def verify(self, unit: Unit) -> None:
        """An object whose key the engine would take for a pattern fails alone; the others load."""
        if any(c in split_url(unit.key)[1] for c in ENGINE_GLOB_CHARS):
            raise SourceError(f"{unit.key}: keys with * ? [ ] {{ }} cannot be read by the engine; rename the object")

    # -- reading ------------------------------------------------------------

    def _auth_args(self) -> list[str]:
        """NOSIGN without credentials; else nothing: the engine takes them from the environment."""
        return ["NOSIGN"] if self.credentials is None else []

    def _call(self, url: str, fmt_name: str, structure: str | None, compression: str) -> str:
        return table_function("s3", [quote_str(url), *self._auth_args()], fmt_name, structure, compression)

    def table_expression(self, unit: Unit, structure: str | None, fmt_name: str | None = None) -> str:
        bucket, key = split_url(unit.key)
        return self._call(self.object_url(bucket, key), fmt_name or unit.fmt.format, structure, unit.fmt.compression)

    def server_blocker(self, unit: Unit, capabilities: Capabilities, cluster: str | None = None) -> str | None:
        """Why a server cannot be handed this object to read itself; None when it can."""
        version = capabilities.version_text
        if not capabilities.s3_function:
            return f"server {version} has no s3() table function with keys (20.1+)"
        if cluster is not None and not capabilities.s3_cluster:
            return f"server {version} has no s3Cluster() (21.5+)"
        if self.credentials is None:
            return "no credentials: the server would sign with its own instead of reading anonymously"
        if self.credentials.session_token:
            return "temporary credentials (AWS_SESSION_TOKEN) are not handed to the server"
        if not capabilities.hides_secrets:
            return f"server {version} would keep the secret key in its query log (hidden from 22.11)"
        return None

    def server_expression(
        self, unit: Unit, structure: str, fmt_name: str, capabilities: Capabilities, cluster: str | None = None
    ) -> str | None:
        """The s3() call (s3Cluster() with a cluster) with which a server reads this object
        itself; None when `server_blocker` names a reason. The key and secret are in it:
        the server needs them, and hides them in its logs (see `hides_secrets`)."""
        if self.server_blocker(unit, capabilities, cluster) is not None:
            return None
        assert self.credentials is not None
        bucket, key = split_url(unit.key)
        args = [quote_str(cluster)] if cluster is not None else []
        args += [
            quote_str(self.object_url(bucket, key)),
            quote_str(self.credentials.access_key),
            quote_str(self.credentials.secret_key),
            quote_str(fmt_name),
            quote_str(structure),
        ]
        if unit.fmt.compression != "none":
            args.append(quote_str(unit.fmt.compression))
        return f"{'s3Cluster' if cluster is not None else 's3'}({', '.join(args)})"

    def combined_expression(
        self, units: list[Unit], structure: str, fmt_name: str | None = None
    ) -> tuple[str, dict[str, str]] | None:
        """One s3() call over `prefix/{k1,k2,...}` (the engine then reads exactly
        those keys, without a listing) for objects of one bucket and format."""
        parsed = [split_url(u.key) for u in units]
        bucket = parsed[0][0]
        keys = [key for _, key in parsed]
        if any(b != bucket for b, _ in parsed) or any(u.fmt != units[0].fmt for u in units):
            return None
        if any(c in COMBINE_UNSAFE for key in keys for c in key):
            return None
        common = common_directory(keys)
        names = ",".join(quote_path(key[len(common) :]) for key in keys)
        url = f"{self.object_url(bucket, common)}{{{names}}}"
        fmt = units[0].fmt
        # The engine's _path is 'bucket/key'.
        per_unit = provenance_by_path("concat('s3://', _path)", [f"{bucket}/{key}" for key in keys], units)
        return self._call(url, fmt_name or fmt.format, structure, fmt.compression), per_unit

    def declared_columns(self, unit: Unit) -> list[Column] | None:
        """The exact types of a `chute export` written to this prefix (its manifest object)."""
        bucket, key = split_url(unit.key)
        prefix = key.rsplit("/", 1)[0] + "/" if "/" in key else ""
        if (bucket, prefix) not in self._manifests:
            what = f"s3://{bucket}/{prefix}{MANIFEST}"
            response = self.s3.send("GET", bucket, prefix + MANIFEST, {}, what)
            found = parse_manifest(response.content, what) if response.status_code == 200 else None
            self._manifests[(bucket, prefix)] = declared(found)
        columns = self._manifests[(bucket, prefix)]
        return columns[0] if columns else None

    def unchanged(self, unit: Unit) -> bool:
        """HEAD the object: same size and ETag (or, without an ETag, the same second)."""
        bucket, key = split_url(unit.key)
        try:
            now = self.s3.head(bucket, key, unit.key)
        except SourceError:
            return False
        if now is None or now.size != unit.size:
            return False
        if unit.etag:
            return now.etag == unit.etag
        return now.mtime_ns // 10**9 == unit.mtime_ns // 10**9
