"""auto's share of JSON-lines files between client-convert and checked server-parse
(chute.load.balance): by the measured costs, and by where the server computes."""

from __future__ import annotations

import pytest

from chute.load import balance
from chute.load.balance import cores_apart, parsed_units, share

COSTS = {"CONVERT_CLIENT": 5.0, "CONVERT_SERVER": 2.0, "PARSE_CLIENT": 3.0, "PARSE_SERVER": 6.0}
"""A proof cheaper than converting: a share ends 20 % sooner than converting all here."""


@pytest.fixture()
def cheap_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, cost in COSTS.items():
        monkeypatch.setattr(balance, name, cost)


def test_a_server_on_cores_of_its_own_parses_the_share_that_ends_both_sides_together(cheap_proof: None) -> None:
    got = share(True, 1, 1)
    f = got.parse
    assert f == pytest.approx(0.5)
    client = (1 - f) * COSTS["CONVERT_CLIENT"] + f * COSTS["PARSE_CLIENT"]
    server = (1 - f) * COSTS["CONVERT_SERVER"] + f * COSTS["PARSE_SERVER"]
    assert client == pytest.approx(server)
    assert client < COSTS["CONVERT_CLIENT"] and server < COSTS["PARSE_SERVER"]  # faster than either way alone
    assert "parses 50% of the bytes, checked" in got.why and "against 5.0 converting all here" in got.why


def test_a_share_that_promises_little_is_not_made() -> None:
    """The measured costs (a proof as dear as converting): a share would end 1 % sooner on paper,
    and took 1.19x client-convert's time in the measurement; auto converts all here."""
    got = share(True, 1, 1)
    assert got.parse == 0.0 and got.why.startswith("converted here: about 4.6 s/GB"), got.why


def test_a_server_sharing_the_cores_gets_the_way_with_the_least_cpu() -> None:
    got = share(False, 2, 2)
    assert got.parse == 0.0 and "client-convert costs the least CPU" in got.why


def test_a_big_server_parses_all_and_a_small_one_nothing(cheap_proof: None) -> None:
    assert share(True, 1, 16).parse == 1.0
    small = share(True, 16, 1)
    assert small.parse == 0.0 and small.why.startswith("converted here")


@pytest.mark.parametrize(
    ("host", "client", "server", "machine", "expected"),
    [
        ("127.0.0.1", 2, 2, 2, (False, 2)),  # loopback, chute on every core: shared
        ("localhost", 1, 2, 2, (True, 1)),  # chute held to one core (taskset): the server has the other
        ("db.example", 2, 8, 2, (True, 8)),  # another host: its own cores
    ],
)
def test_where_the_server_computes(
    host: str, client: int, server: int, machine: int, expected: tuple[bool, int]
) -> None:
    assert cores_apart(host, client, server, machine) == expected


def test_the_last_files_up_to_the_share_go_to_the_server() -> None:
    sizes = [(f"f{i}", 10) for i in range(10)]
    assert parsed_units(sizes, 0.5) == {"f5", "f6", "f7", "f8", "f9"}
    assert parsed_units(sizes, 0.0) == set()
    assert parsed_units(sizes, 1.0) == {f"f{i}" for i in range(10)}
    assert parsed_units([("a", 100), ("b", 1)], 0.3) == {"b"}
