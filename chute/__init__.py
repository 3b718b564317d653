"""chute: fast, exactly-once bulk loads into ClickHouse.

>>> import chute
>>> report = chute.load(["data/*.json.gz"], table="events")
>>> report.rows_loaded
"""

import importlib
from typing import TYPE_CHECKING, Any

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
from chute.load import LoadOptions, load
from chute.report import FileResult, LoadReport

if TYPE_CHECKING:
    from chute.export import ExportOptions, ExportReport, export
    from chute.timing import TimingReport, time_queries

_LAZY = {
    "ExportOptions": "chute.export",
    "ExportReport": "chute.export",
    "export": "chute.export",
    "TimingReport": "chute.timing",
    "time_queries": "chute.timing",
}
"""Imported when first used: `chute load` starts without them (chute.export brings S3 and HTTP)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'chute' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


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
