"""chute: fast, exactly-once bulk loads into ClickHouse.

>>> import chute
>>> report = chute.load(["data/*.json.gz"], table="events")
>>> report.rows_loaded
"""

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from chute.errors import (
    ChuteError,
    SchemaError,
    SourceError,
    TargetError,
    TransientTargetError,
    UsageError,
)
from chute.inspect import query, status
from chute.load import ForgetReport, LoadOptions, forget, load
from chute.report import FileResult, FileState, LoadReport, UnitState

if TYPE_CHECKING:
    from chute.copy import CopyOptions, CopyReport, copy
    from chute.export import ExportOptions, ExportReport, export
    from chute.timing import TimingReport, time_queries

_LAZY = {
    "CopyOptions": "chute.copy",
    "CopyReport": "chute.copy",
    "copy": "chute.copy",
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
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


class _Package(types.ModuleType):
    """`chute.load`, `chute.export` and `chute.copy` are functions named like their packages: importing the
    package (`import chute.export`, done by the CLI too) makes Python bind it on `chute` and hide
    the function. The binding is dropped, so `chute.export` and `from chute import export` stay
    the function (the package is still in `sys.modules`)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _FUNCTIONS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


_FUNCTIONS = frozenset({"load", "export", "copy"})
sys.modules[__name__].__class__ = _Package


__version__ = "0.1.0"

__all__ = [
    "ChuteError",
    "CopyOptions",
    "CopyReport",
    "ExportOptions",
    "ExportReport",
    "FileResult",
    "FileState",
    "ForgetReport",
    "LoadOptions",
    "LoadReport",
    "SchemaError",
    "SourceError",
    "TargetError",
    "TimingReport",
    "TransientTargetError",
    "UnitState",
    "UsageError",
    "__version__",
    "copy",
    "export",
    "forget",
    "load",
    "query",
    "status",
    "time_queries",
]
