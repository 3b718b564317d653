"""HDFS source URLs."""

from __future__ import annotations

import pytest

from chute.errors import UsageError
from chute.sources.hdfs import HdfsSource


def test_urls_need_a_namenode_and_port() -> None:
    for url in ("hdfs:///data/x.parquet", "hdfs://namenode/data/x.parquet"):
        with pytest.raises(UsageError, match="give hdfs://namenode:port/path"):
            HdfsSource([url])
