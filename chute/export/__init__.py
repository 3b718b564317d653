"""`chute export`: a table or query to files, one per partition, in parallel.

The work is in `chute.export.exporter`; options, formats and the report in
`chute.export.model`; compressed output files in `chute.export.pieces`; where
files go (a directory, an S3 prefix) in `chute.export.dest`; the manifest
format in `chute.manifest`.
"""

from __future__ import annotations

from chute.export.dest import TMP_SUFFIX
from chute.export.exporter import export
from chute.export.model import ExportedFile, ExportOptions, ExportReport, partition_id
from chute.manifest import MANIFEST

__all__ = [
    "MANIFEST",
    "TMP_SUFFIX",
    "ExportOptions",
    "ExportReport",
    "ExportedFile",
    "export",
    "partition_id",
]
