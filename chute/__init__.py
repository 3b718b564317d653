"""chute: fast, exactly-once bulk loads into ClickHouse.

>>> import chute
>>> report = chute.load(["data/*.json.gz"], table="events")
>>> report.rows_loaded
"""

from chute.errors import (
    ChuteError,
    LoadFailed,
    SchemaError,
    SourceError,
    TargetError,
    TransientTargetError,
    UsageError,
)
from chute.export import ExportOptions, ExportReport, export
from chute.inspect import query, status
from chute.load import LoadOptions, load
from chute.report import FileResult, LoadReport
from chute.timing import TimingReport, time_queries

__version__ = "0.1.0"

__all__ = [
    "ChuteError",
    "ExportOptions",
    "ExportReport",
    "FileResult",
    "LoadFailed",
    "LoadOptions",
    "LoadReport",
    "SchemaError",
    "SourceError",
    "TargetError",
    "TimingReport",
    "TransientTargetError",
    "UsageError",
    "__version__",
    "export",
    "load",
    "query",
    "status",
    "time_queries",
]
