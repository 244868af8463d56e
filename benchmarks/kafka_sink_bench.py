"""End-to-end latency of a CockroachDB job into ``kafka://`` (not a test).

    PYTHONPATH=src .venv/bin/python benchmarks/kafka_sink_bench.py [--seconds 30] [--rate 5000]

commit -> CockroachDB job (``changefeed run``, continuous, Spark) -> ``kafka://127.0.0.1:PORT``
(the Kafka endpoint, ``changefeed serve --kafka``, over its own database directory, as a separate
cluster would be) -> a confluent-kafka consumer.

``CREATE CHANGEFEED FOR t INTO 'kafka://..' WITH updated, resolved = '1s',
min_checkpoint_frequency = '1s', no_initial_scan`` on ``t (k INT PRIMARY KEY, a STRING, b INT)``
with 4 partitions; the topic ``t`` is created with 4 partitions first. After a warm-up probe row
has arrived (Spark's start excluded), a writer commits 250 rows every 50 ms (5,000 rows/s) for
``--seconds``; a consumer stamps each data message on arrival. Latency = arrival - the message's
timestamp (the commit time, in ms). Prints p50/p99/max against the target p99 <= 1.5 s, the rows
delivered and the machine's load average. ``--batches FILE``: the job runs through
``run_progress.py``, which writes each micro-batch's Spark durations and CPU seconds to FILE, and
the benchmark prints their medians (less sensitive to the machine's load than the latencies).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import run_progress  # this directory is the script's: first on sys.path

PY = sys.executable
ROOT = Path(__file__).resolve().parents[1]
P99_TARGET_S = 1.5
PARTITIONS = 4


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    e["PYSPARK_PYTHON"] = PY
    e["PYSPARK_DRIVER_PYTHON"] = PY
    e["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + e.get("PYTHONPATH", "")
    return e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("changefeed serve --kafka exited")
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the Kafka endpoint did not listen on {port}")


def pct(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


DEFAULT_WITH = "updated, resolved = '1s', min_checkpoint_frequency = '1s', no_initial_scan"


def run(
    seconds: float,
    rate: int,
    tick: float = 0.05,
    options: str = DEFAULT_WITH,
    baseline: bool = False,
    batches: str | None = None,
) -> dict[str, Any]:
    """One measurement; ``baseline``: the same job INTO 'topics://' (the embedded topic log, read
    in-process), no Kafka at all."""
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    import changefeed

    d = Path(tempfile.mkdtemp(prefix="cf-kafka-sink-"))
    src, cluster = d / "db", d / "cluster"
    changefeed.connect(cluster).close()
    port = free_port()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        if baseline:
            return _baseline(src, seconds, rate, tick, options, procs, batches)
        serve = subprocess.Popen(
            [PY, "-m", "changefeed.cli.main", "serve", "--db", str(cluster), "--kafka", f"127.0.0.1:{port}"],
            env=env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(serve)
        wait_port(port, serve)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        admin.create_topics([NewTopic("t", PARTITIONS, 1)])["t"].result(10)
        conn, runner = _start_job(src, f"kafka://127.0.0.1:{port}", options, procs, batches)
        consumer = ck.Consumer(
            {"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "bench", "fetch.wait.max.ms": 10}
        )
        consumer.assign([ck.TopicPartition("t", p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        lat: list[float] = []

        def drain(timeout: float) -> int:
            got = 0
            for m in consumer.consume(1000, timeout):
                if m.error() is not None or m.key() is None:
                    continue
                lat.append(time.time() - m.timestamp()[1] / 1000)
                got += 1
            return got

        try:
            return _measure(conn, drain, lat, runner, seconds, rate, tick)
        finally:
            consumer.close()
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _start_job(
    src: Path, sink: str, options: str, procs: list[subprocess.Popen[bytes]], batches: str | None = None
) -> tuple[Any, subprocess.Popen[bytes]]:
    """The benchmark table, a CockroachDB job on it into ``sink``, and ``changefeed run`` (or, with
    ``batches``, ``run_progress.py`` writing each micro-batch's figures there)."""
    import changefeed

    conn = changefeed.connect(src)
    conn.execute(
        f"CREATE TABLE t (k INT PRIMARY KEY, a STRING, b INT) WITH (uniform_partitions = {PARTITIONS})"
    )
    conn.execute(f"CREATE CHANGEFEED FOR t INTO '{sink}' WITH {options}")
    cmd = [PY, "-m", "changefeed.cli.main", "run", "--db", str(src)]
    if batches:
        cmd = [PY, str(ROOT / "benchmarks" / "run_progress.py"), str(src), batches]
    runner = subprocess.Popen(
        cmd,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    procs.append(runner)
    return conn, runner


def _baseline(
    src: Path,
    seconds: float,
    rate: int,
    tick: float,
    options: str,
    procs: list[subprocess.Popen[bytes]],
    batches: str | None = None,
) -> dict[str, Any]:
    from changefeed.topics import TopicStore

    conn, runner = _start_job(src, "topics://", options, procs, batches)
    store = TopicStore(src)
    nxt = dict.fromkeys(range(PARTITIONS), 0)
    lat: list[float] = []

    def drain(timeout: float) -> int:
        got = 0
        for p in range(PARTITIONS):
            for r in store.read("t", p, nxt[p], 100_000):
                nxt[p] = r.offset + 1
                if r.key is None:
                    continue
                lat.append(time.time() - r.ts / 1e9)
                got += 1
        if not got:
            time.sleep(timeout)
        return got

    return _measure(conn, drain, lat, runner, seconds, rate, tick)


def _measure(
    conn: Any,
    drain: Callable[[float], int],
    lat: list[float],
    runner: subprocess.Popen[bytes],
    seconds: float,
    rate: int,
    tick: float,
) -> dict[str, Any]:
    """Warm up with a probe row, then commit ``rate`` rows/s for ``seconds`` while a thread drains."""
    conn.execute("UPSERT INTO t (k, a) VALUES (?, 'probe')", (10**12,))
    deadline = time.monotonic() + float(os.environ.get("CF_BENCH_WARMUP", "180"))
    while drain(0.2) == 0:
        if time.monotonic() > deadline or runner.poll() is not None:
            raise RuntimeError("the job delivered nothing within the warm-up (CF_BENCH_WARMUP s)")
    lat.clear()
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            drain(0.05)

    th = threading.Thread(target=consume, daemon=True)
    th.start()
    per_tick = int(rate * tick)
    k = 0
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < seconds:
        conn.executemany(
            "UPSERT INTO t (k, a, b) VALUES (?, ?, ?)", [(k + j, "x", j) for j in range(per_tick)]
        )
        k += per_tick
        i += 1
        pause = t0 + i * tick - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    write_s = time.monotonic() - t0
    deadline = time.monotonic() + 60
    while len(lat) < k and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    th.join()
    conn.close()
    xs = sorted(lat)
    return {
        "rows": k,
        "delivered": len(xs),
        "rate": k / write_s,
        "p50": pct(xs, 0.50),
        "p99": pct(xs, 0.99),
        "max": xs[-1] if xs else float("nan"),
        "load": os.getloadavg(),
    }


def _print(name: str, r: dict[str, Any]) -> None:
    print(
        f"  {name}: p50 {r['p50']:.3f} s, p99 {r['p99']:.3f} s, max {r['max']:.3f} s; "
        f"{r['rate']:,.0f} rows/s, {r['rows']:,} committed, {r['delivered']:,} delivered; "
        "load average " + ", ".join(f"{x:.2f}" for x in r["load"])
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--with", dest="options", default=DEFAULT_WITH, help="the job's WITH options")
    ap.add_argument("--skip-baseline", action="store_true", help="measure only the kafka:// job")
    ap.add_argument("--batches", metavar="FILE", help="write each micro-batch's durations and CPU to FILE")
    a = ap.parse_args()
    print(
        f"commit -> CockroachDB job -> sink -> reader, {a.rate:,} rows/s for {a.seconds:g} s, WITH {a.options}"
    )
    r = run(a.seconds, a.rate, options=a.options, batches=a.batches)
    _print("kafka:// -> confluent-kafka consumer", r)
    if a.batches:
        print("  " + run_progress.summary(a.batches))
    ok = r["p99"] <= P99_TARGET_S and r["delivered"] >= r["rows"]
    print(f"  target p99 <= {P99_TARGET_S} s: {'met' if ok else 'NOT met'} ({os.cpu_count()} cores)")
    if not a.skip_baseline:
        b = run(
            a.seconds, a.rate, options=a.options, baseline=True, batches=a.batches and a.batches + ".topics"
        )
        _print("baseline topics:// (embedded topic log, read in-process)", b)
        if a.batches:
            print("  " + run_progress.summary(a.batches + ".topics"))
        print(f"  p99 kafka / baseline: x{r['p99'] / b['p99']:.2f}, p50: x{r['p50'] / b['p50']:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
