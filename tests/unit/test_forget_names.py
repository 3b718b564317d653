"""Which ledger files `chute forget` names."""

from __future__ import annotations

from chute.load.forget import matched


def test_forget_names_a_file_whose_name_is_a_glob_by_that_name() -> None:
    """A file named `[1]{2}*.jsonl` loads; `chute forget` given that very name read it only as a
    pattern (braces expanded, brackets a class) and found nothing to forget."""
    keys = ["/d/[1]{2}*.jsonl", "/d/other.jsonl"]
    assert matched(["/d/[1]{2}*.jsonl"], keys, "t") == ["/d/[1]{2}*.jsonl"]
    assert matched(["/d/*.jsonl"], keys, "t") == keys
