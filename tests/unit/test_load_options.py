"""LoadOptions from Python: the types a caller may give, one-line refusals for the others."""

from __future__ import annotations

import inspect

import pytest

from chute.cli import build_parser, subparsers
from chute.errors import UsageError
from chute.load import LoadOptions
from chute.load.rejects import ErrorBudget


def test_max_errors_takes_a_count_as_an_int() -> None:
    assert ErrorBudget.parse(LoadOptions(max_errors=10).max_errors) == ErrorBudget(count=10)
    assert ErrorBudget.parse(LoadOptions(max_errors="10").max_errors) == ErrorBudget(count=10)
    assert ErrorBudget.parse(LoadOptions(max_errors="0.5%").max_errors) == ErrorBudget(share=0.005)


@pytest.mark.parametrize(
    "given,words",
    [
        ({"memory_limit": 1.5}, 'memory_limit takes a size as "1GB" or bytes'),
        ({"memory_limit": "lots"}, "invalid memory_limit 'lots'"),
        ({"split_size": "64 parsecs"}, "invalid split_size '64 parsecs'"),
        ({"batch_mb": "256"}, "batch_mb takes MiB as a number"),
        ({"max_errors": 0.1}, "max_errors takes a count (10) or a share"),
        ({"max_errors": True}, "max_errors"),
        ({"workers": "4"}, "workers takes int or None"),
        ({"provenance": "no"}, "provenance takes bool"),
        ({"nodes": "http://a:8123"}, "nodes takes a tuple"),
    ],
)
def test_a_value_of_the_wrong_type_is_a_one_line_usage_error(given: dict[str, object], words: str) -> None:
    with pytest.raises(UsageError) as caught:
        LoadOptions(**given)  # type: ignore[arg-type]
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_nodes_may_be_a_list() -> None:
    assert LoadOptions(nodes=["http://a:8123"]).nodes == ("http://a:8123",)  # type: ignore[arg-type]


def test_max_errors_help_and_docstring_say_the_default_budget() -> None:
    text = " ".join(subparsers(build_parser())["load"].format_help().split())
    said = text[text.index("--max-errors MAX_ERRORS bad") :][:220]
    assert "no limit" not in said and "100 and more than 10% of its rows are bad" in said
    source = inspect.getsource(LoadOptions)
    said = source[source.index("max_errors:") :][:400]
    assert "no limit" not in said and "100" in said and "10%" in said


def test_sizes_and_names_as_the_cli_gives_them() -> None:
    """memory_limit="1GB" as --memory-limit 1GB; batch_mb and split_size as --batch-mb and
    --split-size; the earlier names still work, and read back in bytes."""
    assert LoadOptions(memory_limit="1GB").memory_limit == 2**30
    assert LoadOptions(memory_limit=2**30).memory_limit == 2**30
    assert LoadOptions(batch_mb=64).batch_bytes == 64 * 2**20
    assert LoadOptions(batch_bytes=64 * 2**20).batch_bytes == 64 * 2**20
    assert LoadOptions(split_size="1MB").split_bytes == 2**20
    assert LoadOptions(split_size=0).split_bytes == 0
    assert LoadOptions(split_bytes=2**20).split_bytes == 2**20
    with pytest.raises(UsageError, match="batch_mb or batch_bytes"):
        LoadOptions(batch_mb=64, batch_bytes=2**20)
    with pytest.raises(UsageError, match="at least 4KB"):
        LoadOptions(split_size="1KB")
    parser = subparsers(build_parser())["load"]
    flags = {o for a in parser._actions for o in a.option_strings}
    for name in ("memory_limit", "batch_mb", "batch_files", "split_size", "workers", "max_errors", "on_change"):
        assert "--" + name.replace("_", "-") in flags, name
