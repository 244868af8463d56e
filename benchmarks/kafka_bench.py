"""Kafka endpoint throughput with confluent-kafka (librdkafka) as the client.

    python benchmarks/kafka_bench.py [--messages 200000] [--value-bytes 200] [--partitions 4]
                                     [--runs 3] [--py-spy FILE]

Starts ``changefeed serve --kafka 127.0.0.1:0`` in its own process on a fresh database, then, per
run, measures
  (1) consume: a consumer group reads a pre-filled topic from the beginning, the first read of
      those records (SQLite range read and batch encoding);
  (2) consume again: a second group reads the same records (encoded batches served from cache);
  (3) produce: an idempotent producer (acks=all) writes the same number of records.
Prints messages/s per run and the median against the targets of issue 10 (consume 200,000/s,
produce 100,000/s for 200-byte values), with the server's and the client's CPU per message and the
machine's load average (the machine is shared: quote figures with the load they were measured at;
on 2 cores, server and client CPU per message together bound the rate).
``--py-spy FILE`` records a raw py-spy profile of the server over the whole measurement.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import signal
import statistics
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


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def fill(db: Path, topic: str, n: int, size: int, partitions: int) -> None:
    import changefeed

    changefeed.connect(db).close()  # a changefeed database: `serve` refuses a directory of topics alone
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


def consume(port: int, topic: str, group: str, n: int) -> float:
    """Messages/s from the first message to the n-th (group join excluded)."""
    c = Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got = len(c.consume(1, 30))
    start = got
    t0 = time.perf_counter()
    while got < n:
        # consume(k) waits until k messages are there or the timeout: never ask for more than left
        msgs = c.consume(min(10_000, n - got), 5)
        if not msgs:
            break
        got += len(msgs)
    dt = time.perf_counter() - t0
    c.close()
    if got < n:
        raise SystemExit(f"consumed only {got} of {n}")
    return (n - start) / dt


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


def own_cpu_seconds() -> float:
    """This process's CPU time: the client, librdkafka's threads included."""
    t = os.times()
    return t.user + t.system


def verdict(label: str, rates: list[float], target: int, cpu_us: list[float], client_us: list[float]) -> str:
    med = statistics.median(rates)
    runs = ", ".join(f"{r:,.0f}" for r in rates)
    return (
        f"{label:<16} {med:>9,.0f} msg/s  ({med / target:.2f} x target {target:,})  "
        f"runs: {runs}; server CPU {statistics.median(cpu_us):.1f} us/msg, "
        f"client CPU {statistics.median(client_us):.1f} us/msg"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--value-bytes", type=int, default=200)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--py-spy", metavar="FILE", help="record a raw py-spy profile of the server")
    args = ap.parse_args()
    n = args.messages
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "db"
        db.mkdir()
        for r in range(args.runs):
            fill(db, f"bench-in-{r}", n, args.value_bytes, args.partitions)
            TopicStore(db).ensure_topic(f"bench-out-{r}", args.partitions, 0)
        proc, port = start_server(db)
        spy = None
        if args.py_spy:
            exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
            cmd = [exe, "record", "-p", str(proc.pid), "-r", "200", "-f", "raw", "-o", args.py_spy]
            spy = subprocess.Popen([*cmd, "--threads", "--nonblocking"])
            time.sleep(1)
        print(
            f"{n:,} messages of {args.value_bytes} bytes, {args.partitions} partitions; load before: {load()}"
        )
        cold: list[float] = []
        warm: list[float] = []
        prod: list[float] = []
        cpu: dict[str, list[float]] = {"cold": [], "warm": [], "prod": []}
        client: dict[str, list[float]] = {"cold": [], "warm": [], "prod": []}
        try:
            for r in range(args.runs):
                for kind, out, fn in (
                    ("cold", cold, functools.partial(consume, port, f"bench-in-{r}", f"bench-{r}", n)),
                    ("warm", warm, functools.partial(consume, port, f"bench-in-{r}", f"again-{r}", n)),
                    ("prod", prod, functools.partial(produce, port, f"bench-out-{r}", n, args.value_bytes)),
                ):
                    c0, o0 = cpu_seconds(proc.pid), own_cpu_seconds()
                    out.append(fn())
                    cpu[kind].append((cpu_seconds(proc.pid) - c0) / n * 1e6)
                    client[kind].append((own_cpu_seconds() - o0) / n * 1e6)
                print(
                    f"run {r + 1}: consume {cold[-1]:,.0f}, again {warm[-1]:,.0f}, produce {prod[-1]:,.0f} msg/s"
                )
                offsets = TopicStore(db).offsets(f"bench-out-{r}")
                assert sum(nxt for _, nxt in offsets.values()) == n
        finally:
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait()
            proc.terminate()
            proc.wait(10)
        print(verdict("consume", cold, CONSUME_TARGET, cpu["cold"], client["cold"]))
        print(verdict("consume (again)", warm, CONSUME_TARGET, cpu["warm"], client["warm"]))
        print(verdict("produce", prod, PRODUCE_TARGET, cpu["prod"], client["prod"]))
        print(f"load after: {load()} (1, 5, 15 min; 2 cores)")


if __name__ == "__main__":
    main()
