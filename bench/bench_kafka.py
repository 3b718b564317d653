"""P6 (issue 9): a pre-filled Kafka topic into the embedded target, end to end.

A real Apache Kafka broker (KRaft, tests/harness/extservers.py, on this machine) gets a
topic of small JSON messages (about 200 bytes, 10 fields), produced with
confluent-kafka in big lz4 batches. Then, each on its own:

  - consume alone: confluent-kafka consume() of every message, nothing kept;
  - fetch alone: chute's fetch path (consume, join each unit into one buffer), no engine;
  - parse alone: the same messages as one JSON-lines file, `chute.load` of the file;
  - end to end: `chute.load kafka://...` into a fresh table (inference, ledger, provenance);
  - own process: `chute load kafka://... --json` as a command, a process of its own, into a fresh
    directory: its wall and CPU seconds and its peak RSS (what a user sees; P6's RSS figure).

Messages/s of each say what bounds the end-to-end number (target >= 300k/s on 2 cores); the
peak RSS of each (the process's high-water mark reset before it) that the end-to-end load stays
at most 1 GiB (issue 45, P6).

    python bench/bench_kafka.py [--messages 3000000] [--partitions 3] [--repeat 3] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import chute
from bench.common import median, print_table, save_results, timed
from chute.engine import open_engine
from chute.sources import SourceOptions
from chute.sources.kafka import KafkaSource


def _message(i: int, rng: random.Random) -> bytes:
    return json.dumps(
        {
            "id": i,
            "user": f"user_{i % 50_000}",
            "event": rng.choice(("view", "click", "add_to_cart", "purchase")),
            "page": f"/products/{rng.randrange(10_000)}",
            "duration_ms": rng.randrange(60_000),
            "price": round(rng.random() * 500, 2),
            "country": rng.choice(("DE", "FR", "US", "BR", "JP", "IN")),
            "mobile": rng.random() < 0.6,
            "session": f"{rng.getrandbits(64):016x}",
            "ts": f"2024-05-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:{(i // 60) % 60:02d}",
        },
        separators=(",", ":"),
    ).encode()


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> tuple[float, float]:
    """Fill `topic`; (seconds, mean message bytes). Values repeat after 200k (produce speed)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(60)
    rng = random.Random(6)
    values = [_message(i, rng) for i in range(min(count, 200_000))]
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        }
    )
    began = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, values[i % len(values)], partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 20_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return time.perf_counter() - began, sum(map(len, values)) / len(values)


def consume_alone(bootstrap: str, topic: str, count: int) -> float:
    """confluent-kafka consume() of every message, tuned as chute's readers are; nothing kept."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 * 2**20,
            "max.partition.fetch.bytes": 16 * 2**20,
            "fetch.queue.backoff.ms": 10,
        }
    )
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    got = 0
    began = time.perf_counter()
    while got < count:
        got += len(consumer.consume(50_000, 1.0))
    seconds = time.perf_counter() - began
    consumer.close()
    return seconds


def fetch_alone(bootstrap: str, topic: str, jsonl: Path | None) -> tuple[float, int]:
    """chute's own fetch path, unit by unit, without the engine; optionally keeps the bytes."""
    source = KafkaSource([f"kafka://{bootstrap}/{topic}"], SourceOptions())
    began = time.perf_counter()
    units = source.units()
    count = 0
    out = open(jsonl, "wb") if jsonl else None  # noqa: SIM115
    try:
        for unit in units:
            fetched = source._fetched(unit.key)
            count += fetched.count
            if out is not None:
                payload = fetched.payload()
                if isinstance(payload, (bytes, memoryview)):
                    out.write(payload)
                else:
                    with open(payload.path, "rb") as fh:
                        shutil.copyfileobj(fh, out)
            with source._lock:  # as the loader would be done with it
                source._cache.entries.pop(unit.key, None)
                source._cache.memory = source._cache.disk = 0
    finally:
        if out is not None:
            out.close()
        source.close()
    return time.perf_counter() - began, count


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _reset_peak() -> None:
    """Start this process's peak RSS (VmHWM) anew, so each phase's own peak is seen (Linux
    `clear_refs` 5); elsewhere the peaks stay the process's since it started."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def _peak_bytes() -> int:
    """The peak RSS since the last `_reset_peak` (VmHWM), else since the process started."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _broker_cpu(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3_000_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bootstrap", help="an existing broker (default: start one, tests/harness/extservers.py)")
    args = parser.parse_args(argv)

    broker: Any = None
    if args.bootstrap:
        bootstrap, broker_pid = args.bootstrap, None
    else:
        from tests.harness.extservers import KafkaBroker

        if not KafkaBroker.available():
            print(f"no Kafka broker: {KafkaBroker.missing()}", file=sys.stderr)
            return 1
        began = time.perf_counter()
        broker = KafkaBroker.create().start()
        print(f"broker: Apache Kafka (KRaft) on this machine, ready in {time.perf_counter() - began:.1f} s")
        bootstrap = broker.bootstrap
        broker_pid = broker.process.pid if broker.process else None
    workdir = Path(tempfile.mkdtemp(prefix="chute-bench-kafka-"))
    try:
        topic = f"p6_{int(time.time())}"
        seconds, mean = produce(bootstrap, topic, args.messages, args.partitions)
        n = args.messages
        print(
            f"topic {topic}: {n:,} messages of {mean:.0f} bytes (10 JSON fields), {args.partitions} partitions, "
            f"lz4; produced in {seconds:.1f} s ({n / seconds:,.0f}/s); {os.cpu_count()} cores"
        )
        times: dict[str, list[float]] = {
            "consume alone": [],
            "fetch alone": [],
            "parse alone": [],
            "end to end": [],
            "own process": [],
        }
        cpu: dict[str, list[float]] = {k: [] for k in times}
        broker_cpu: dict[str, list[float]] = {k: [] for k in times}
        peaks: dict[str, list[int]] = {k: [] for k in times}
        jsonl = workdir / "messages.jsonl"
        db = workdir / "db"
        engine = open_engine(str(db))

        def fresh() -> None:
            for name in ("t", "t_rejects", "_chute_ledger"):
                engine.execute(f"DROP TABLE IF EXISTS {name} SYNC")

        def measure(name: str, fn: Any) -> None:
            _reset_peak()
            cpu0, broker0 = _cpu(), _broker_cpu(broker_pid)
            times[name].append(fn())
            cpu[name].append(_cpu() - cpu0)
            broker_cpu[name].append(_broker_cpu(broker_pid) - broker0)
            peaks[name].append(_peak_bytes())

        def end_to_end() -> float:
            fresh()
            seconds, report = timed(lambda: chute.load([f"kafka://{bootstrap}/{topic}"], "t", target=str(db)))
            assert report.ok and report.rows_loaded == n, (report.rows_loaded, report.files[:3])
            rows = engine.rows("SELECT count() AS n, uniqExact(_source, _source_row) AS u FROM t")[0]
            assert rows == {"n": n, "u": n}, rows
            return float(seconds)

        def own_process() -> float:
            """`chute load` as a command: its own process, so its peak RSS is its own."""
            target = workdir / f"own-{len(times['own process'])}"
            command = [sys.executable, "-m", "chute.cli", "load", f"kafka://{bootstrap}/{topic}"]
            command += ["--table", "t", "--target", str(target), "--json"]
            began = time.perf_counter()
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, cwd=Path(__file__).resolve().parent.parent)
            assert proc.stdout is not None
            out = proc.stdout.read()
            _, status, usage = os.wait4(proc.pid, 0)
            seconds = time.perf_counter() - began
            proc.returncode = os.waitstatus_to_exitcode(status)
            assert proc.returncode == 0 and json.loads(out)["rows_loaded"] == n, (proc.returncode, out[-500:])
            own_cpu.append(usage.ru_utime + usage.ru_stime)
            own_peak.append(usage.ru_maxrss * 1024)
            shutil.rmtree(target, ignore_errors=True)
            return seconds

        own_cpu: list[float] = []
        own_peak: list[int] = []

        def parse_alone() -> float:
            fresh()
            seconds, report = timed(lambda: chute.load([str(jsonl)], "t", target=str(db)))
            assert report.ok and report.rows_loaded == n, report.rows_loaded
            return float(seconds)

        fetch_alone(bootstrap, topic, jsonl)  # the file for "parse alone" (and a warm page cache)
        for _ in range(args.repeat):
            measure("consume alone", lambda: consume_alone(bootstrap, topic, n))
            measure("fetch alone", lambda: fetch_alone(bootstrap, topic, None)[0])
            measure("parse alone", parse_alone)
            measure("end to end", end_to_end)
            measure("own process", own_process)
        cpu["own process"] = own_cpu  # the child's, not this process's
        peaks["own process"] = own_peak
        rows = [
            [
                name,
                f"{median(t):.2f}",
                f"{n / median(t):,.0f}",
                f"{median(cpu[name]):.1f}",
                f"{median(broker_cpu[name]):.1f}" if broker_pid else "-",
                f"{max(peaks[name]) / 2**20:,.0f}",
                " ".join(f"{x:.2f}" for x in t),
            ]
            for name, t in times.items()
        ]
        print(
            f"\nmedian of {args.repeat}; CPU seconds of this process (engine included) and of the broker; "
            "peak RSS of this process during each (its high-water mark reset before; what earlier phases "
            "left resident and the engine it opened included); own process: the command's own CPU and peak"
        )
        print_table(["what", "seconds", "messages/s", "cpu s", "broker cpu s", "peak MiB", "runs"], rows)
        rate = n / median(times["end to end"])
        print(f"\nP6: {rate:,.0f} messages/s end to end (target >= 300,000), broker on the same machine")
        own_rate = n / median(times["own process"])
        print(
            f"as a command of its own: {own_rate:,.0f} messages/s, {median(own_cpu):.1f} CPU s, "
            f"peak RSS {max(own_peak) / 2**20:,.0f} MiB (target <= 1,024)"
        )
        path = save_results(
            "kafka",
            {
                "messages": n,
                "message_bytes": mean,
                "partitions": args.partitions,
                "cores": os.cpu_count(),
                "times": times,
                "cpu": cpu,
                "broker_cpu": broker_cpu,
                "end_to_end_messages_per_s": rate,
                "peak_rss_bytes": max(own_peak),
                "peak_rss_by_phase": peaks,
            },
        )
        print(f"results: {path}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if broker is not None:
            broker.remove()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
