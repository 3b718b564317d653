"""The third path to a server target: the server reads an http(s) URL itself (url())."""

from __future__ import annotations

import json

import chute

from ..harness.servers import server_query
from ..harness.web import WebServer

ROWS = 3000


def _files(web: WebServer) -> list[str]:
    directory = web.root / "plain"
    directory.mkdir(exist_ok=True)
    lines = [json.dumps({"id": i, "name": f"n{i}", "score": i / 4}) for i in range(1, ROWS + 1)]
    (directory / "events.jsonl").write_text("\n".join(lines) + "\n")
    csv = ["id,name,score", *[f"{i},n{i},{i / 4}" for i in range(1, ROWS + 1)]]
    (directory / "events.csv").write_text("\n".join(csv) + "\n")
    return [f"{web.base}/plain/events.jsonl", f"{web.base}/plain/events.csv"]


def test_server_reads_urls_itself(web: WebServer, server_url: str) -> None:
    jsonl, csv = _files(web)
    # auto: an 18.16 server's parser would wrap an id that does not fit, unchecked: chute reads it.
    auto = chute.load([jsonl], "a", target=server_url)
    assert auto.ok and auto.rows_loaded == ROWS and auto.bytes_sent > 0
    assert any(n.startswith("server-side not used: the server's parser would change") for n in auto.notes), auto.notes
    asked = chute.LoadOptions(method="server-side")
    report = chute.load([jsonl], "t", target=server_url, options=asked)
    assert report.ok and report.rows_loaded == ROWS
    # Nothing went through chute: the server fetched and parsed the file.
    assert report.bytes_sent == 0
    assert any("--method server-side: the server parses values itself" in n for n in report.notes), report.notes
    got = server_query(
        server_url,
        "SELECT count(), sum(id), countIf(_source_row != id), uniqExact(_source), any(_source) FROM t FORMAT TSV",
    ).split("\t")
    assert got[:4] == [str(ROWS), str(sum(range(1, ROWS + 1))), "0", "1"]
    assert got[4].strip() == jsonl

    # The same rows by the convert path: same table content.
    converted = chute.load([jsonl], "c", target=server_url, options=chute.LoadOptions(method="convert"))
    assert converted.bytes_sent > 0
    check = "SELECT count(), sum(cityHash64(id, name, score, _source, _source_row)) FROM {} FORMAT TSV"
    assert server_query(server_url, check.format("t")) == server_query(server_url, check.format("c"))

    # A CSV with a header line: 18.16's INSERT ... SELECT FROM url(..., 'CSVWithNames')
    # drops the first data row, so chute converts such files on old servers.
    more = chute.load([csv], "t", target=server_url)
    assert more.rows_loaded == ROWS and more.bytes_sent > 0
    again = chute.load([jsonl, csv], "t", target=server_url, options=asked)
    assert again.rows_loaded == 0 and again.files_skipped == 2


def test_server_side_on_request_and_its_limits(web: WebServer, server_url: str, target: str) -> None:
    jsonl, _ = _files(web)
    # gzip URLs: a 18.16 server's url() takes no compression argument, so auto converts here.
    gz = f"{web.base}/data/part-000.json.gz"
    auto = chute.load([gz], "g", target=server_url)
    assert auto.ok and auto.bytes_sent > 0
    assert any("url() takes no compression (21.1+)); converted here" in note for note in auto.notes), auto.notes
    asked = chute.load([gz], "g2", target=server_url, options=chute.LoadOptions(method="server-side"))
    assert not asked.ok
    assert "the server cannot read it itself (server 18.16" in asked.files[0].error
    assert "url() takes no compression (21.1+)" in asked.files[0].error
    # The embedded target reads files itself: server-side is a server's path.
    embedded = chute.load([jsonl], "e", target=target, options=chute.LoadOptions(method="server-side"))
    assert not embedded.ok and "needs a server target" in embedded.files[0].error
