"""`tests.harness.servers` under the name test_concurrency and test_honest_rows import."""

from ..harness.servers import ClickHouseServer

__all__ = ["ClickHouseServer"]
