"""Kafka endpoint throughput with confluent-kafka (librdkafka) as the client.

    python benchmarks/kafka_bench.py [--messages 200000] [--value-bytes 200] [--partitions 4]

Starts ``changefeed serve --kafka 127.0.0.1:0`` in its own process on a fresh database, then
measures (1) consuming a pre-filled topic from the beginning with a consumer group and (2)
producing with an idempotent producer (acks=all). Prints messages/s and the ratio to the targets
(consume 200,000/s, produce 100,000/s for 200-byte values).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from confluent_kafka import Consumer, Producer

import changefeed
from changefeed.topics import TopicStore

CONSUME_TARGET = 200_000
PRODUCE_TARGET = 100_000


def start_server(db: Path) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ, "PYTHONPATH": str(Path(changefeed.__file__).parents[1])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "changefeed.cli.main", "serve", "--db", str(db), "--kafka", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    m = re.search(r"listening on [\d.]+:(\d+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"server did not start: {line}")
    return proc, int(m.group(1))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc): robust to a busy machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fill(db: Path, topic: str, n: int, size: int, partitions: int) -> None:
    st = TopicStore(db)
    st.ensure_topic(topic, partitions, 0)
    value = b"v" * size
    per = n // partitions
    for p in range(partitions):
        for b, start in enumerate(range(0, per, 50_000)):
            k = min(50_000, per - start)
            st.append(
                topic,
                p,
                "bench",
                b,
                pa.table(
                    {
                        "key": [b"k%d" % i for i in range(start, start + k)],
                        "value": [value] * k,
                        "ts": [time.time_ns()] * k,
                    }
                ),
            )


def consume(port: int, topic: str, n: int) -> float:
    c = Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "group.id": "bench",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got = 0
    first = c.consume(1, 30)
    got += len(first)
    t0 = time.perf_counter()
    while got < n:
        msgs = c.consume(10_000, 5)
        if not msgs:
            break
        got += len(msgs)
    dt = time.perf_counter() - t0
    c.close()
    if got < n:
        raise SystemExit(f"consumed only {got} of {n}")
    return (n - len(first)) / dt


def produce(port: int, topic: str, n: int, size: int) -> float:
    p = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"v" * size
    t0 = time.perf_counter()
    for i in range(n):
        p.produce(topic, value, b"k%d" % i)
        if i % 10_000 == 0:
            p.poll(0)
    left = p.flush(120)
    dt = time.perf_counter() - t0
    if left:
        raise SystemExit(f"{left} messages not delivered")
    return n / dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--value-bytes", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "db"
        db.mkdir()
        fill(db, "bench-in", args.messages, args.value_bytes, args.partitions)
        TopicStore(db).ensure_topic("bench-out", args.partitions, 0)
        proc, port = start_server(db)
        try:
            n = args.messages
            t0 = cpu_seconds(proc.pid)
            c = consume(port, "bench-in", n)
            t1 = cpu_seconds(proc.pid)
            print(
                f"consume: {c:,.0f} msg/s  ({c / CONSUME_TARGET:.2f} x target {CONSUME_TARGET:,}); "
                f"server CPU {(t1 - t0) / n * 1e6:.1f} us/msg"
            )
            p = produce(port, "bench-out", n, args.value_bytes)
            t2 = cpu_seconds(proc.pid)
            print(
                f"produce: {p:,.0f} msg/s  ({p / PRODUCE_TARGET:.2f} x target {PRODUCE_TARGET:,}); "
                f"server CPU {(t2 - t1) / n * 1e6:.1f} us/msg"
            )
            offsets = TopicStore(db).offsets("bench-out")
            assert sum(nxt for _, nxt in offsets.values()) == args.messages
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
