"""`chute copy` inside one embedded database (`--as`), and the ends it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from chute.copy import CopyOptions, copy
from chute.engine import open_engine
from chute.errors import UsageError


def test_copy_within_one_database_then_nothing_then_what_changed(target: str) -> None:
    engine = open_engine(target)
    engine.execute(
        "CREATE TABLE src (id UInt64, day Date, name LowCardinality(String), v Nullable(Decimal(20, 3)), "
        "m Map(String, UInt8), t DateTime64(3)) ENGINE = MergeTree PARTITION BY toYYYYMM(day) ORDER BY id"
    )
    engine.execute(
        "INSERT INTO src SELECT number, toDate('2025-01-01') + number % 90, toString(number % 7), "
        "if(number % 3 = 0, NULL, number / 8), map('k', toUInt8(number % 9)), now64(3) FROM numbers(30000)"
    )
    report = copy("src", target, target, CopyOptions(dest_table="dst"))
    assert report.ok and report.method == "local" and len(report.copied) == 3 and report.rows_copied == 30000
    check = "SELECT count() AS n, sum(cityHash64(*)) AS h FROM {t}"
    assert engine.rows(check.format(t="dst")) == engine.rows(check.format(t="src"))
    assert not copy("src", target, target, CopyOptions(dest_table="dst")).copied
    engine.execute(
        "INSERT INTO src SELECT 100000 + number, toDate('2025-02-10'), 'x', 1, map(), now64(3) FROM numbers(5)"
    )
    again = copy("src", target, target, CopyOptions(dest_table="dst"))
    assert [u.partition for u in again.copied] == ["202502"] and len(again.skipped) == 2
    assert engine.rows(check.format(t="dst")) == engine.rows(check.format(t="src"))


def test_ends_it_refuses(target: str, tmp_path: Path) -> None:
    open_engine(target).execute("CREATE TABLE src (id UInt64) ENGINE = MergeTree ORDER BY id")
    with pytest.raises(UsageError, match="same table"):
        copy("src", target, target)
    with pytest.raises(UsageError, match="both ends are embedded directories"):
        copy("src", target, str(tmp_path / "other"))
    with pytest.raises(UsageError, match="no database at"):
        copy("src", str(tmp_path / "missing"), "http://127.0.0.1:1/db")


def test_progress_bar_counts_partitions_rows_and_bytes(target: str) -> None:
    import io

    from rich.console import Console

    from chute.progress import Progress

    engine = open_engine(target)
    engine.execute("CREATE TABLE src (id UInt64, day Date) ENGINE = MergeTree PARTITION BY toYYYYMM(day) ORDER BY id")
    engine.execute("INSERT INTO src SELECT number, toDate('2025-01-01') + number % 60 FROM numbers(6000)")
    shown: list[str] = []
    screen = Console(file=io.StringIO(), width=200)
    with Progress(True, Console(file=io.StringIO(), width=200), label="copying", unit="partitions") as bar:

        def update(done: int, total: int, rows: int, size: int) -> None:
            bar.update(done, rows, size)
            with screen.capture() as captured:
                screen.print(bar.render())
            shown.append(captured.get())

        copy("src", target, target, CopyOptions(dest_table="dst", workers=1), progress=update, on_plan=bar.start)
    assert len(shown) == 3 and "copying" in shown[0] and "/3 partitions" in shown[0]
    assert "3/3 partitions" in shown[-1] and "6,000 rows" in shown[-1]
