"""Engine and server errors as users read them: one line, code kept, no processor names."""

from __future__ import annotations

from chute.errors import TargetError, TransientTargetError, make_target_error, parse_server_error
from chute.load.recovery import FILE_IN_ERROR


def test_both_versions_error_texts_give_the_code_name_and_message() -> None:
    new = "Code: 60. DB::Exception: Table default.t does not exist. (UNKNOWN_TABLE) (version 26.9.1.1)"
    assert parse_server_error(new) == (60, "UNKNOWN_TABLE", "Table default.t does not exist.")
    old = "Code: 60, e.displayText() = DB::Exception: Table default.t doesn't exist., e.what() = DB::Exception\n"
    assert parse_server_error(old) == (60, None, "Table default.t doesn't exist.")


def test_a_damaged_gzip_file_says_so_and_keeps_the_file_it_names() -> None:
    text = (
        "inflate failed: buffer error: While reading from: /d/a.json.gz: (in file/uri /d/a.json.gz): "
        "While executing ParallelParsingBlockInputFormat: While executing File."
    )
    error = make_target_error(354, "ZLIB_INFLATE_FAILED", text, "/d/a.json.gz")
    assert type(error) is TargetError
    assert str(error) == (
        "/d/a.json.gz: [354 ZLIB_INFLATE_FAILED] the gzip data ends too soon (a file cut short?): "
        "inflate failed: buffer error: While reading from: /d/a.json.gz: (in file/uri /d/a.json.gz)"
    )
    found = FILE_IN_ERROR.search(str(error))
    assert found is not None and found.group(1) == "/d/a.json.gz"
    assert "not gzip data" in str(make_target_error(354, None, "inflate failed: data error", ""))


def test_a_transient_code_stays_transient() -> None:
    error = make_target_error(241, "MEMORY_LIMIT_EXCEEDED", "Memory limit exceeded: While executing File.", "x")
    assert isinstance(error, TransientTargetError) and str(error).endswith("Memory limit exceeded")


def test_a_message_the_engine_wrapped_again_is_said_once() -> None:
    text = (
        "Code: 73. DB::Exception: Code: 73. DB::Exception: Code: 73. DB::Exception: Unknown format Nope. "
        "Maybe you meant: ['One','Npy']. (UNKNOWN_FORMAT) (version 26.9.2.1). (UNKNOWN_FORMAT) "
        "(version 26.9.2.1). (UNKNOWN_FORMAT)"
    )
    assert parse_server_error(text) == (73, "UNKNOWN_FORMAT", "Unknown format Nope. Maybe you meant: ['One','Npy'].")
