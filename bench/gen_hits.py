"""Deterministic wide ClickBench-`hits`-like CSV (SEEDS.md section 2).

100 columns named after ClickBench's `hits` (ints, strings, a date and three
datetimes). EventTime is a hash of the row number, so consecutive rows land
anywhere in a 400-day window: the file is as unsorted as the seed's, and a
time-partitioned table receives every month in every block. The embedded
engine writes the rows and every value is a pure function of the row number.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import generator_main, write_files

SPAN_DAYS = 400

# (name, kind); see `_expression` for what each kind writes.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("WatchID", "i64"),
    ("JavaEnable", "flag"),
    ("Title", "title"),
    ("GoodEvent", "flag"),
    ("EventTime", "event_time"),
    ("EventDate", "event_date"),
    ("CounterID", "counter"),
    ("ClientIP", "i32"),
    ("RegionID", "u:10000"),
    ("UserID", "user"),
    ("CounterClass", "u:3"),
    ("OS", "u:100"),
    ("UserAgent", "u:50"),
    ("URL", "url"),
    ("Referer", "referer"),
    ("IsRefresh", "flag"),
    ("RefererCategoryID", "u:100"),
    ("RefererRegionID", "u:10000"),
    ("URLCategoryID", "u:100"),
    ("URLRegionID", "u:10000"),
    ("ResolutionWidth", "u:2561"),
    ("ResolutionHeight", "u:1441"),
    ("ResolutionDepth", "u:33"),
    ("FlashMajor", "u:20"),
    ("FlashMinor", "u:10"),
    ("FlashMinor2", "s:fm:20"),
    ("NetMajor", "u:10"),
    ("NetMinor", "u:10"),
    ("UserAgentMajor", "u:100"),
    ("UserAgentMinor", "s:ua:30"),
    ("CookieEnable", "flag"),
    ("JavascriptEnable", "flag"),
    ("IsMobile", "flag"),
    ("MobilePhone", "u:50"),
    ("MobilePhoneModel", "s:Model :200"),
    ("Params", "params"),
    ("IPNetworkID", "u:100000"),
    ("TraficSourceID", "u:10"),
    ("SearchEngineID", "u:30"),
    ("SearchPhrase", "phrase"),
    ("AdvEngineID", "u:30"),
    ("IsArtifical", "flag"),
    ("WindowClientWidth", "u:2561"),
    ("WindowClientHeight", "u:1441"),
    ("ClientTimeZone", "tz"),
    ("ClientEventTime", "client_time"),
    ("SilverlightVersion1", "u:6"),
    ("SilverlightVersion2", "u:10"),
    ("SilverlightVersion3", "u:100000"),
    ("SilverlightVersion4", "u:100"),
    ("PageCharset", "s:charset-:8"),
    ("CodeVersion", "u:1000"),
    ("IsLink", "flag"),
    ("IsDownload", "flag"),
    ("IsNotBounce", "flag"),
    ("FUniqID", "i64"),
    ("OriginalURL", "url"),
    ("HID", "i32"),
    ("IsOldCounter", "flag"),
    ("IsEvent", "flag"),
    ("IsParameter", "flag"),
    ("DontCountHits", "flag"),
    ("WithHash", "flag"),
    ("HitColor", "color"),
    ("LocalEventTime", "local_time"),
    ("Age", "u:100"),
    ("Sex", "u:3"),
    ("Income", "u:5"),
    ("Interests", "u:1000"),
    ("Robotness", "u:10"),
    ("RemoteIP", "i32"),
    ("WindowName", "i32"),
    ("OpenerName", "i32"),
    ("HistoryLength", "u:50"),
    ("BrowserLanguage", "s:lang-:40"),
    ("BrowserCountry", "s:country-:200"),
    ("SocialNetwork", "s:network-:10"),
    ("SocialAction", "s:action-:10"),
    ("HTTPError", "u:600"),
    ("SendTiming", "u:10000"),
    ("DNSTiming", "u:10000"),
    ("ConnectTiming", "u:10000"),
    ("ResponseStartTiming", "u:10000"),
    ("ResponseEndTiming", "u:10000"),
    ("FetchTiming", "u:10000"),
    ("SocialSourceNetworkID", "u:10"),
    ("SocialSourcePage", "s:page-:1000"),
    ("ParamPrice", "u:1000000"),
    ("ParamOrderID", "s:order-:100000"),
    ("ParamCurrency", "s:CUR:20"),
    ("ParamCurrencyID", "u:1000"),
    ("OpenstatServiceName", "s:service-:20"),
    ("OpenstatCampaignID", "s:campaign-:1000"),
    ("UTMSource", "s:source-:50"),
    ("UTMMedium", "s:medium-:10"),
    ("UTMCampaign", "s:campaign-:500"),
    ("HasGCLID", "flag"),
    ("RefererHash", "i64"),
    ("URLHash", "i64"),
    ("CLID", "i32"),
)


def _expression(name: str, kind: str, k: int) -> str:
    """SQL for one column; `h` hashes the row number with the column's own seed."""
    h = f"cityHash64(n, {k})"
    user = "cityHash64(n % 50021, 7)"
    simple = {
        "i64": f"reinterpretAsInt64({h})",
        "i32": f"toInt32(toInt64({h} % 4294967296) - 2147483648)",
        "flag": f"toUInt8({h} % 2)",
        "event_time": "event_time",
        "event_date": "toDate(event_time)",
        "client_time": f"event_time - toIntervalSecond({h} % 7200)",
        "local_time": f"event_time + toIntervalSecond(3600 * ({h} % 24))",
        "counter": f"toUInt32({user} % 9973)",
        "user": f"reinterpretAsInt64({user})",
        "tz": f"toInt16({h} % 25) - 12",
        "url": f"concat('https://site', toString({user} % 997), '.example/page?id=', toString({h} % 100000))",
        "referer": f"if({h} % 3 = 0, '', concat('https://ref', toString({h} % 301), '.example/'))",
        "title": f"if({h} % 5 = 0, '', concat('Page \"', toString({h} % 5000), '\", part ', toString(n % 7)))",
        "phrase": f"if({h} % 4 != 0, '', concat('query ', toString({h} % 20000), ' words'))",
        "params": f"if({h} % 8 != 0, '', concat('a=', toString({h} % 100), '&b=x'))",
        "color": f"arrayElement(['E', 'F', 'D', 'G'], 1 + {h} % 4)",
    }
    if kind in simple:
        return f"{simple[kind]} AS {name}"
    if kind.startswith("u:"):
        return f"toUInt32({h} % {int(kind[2:])}) AS {name}"
    if kind.startswith("s:"):
        _, prefix, modulus = kind.split(":")
        return f"if({h} % 3 = 0, '', concat('{prefix}', toString({h} % {int(modulus)}))) AS {name}"
    raise ValueError(f"unknown column kind {kind!r} for {name}")


def _type(kind: str) -> str:
    fixed = {
        "i64": "Int64",
        "user": "Int64",
        "i32": "Int32",
        "flag": "UInt8",
        "counter": "UInt32",
        "tz": "Int16",
        "event_date": "Date",
        "event_time": "DateTime('UTC')",
        "client_time": "DateTime('UTC')",
        "local_time": "DateTime('UTC')",
    }
    if kind in fixed:
        return fixed[kind]
    if kind.startswith("u:"):
        modulus = int(kind[2:])
        return "UInt8" if modulus <= 256 else "UInt16" if modulus <= 65536 else "UInt32"
    return "String"


def column_types() -> list[tuple[str, str]]:
    """ClickBench-like narrow types for a table made in advance (inference would say Int64 everywhere)."""
    return [(name, _type(kind)) for name, kind in COLUMNS]


def row_sql(start: int, count: int) -> str:
    exprs = ",\n    ".join(_expression(name, kind, 100 + k) for k, (name, kind) in enumerate(COLUMNS))
    return (
        f"SELECT\n    {exprs}\nFROM (SELECT n, toDateTime('2024-01-01 00:00:00', 'UTC') "
        f"+ toIntervalSecond(cityHash64(n, 1) % {SPAN_DAYS * 86400}) AS event_time "
        f"FROM (SELECT number AS n FROM numbers({start}, {count})))"
    )


def generate(out_dir: Path, rows: int, files: int = 1) -> list[Path]:
    """Write `files` CSV files (header line, no compression) holding `rows` rows in all."""
    return write_files(out_dir, "hits_{:03d}.csv", files, rows, "CSVWithNames", row_sql, "max_threads = 1", 1704067200)


def main(argv: list[str] | None = None) -> int:
    return generator_main(__doc__, generate, 500_000, 1, argv)


if __name__ == "__main__":
    raise SystemExit(main())
