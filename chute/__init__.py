"""chute: fast, exactly-once bulk loads into ClickHouse.

>>> import chute
>>> report = chute.load(["data/*.json.gz"], table="events")
>>> report.rows_loaded
"""

from chute.api import LoadOptions, load
from chute.errors import (
    ChuteError,
    LoadFailed,
    SchemaError,
    SourceError,
    TargetError,
    TransientTargetError,
    UsageError,
)
from chute.inspect import query, status
from chute.report import FileResult, LoadReport

__version__ = "0.1.0"

__all__ = [
    "ChuteError",
    "FileResult",
    "LoadFailed",
    "LoadOptions",
    "LoadReport",
    "SchemaError",
    "SourceError",
    "TargetError",
    "TransientTargetError",
    "UsageError",
    "__version__",
    "load",
    "query",
    "status",
]
