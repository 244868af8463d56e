"""Apache Kafka 4.4 (the real KRaft broker of ``make setup``) side by side with our endpoint, and
CockroachDB jobs into the real broker (issue 19). Not a test.

    PYTHONPATH=src:benchmarks .venv/bin/python benchmarks/kafka_broker_bench.py perf [--records 500000] [--record-size 200] [--rounds 4]
    PYTHONPATH=src:benchmarks .venv/bin/python benchmarks/kafka_broker_bench.py sink [--rows 1000000]
    PYTHONPATH=src:benchmarks .venv/bin/python benchmarks/kafka_broker_bench.py latency [--seconds 20] [--rate 5000]

``perf``: Kafka's own ``ProducerPerformance`` then ``ConsumerPerformance`` (the Java client, run as
``java -cp build/kafka/libs/* org.apache.kafka.tools.X``), the same record count and size, against
the real broker and then against ``changefeed serve --kafka`` (its own process and directory), one
topic of 4 partitions each, ``acks=all``; then ``--rounds`` consumes of each topic (a new group each
time), the order of the two brokers alternating round by round (an even number of rounds, so each
goes first as often as the other). Prints records/s and MB/s of each, the CPU time each broker's
process spent per consumed MB during the consume (and the consumer's, its JVM start included), and
the consumer's average fetch latency (its ``fetch-latency-avg``: a fetch sent to its response
read), and the ratios ours / Kafka (produce; consume: the medians) against the targets (consume >= 1.0,
produce >= 0.5). The CPU figures are the steadier ones on a shared machine.

``sink``: a journal of N rows (UPSERTs of distinct keys in 50,000-row transactions) under a
CockroachDB job ``INTO 'kafka://<real broker>' WITH updated, resolved = '1s',
min_checkpoint_frequency = '1s', no_initial_scan`` (4 partitions), delivered by ``changefeed run
--until-idle``; steady-state rows/s = records / (last arrival - first arrival) at a consumer of
the topic (Spark's start excluded). Run at least once, then with ``exactly_once`` (its consumer
``read_committed``). Targets: 100,000 rows/s at least once, 50,000 with exactly_once.

``latency``: commit -> the job (``changefeed run``, continuous) -> the real broker -> a
``read_committed`` consumer, ``--rate`` rows/s for ``--seconds`` with ``exactly_once`` (and without
it, for comparison): p50/p99/max against the target p99 <= 1 s.

Each part prints the machine's load average: the machine is shared, and figures move with it.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from proctree import cpu_seconds, tree

PY = sys.executable
ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 4
JOB_WITH = "updated, resolved = '1s', min_checkpoint_frequency = '1s', no_initial_scan"


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    e["PYSPARK_PYTHON"] = PY
    e["PYSPARK_DRIVER_PYTHON"] = PY
    e["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + e.get("PYTHONPATH", "")
    return e


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


class Brokers:
    """The real broker and our endpoint, started once for a run."""

    def __init__(self, real: bool = True, ours: bool = True) -> None:
        from changefeed.testing.kafka_broker import KafkaBroker, free_port

        self.dir = Path(tempfile.mkdtemp(prefix="cf-kafka-broker-bench-"))
        self.kafka = (
            KafkaBroker(self.dir / "kafka", partitions=PARTITIONS, authorizer=False, heap="1g")
            if real
            else None
        )
        self.serve: subprocess.Popen[bytes] | None = None
        self.ours_port = free_port()
        if self.kafka is not None:
            self.kafka.start()
        if ours:
            import changefeed

            changefeed.connect(self.dir / "cluster").close()
            self.serve = subprocess.Popen(
                [
                    PY,
                    "-m",
                    "changefeed.cli.main",
                    "serve",
                    "--db",
                    str(self.dir / "cluster"),
                    "--kafka",
                    f"127.0.0.1:{self.ours_port}",
                ],
                env=env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 60
            while not _accepts(self.ours_port):
                if time.monotonic() > deadline or self.serve.poll() is not None:
                    raise RuntimeError("changefeed serve --kafka did not start")
                time.sleep(0.1)

    @property
    def serve_pid(self) -> int:
        assert self.serve is not None
        return self.serve.pid

    @property
    def ours(self) -> str:
        return f"127.0.0.1:{self.ours_port}"

    def close(self) -> None:
        if self.serve is not None:
            self.serve.terminate()
            self.serve.wait(30)
        if self.kafka is not None:
            self.kafka.stop()
        shutil.rmtree(self.dir, ignore_errors=True)  # hundreds of MB of topic data per run


def _accepts(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close()
        return True
    except OSError:
        return False


def create_topic(bootstrap: str, name: str, partitions: int = PARTITIONS) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


# ----------------------------------------------------------------------------- perf
_JVM = ("-Xmx1g",)


def producer_perf(bootstrap: str, topic: str, records: int, size: int) -> dict[str, float]:
    from changefeed.testing.kafka_broker import run_java

    out = run_java(
        "org.apache.kafka.tools.ProducerPerformance",
        [
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--num-records",
            str(records),
            "--record-size",
            str(size),
            "--throughput",
            "-1",
            "--producer-props",
            "acks=all",
            "linger.ms=5",
            "batch.size=262144",
        ],
        timeout=900,
        jvm_args=_JVM,
    ).stdout
    last = [ln for ln in out.splitlines() if "records sent" in ln][-1]
    m = re.search(r"([\d.]+) records/sec \(([\d.]+) MB/sec\)", last)
    assert m, out
    return {"records_s": float(m.group(1)), "mb_s": float(m.group(2))}


def consumer_perf(bootstrap: str, topic: str, records: int) -> dict[str, float]:
    from changefeed.testing.kafka_broker import run_java

    out = run_java(
        "org.apache.kafka.tools.ConsumerPerformance",
        [
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--num-records",
            str(records),
            "--timeout",
            "60000",
            "--group",
            f"perf-{time.monotonic_ns()}",
            "--print-metrics",
        ],
        timeout=900,
        jvm_args=_JVM,
    ).stdout
    # The summary: start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    # rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    rows = [ln for ln in out.splitlines() if re.match(r"\d{4}-\d\d-\d\d", ln)]
    cols = [c.strip() for c in rows[-1].split(",")]
    # the consumer's average time from sending a fetch to having read its response
    lat = re.search(r"consumer-fetch-manager-metrics:fetch-latency-avg:\{[^}]*\}\s*:\s*([\d.]+)", out)
    return {
        "records_s": float(cols[-1]),
        "mb_s": float(cols[-2]),
        "consumed": float(cols[4]),
        "mb": float(cols[2]),
        "fetch_ms": float(lat.group(1)) if lat else float("nan"),
    }


def _children_cpu() -> float:
    """CPU seconds of this process's reaped children (the Java tools, once they have exited)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def perf(records: int, size: int, rounds: int = 4) -> int:
    print(
        f"Kafka's ProducerPerformance / ConsumerPerformance, {records:,} records of {size} B, {PARTITIONS} partitions, acks=all"
    )
    b = Brokers()
    try:
        assert b.kafka is not None
        boots = {"kafka": b.kafka.bootstrap, "changefeed": b.ours}
        produced: dict[str, float] = {}
        for name, boot in boots.items():
            create_topic(boot, f"perf-{name}")
            p = producer_perf(boot, f"perf-{name}", records, size)
            produced[name] = p["records_s"]
            print(
                f"  {name:10s} produce {p['records_s']:>11,.0f} rec/s ({p['mb_s']:.1f} MB/s)   load {load()}"
            )
        # Consumed in rounds of alternating order: whichever broker goes second pays for the
        # other's background work (the real broker flushes and indexes what it just took); with
        # an even number of rounds each goes first equally often.
        consumed: dict[str, list[float]] = {name: [] for name in boots}
        server_cpu: dict[str, list[float]] = {name: [] for name in boots}
        client_cpu: dict[str, list[float]] = {name: [] for name in boots}
        fetch_ms: dict[str, list[float]] = {name: [] for name in boots}
        assert b.kafka.proc is not None
        pids = {"kafka": b.kafka.proc.pid, "changefeed": b.serve_pid}
        for r in range(rounds):
            for name in list(boots) if r % 2 == 0 else list(reversed(boots)):
                s0 = cpu_seconds(tree(pids[name]))
                k0 = _children_cpu()
                c = consumer_perf(boots[name], f"perf-{name}", records)
                mb = max(c["mb"], 1e-9)
                server_cpu[name].append((cpu_seconds(tree(pids[name])) - s0) / mb * 1000)
                client_cpu[name].append((_children_cpu() - k0) / mb * 1000)
                consumed[name].append(c["records_s"])
                fetch_ms[name].append(c["fetch_ms"])
                print(
                    f"  {name:10s} consume {c['records_s']:>11,.0f} rec/s ({c['mb_s']:.1f} MB/s)   "
                    f"CPU ms/MB: server {server_cpu[name][-1]:.2f}, consumer {client_cpu[name][-1]:.2f}   "
                    f"fetch latency {c['fetch_ms']:.1f} ms   "
                    f"round {r + 1}   load {load()}"
                )
        med = {name: statistics.median(v) for name, v in consumed.items()}
        for name in boots:
            print(
                f"  median CPU per consumed MB, {name}: server {statistics.median(server_cpu[name]):.2f} ms, "
                f"consumer {statistics.median(client_cpu[name]):.2f} ms (its JVM start included); "
                f"median fetch latency {statistics.median(fetch_ms[name]):.1f} ms"
            )
        pr = produced["changefeed"] / produced["kafka"]
        cr = med["changefeed"] / med["kafka"]
        print(f"  median consume: kafka {med['kafka']:,.0f} rec/s, changefeed {med['changefeed']:,.0f} rec/s")
        print(
            f"  ours / Kafka: produce x{pr:.2f} (target >= 0.5), consume x{cr:.2f} (target >= 1.0, "
            f"medians of {rounds} rounds); {os.cpu_count()} cores"
        )
        return 0 if pr >= 0.5 and cr >= 1.0 else 1
    finally:
        b.close()


# ----------------------------------------------------------------------------- sink
def build(db: Path, sink: str, rows: int, options: str, chunk: int = 50_000) -> None:
    import changefeed

    with changefeed.connect(db) as conn:
        conn.execute(
            f"CREATE TABLE t (k INT PRIMARY KEY, a STRING, b INT, c FLOAT) WITH (uniform_partitions = {PARTITIONS})"
        )
        conn.execute(f"CREATE CHANGEFEED FOR t INTO '{sink}' WITH {options}")
        for lo in range(0, rows, chunk):
            conn.executemany(
                "UPSERT INTO t (k, a, b, c) VALUES (?, ?, ?, ?)",
                ((k, f"name-{k}", k * 7 % 1000, k / 4.0) for k in range(lo, min(rows, lo + chunk))),
            )


class Arrivals:
    """A consumer thread counting a topic's data messages as they arrive."""

    def __init__(self, bootstrap: str, topic: str, isolation: str) -> None:
        import confluent_kafka as ck

        self.c = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"arr-{topic}",
                "isolation.level": isolation,
                "fetch.max.bytes": 50 << 20,
                "max.partition.fetch.bytes": 10 << 20,
            }
        )
        self.c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        self.n = 0
        self.first: float | None = None
        self.last = 0.0
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self) -> None:
        while not self.stop.is_set():
            msgs = self.c.consume(10_000, 0.1)
            got = sum(1 for m in msgs if m.error() is None and m.key() is not None)
            if got:
                now = time.perf_counter()
                if self.first is None:
                    self.first = now
                self.n += got
                self.last = now

    def close(self) -> None:
        self.stop.set()
        self.t.join()
        self.c.close()


def sink_run(bootstrap: str, rows: int, exactly_once: bool) -> dict[str, Any]:
    d = Path(tempfile.mkdtemp(prefix="cf-kafka-sink-tp-"))
    prefix = f"tp{int(exactly_once)}{time.monotonic_ns() % 10**6}_"
    topic = f"{prefix}t"
    create_topic(bootstrap, topic)
    options = JOB_WITH + (", exactly_once" if exactly_once else "")
    build(d / "db", f"kafka://{bootstrap}?topic_prefix={prefix}", rows, options)
    arr = Arrivals(bootstrap, topic, "read_committed" if exactly_once else "read_uncommitted")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [PY, "-m", "changefeed.cli.main", "run", "--db", str(d / "db"), "--until-idle"],
        env=env(),
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    deadline = time.monotonic() + 60
    while arr.n < rows and time.monotonic() < deadline:
        time.sleep(0.1)
    arr.close()
    if proc.returncode != 0:
        raise RuntimeError(f"changefeed run failed:\n{proc.stderr[-3000:]}")
    span = max(arr.last - (arr.first or arr.last), 1e-9)
    return {"rows": rows, "delivered": arr.n, "wall": wall, "rate": arr.n / span, "load": load()}


def sink(rows: int) -> int:
    b = Brokers(ours=False)
    try:
        assert b.kafka is not None
        ok = True
        for eo, target in ((False, 100_000), (True, 50_000)):
            r = sink_run(b.kafka.bootstrap, rows, eo)
            met = r["rate"] >= target and r["delivered"] == rows
            ok &= met
            print(
                f"  CockroachDB job INTO kafka://<Apache Kafka 4.4>{' WITH exactly_once' if eo else ''}: "
                f"{r['rate']:,.0f} rows/s steady state ({r['delivered']:,}/{rows:,} delivered, run {r['wall']:.1f} s); "
                f"target {target:,}: {'met' if met else 'NOT met'}; load {r['load']}; {os.cpu_count()} cores"
            )
        return 0 if ok else 1
    finally:
        b.close()


# ----------------------------------------------------------------------------- latency
def latency(seconds: float, rate: int) -> int:
    import confluent_kafka as ck

    import kafka_sink_bench as ksb

    b = Brokers(ours=False)
    ok = True
    try:
        assert b.kafka is not None
        for eo in (True, False):
            d = Path(tempfile.mkdtemp(prefix="cf-kafka-lat-"))
            prefix = f"lat{int(eo)}{time.monotonic_ns() % 10**6}_"
            topic = f"{prefix}t"
            create_topic(b.kafka.bootstrap, topic)
            procs: list[subprocess.Popen[bytes]] = []
            options = ksb.DEFAULT_WITH + (", exactly_once" if eo else "")
            try:
                conn, runner = ksb._start_job(
                    d / "db", f"kafka://{b.kafka.bootstrap}?topic_prefix={prefix}", options, procs
                )
                consumer = ck.Consumer(
                    {
                        "bootstrap.servers": b.kafka.bootstrap,
                        "group.id": "lat",
                        "isolation.level": "read_committed",
                        "fetch.wait.max.ms": 10,
                    }
                )
                consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
                lat: list[float] = []

                def drain(timeout: float, consumer: Any = consumer, lat: list[float] = lat) -> int:
                    got = 0
                    for m in consumer.consume(1000, timeout):
                        if m.error() is not None or m.key() is None:
                            continue
                        lat.append(time.time() - m.timestamp()[1] / 1000)
                        got += 1
                    return got

                try:
                    r = ksb._measure(conn, drain, lat, runner, seconds, rate, 0.05)
                finally:
                    consumer.close()
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
            met = r["p99"] <= 1.0 and r["delivered"] >= r["rows"]
            if eo:
                ok &= met
            ksb._print(
                f"kafka://<Apache Kafka 4.4>{' WITH exactly_once' if eo else ''} -> read_committed consumer",
                r,
            )
            print(f"    target p99 <= 1 s: {'met' if met else 'NOT met'}; {os.cpu_count()} cores")
        return 0 if ok else 1
    finally:
        b.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="part", required=True)
    p = sub.add_parser("perf")
    p.add_argument("--records", type=int, default=500_000)
    p.add_argument("--record-size", type=int, default=200)
    p.add_argument(
        "--rounds", type=int, default=4, help="consume rounds per broker, alternating order (even: fair)"
    )
    s = sub.add_parser("sink")
    s.add_argument("--rows", type=int, default=1_000_000)
    la = sub.add_parser("latency")
    la.add_argument("--seconds", type=float, default=20.0)
    la.add_argument("--rate", type=int, default=5000)
    a = ap.parse_args()
    if a.part == "perf":
        return perf(a.records, a.record_size, a.rounds)
    if a.part == "sink":
        return sink(a.rows)
    return latency(a.seconds, a.rate)


if __name__ == "__main__":
    sys.exit(main())
