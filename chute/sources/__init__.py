"""Sources: what units of work exist, and the table expression that reads one.

`open_source` picks the source for a scheme; what all sources share is in
`chute.sources.base`.
"""

from __future__ import annotations

import urllib.parse

from chute.errors import UsageError
from chute.sources.base import Source, SourceOptions, table_function

# Kept while the loader still imports them from here.
from chute.units import Unit

__all__ = ["DATABASE_SCHEMES", "Source", "SourceOptions", "Unit", "open_source", "source_scheme", "table_function"]


DATABASE_SCHEMES = ("postgresql", "postgres", "mysql")


def source_scheme(patterns: list[str]) -> str:
    """The one kind of source of `patterns`: file, s3, hdfs, http (and https), postgresql, ..."""

    def kind(pattern: str) -> str:
        scheme = pattern.split("://", 1)[0].lower() if "://" in pattern else "file"
        return "http" if scheme == "https" else scheme

    schemes = {kind(p) for p in patterns}
    if len(schemes) > 1:
        raise UsageError(f"one kind of source per load, got {', '.join(sorted(schemes))}")
    return schemes.pop() if schemes else "file"


def refuse_bare_password(patterns: list[str], scheme: str) -> None:
    """UsageError, echoing nothing, for a URL whose password holds a bare `/`, `?` or `#`: the
    URL's host part ends there, so the rest of the password reads as its path (shown in errors
    as a database, table or topic name) and the user name as a host. Seen as an `@` after the
    host part; in an HTTP(S) URL only in the path's first segment (`/users/@me.json` is a path)."""
    if scheme == "file":
        return
    for pattern in patterns:
        try:
            urllib.parse.urlsplit(pattern)
        except ValueError as exc:  # ("Invalid IPv6 URL": a bracket not closed; the URL may hold a password)
            raise UsageError(f"the {scheme} source URL is not valid ({exc})") from None
        if scheme not in (*DATABASE_SCHEMES, "kafka", "http"):
            continue
        rest = pattern.split("://", 1)[-1]
        cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
        authority, after = rest[:cut], rest[cut:]
        if "@" in authority or "@" not in after:
            continue
        first = after[1:].split("/", 1)[0] if after.startswith("/") else after
        if scheme == "http" and "@" not in first[1:]:
            continue
        elsewhere = "" if scheme == "http" else ", or given by --password-file or the environment"
        raise UsageError(
            f"the {scheme} source URL has an '@' after its host part: a password holding '/', '?' or '#' must "
            f"be percent-encoded (%2F, %3F, %23; an '@' in a path: %40){elsewhere}"
        )


def open_source(patterns: list[str], options: SourceOptions) -> Source:
    """The source for `patterns`, chosen by their scheme; one scheme per load (http and https are one)."""
    scheme = source_scheme(patterns)
    refuse_bare_password(patterns, scheme)
    if scheme == "file":
        from chute.sources.files import FileSource

        return FileSource(
            patterns,
            options.format,
            options.compression,
            exclude=list(options.exclude),
            split_bytes=options.split_bytes,
            known=frozenset(key for key, _ in options.loaded),
            recorded=dict(options.loaded_identities),
        )
    if scheme == "s3":
        from chute.sources.s3 import S3Source

        return S3Source(patterns, options.format, options.compression, endpoint=options.s3_endpoint)
    if scheme == "hdfs":
        from chute.sources.hdfs import HdfsSource

        return HdfsSource(patterns, options.format, options.compression)
    if scheme == "http":
        from chute.sources.url import UrlSource

        return UrlSource(patterns, options.format, options.compression)
    if scheme in DATABASE_SCHEMES:
        from chute.sources.database import DatabaseSource

        return DatabaseSource(patterns, options)
    if scheme == "kafka":
        from chute.sources.kafka import KafkaSource

        return KafkaSource(patterns, options)
    raise UsageError(
        f"unknown source scheme {scheme!r}: give files, directories, globs, s3://, hdfs:// or http(s):// URLs"
    )
