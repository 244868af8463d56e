"""Issue 21 acceptance: a randomized run of everything that creates and removes topics at once.
Kafka clients (kafka-python against the Kafka endpoint, port 0) create topics, produce to them and
delete some; YDB changefeeds and CockroachDB jobs are created, written to, dropped and canceled;
the pipeline runs in between, ``changefeed run``'s loop (``run_forever``) started and stopped
repeatedly with the test session's Spark, and ``run_until_idle``. After every step: no topic that
was not dropped lost a record (its records are a superset of what they were), and no topic that
was not dropped is gone. A short run in ``make test``; ``make soak`` runs many more rounds."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import kafka as kp
import kafka.admin as kp_admin
import pytest

import changefeed
from changefeed.pipeline.runner import run_forever, run_until_idle
from changefeed.server import EndpointConfig
from changefeed.server.kafka import create
from changefeed.topics import TopicStore

Records = dict[tuple[int, int], bytes]


class World:
    """The database, its Kafka endpoint, and what the test expects of every topic."""

    def __init__(self, db: Path, port: int, seed: int) -> None:
        self.db = db
        self.port = port
        self.rng = random.Random(seed)
        self.seed = seed
        self.conn = changefeed.connect(str(db))
        self.admin = kp_admin.KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
        self.producer = kp.KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", acks="all")
        self.kafka_topics: dict[str, Records] = {}  # created by Kafka clients: exactly these records
        self.ydb_tables: dict[str, set[str]] = {}  # table -> its feeds
        self.crdb_tables: dict[str, list[int]] = {}  # table -> its jobs
        self.n = 0
        self.rows = 0

    def close(self) -> None:
        self.producer.close()
        self.admin.close()
        self.conn.close()

    def next(self, prefix: str) -> str:
        """A new name: numbered per world, and apart from another world's on the same database
        (the module's tests share one)."""
        self.n += 1
        return f"{prefix}{self.seed}_{self.n}"

    # ---------------------------------------------------------------- Kafka clients
    def kafka_create(self) -> None:
        name = self.next("kafka")
        parts = self.rng.randint(1, 3)
        self.admin.create_topics([kp_admin.NewTopic(name, parts, 1)])
        self.kafka_topics[name] = {}
        self.kafka_produce(name)

    def kafka_produce(self, name: str) -> None:
        parts = TopicStore(self.db).topic(name).partitions
        futures = []
        for _ in range(self.rng.randint(5, 40)):
            value = b"v%d" % self.rng.getrandbits(48)
            futures.append(
                (self.producer.send(name, value=value, partition=self.rng.randrange(parts)), value)
            )
        self.producer.flush()
        for fut, value in futures:
            meta = fut.get(timeout=30)
            self.kafka_topics[name][(meta.partition, meta.offset)] = value

    def kafka_delete(self, name: str) -> None:
        self.admin.delete_topics([name])
        del self.kafka_topics[name]

    # ---------------------------------------------------------------- YDB and CockroachDB
    def write(self, table: str, crdb: bool) -> None:
        """UPSERT (YDB's and CockroachDB's) or INSERT .. ON CONFLICT DO NOTHING a few rows."""
        rows = []
        for _ in range(self.rng.randint(1, 20)):
            self.rows += 1
            rows.append(f"({self.rng.randint(1, 50)}, 'r{self.rows}')")
        if crdb and self.rng.random() < 0.5:
            self.conn.execute(f"INSERT INTO {table} (id, v) VALUES {', '.join(rows)} ON CONFLICT DO NOTHING")
        else:
            self.conn.execute(f"UPSERT INTO {table} (id, v) VALUES {', '.join(rows)}")

    def ydb_create(self) -> None:
        table = self.next("ydb")
        self.conn.execute(f"CREATE TABLE {table} (id Uint64, v Utf8, PRIMARY KEY (id))")
        self.ydb_tables[table] = set()
        self.ydb_feed(table)
        self.write(table, crdb=False)

    def ydb_feed(self, table: str) -> None:
        feed = self.next("f")
        self.conn.execute(
            f"ALTER TABLE {table} ADD CHANGEFEED {feed} WITH (FORMAT = 'JSON', MODE = 'NEW_IMAGE',"
            f" INITIAL_SCAN = {self.rng.choice(['TRUE', 'FALSE'])})"
        )
        self.ydb_tables[table].add(feed)

    def ydb_drop_feed(self, table: str) -> None:
        feed = self.rng.choice(sorted(self.ydb_tables[table]))
        self.conn.execute(f"ALTER TABLE {table} DROP CHANGEFEED {feed}")
        self.ydb_tables[table].discard(feed)

    def crdb_create(self) -> None:
        table = self.next("crdb")
        self.conn.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v STRING)")
        self.crdb_tables[table] = []
        self.write(table, crdb=True)
        self.crdb_job(table)

    def crdb_job(self, table: str) -> None:
        res = self.conn.execute(f"CREATE CHANGEFEED FOR TABLE {table} INTO 'topics://' WITH updated")
        self.crdb_tables[table].append(int(res.rows[0][0]))

    def drop_table(self, table: str) -> None:
        self.conn.execute(f"DROP TABLE {table}")
        self.ydb_tables.pop(table, None)
        self.crdb_tables.pop(table, None)

    def step(self) -> str:
        """One random change; returns what it did."""
        choices = ["kafka_create", "ydb_create", "crdb_create", "write"]
        if self.kafka_topics:
            choices += ["kafka_produce", "kafka_delete"]
        if self.ydb_tables:
            choices += ["ydb_feed", "ydb_drop_feed", "drop_table"]
        if self.crdb_tables:
            choices += ["crdb_job", "cancel_job", "drop_table"]
        what = self.rng.choice(choices)
        if what == "kafka_create":
            self.kafka_create()
        elif what == "kafka_produce":
            self.kafka_produce(self.rng.choice(sorted(self.kafka_topics)))
        elif what == "kafka_delete":
            self.kafka_delete(self.rng.choice(sorted(self.kafka_topics)))
        elif what == "ydb_create":
            self.ydb_create()
        elif what == "crdb_create":
            self.crdb_create()
        elif what == "ydb_feed":
            self.ydb_feed(self.rng.choice(sorted(self.ydb_tables)))
        elif what == "ydb_drop_feed":
            table = self.rng.choice(sorted(self.ydb_tables))
            if self.ydb_tables[table]:
                self.ydb_drop_feed(table)
        elif what == "crdb_job":
            self.crdb_job(self.rng.choice(sorted(self.crdb_tables)))
        elif what == "cancel_job":
            jobs = [j for js in self.crdb_tables.values() for j in js]
            if jobs:
                self.conn.execute(f"CANCEL JOB {self.rng.choice(jobs)}")  # its topic stays
        elif what == "drop_table":
            self.drop_table(self.rng.choice(sorted({*self.ydb_tables, *self.crdb_tables})))
        else:
            tables = [(t, False) for t in self.ydb_tables] + [(t, True) for t in self.crdb_tables]
            if tables:
                self.write(*self.rng.choice(sorted(tables)))
        return what

    # ---------------------------------------------------------------- what must hold
    def snapshot(self) -> dict[str, Records]:
        st = TopicStore(self.db)
        out: dict[str, Records] = {}
        for info in st.topics():
            recs: Records = {}
            for p in range(info.partitions):
                for r in st.read(info.name, p, 0, 1_000_000):
                    recs[(p, r.offset)] = r.value
            out[info.name] = recs
        return out

    def expected_topics(self) -> set[str]:
        """Topics that must exist: Kafka-created ones and every live feed's (jobs' topics stay
        after CANCEL JOB, are named after their table)."""
        out = set(self.kafka_topics)
        out |= {f"{t}/{f}" for t, feeds in self.ydb_tables.items() for f in feeds}
        out |= {t for t, jobs in self.crdb_tables.items() if jobs}
        return out

    def check(self, before: dict[str, Records], label: str) -> dict[str, Records]:
        after = self.snapshot()
        missing = self.expected_topics() - set(after)
        assert not missing, f"{label}: topics gone that nobody dropped: {sorted(missing)}"
        for name, recs in self.kafka_topics.items():
            assert after[name] == recs, f"{label}: Kafka-created topic {name} changed"
        for name in self.expected_topics():
            old = before.get(name, {})
            lost = {k for k in old if after[name].get(k) != old[k]}
            assert not lost, f"{label}: topic {name} lost records {sorted(lost)[:5]}"
        return after


@pytest.fixture(scope="module")
def kafka_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    db = tmp_path_factory.mktemp("survival") / "db"
    changefeed.connect(str(db)).close()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def call(coro: Any) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, loop)
        return fut.result(30)

    endpoint = create(EndpointConfig(db=db))
    port = int(call(endpoint.start())[1])
    yield db, port
    call(endpoint.stop())
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def _run_forever_briefly(db: Path, spark: Any, world: World, seconds: float) -> None:
    """``changefeed run``'s loop, started, fed a few changes while it runs, and stopped."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            run_forever(db, spark=spark, stop=stop, install_signals=False)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    t = threading.Thread(target=target, name="run-forever")
    t.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and t.is_alive():
        world.step()
        time.sleep(0.3)
    stop.set()
    t.join(180)
    assert not t.is_alive(), "run_forever did not stop"
    assert not errors, errors


def _randomized(db: Path, port: int, spark: Any, rounds: int, seed: int) -> None:
    world = World(db, port, seed)
    try:
        before = world.snapshot()
        for r in range(rounds):
            for _ in range(world.rng.randint(2, 5)):
                label = f"seed {seed} round {r} {world.step()}"
                before = world.check(before, label)
            if r % 2 == 0:
                _run_forever_briefly(db, spark, world, seconds=world.rng.uniform(2.0, 5.0))
                before = world.check(before, f"seed {seed} round {r} after run_forever")
            run_until_idle(db, spark=spark)
            before = world.check(before, f"seed {seed} round {r} after run_until_idle")
    finally:
        world.close()


@pytest.mark.spark
def test_no_topic_loses_a_record(kafka_world: tuple[Path, int], spark: Any) -> None:
    db, port = kafka_world
    _randomized(db, port, spark, rounds=2, seed=21)


@pytest.mark.spark
@pytest.mark.soak
def test_no_topic_loses_a_record_soak(kafka_world: tuple[Path, int], spark: Any) -> None:
    db, port = kafka_world
    seed = random.SystemRandom().randrange(1 << 30)
    _randomized(db, port, spark, rounds=12, seed=seed)
