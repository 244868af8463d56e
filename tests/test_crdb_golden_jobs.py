"""The CockroachDB documents' changefeed job examples (CDC queries, the enriched envelope), run
verbatim as jobs on Spark and compared with what the documents show (tests/golden/crdb/jobs/).

File format (lines starting ``--`` are comments unless they are one of these markers):

* statements before ``-- job`` set the database up (movr-like tables, the external connections
  the statement names: ``CREATE EXTERNAL CONNECTION kafka AS 'topics://'``);
* ``-- job``: the CREATE CHANGEFEED statement, verbatim;
* ``-- then``: statements run after the job is created (changes the job delivers);
* ``-- expect``: ``topic,key,value`` CSV lines of every record the job's topics hold after
  ``changefeed run --until-idle`` (topic by topic, partition by partition, in offset order),
  masked as tests/test_crdb_golden.py masks: HLC timestamps as ``<ts1>``, ``<ts2>``... (in
  order of first appearance, checked to be increasing), ``"ts_ns": N`` as ``<ns>``, the job id
  as ``<job>``, the cluster id as ``<cluster>``;
* ``-- error``: the next statement fails, printing the ``ERROR: ...`` line that follows it;
* ``-- kafka``: the statement produces to ``kafka://localhost:9092``: a Kafka endpoint serves
  there for the module (in-process, over its own database directory: the "Kafka cluster"; the
  test is skipped when the port is taken) and the records the job added to its topics there are
  the ones compared.
"""

from __future__ import annotations

import csv
import io
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed.cli.crdb_csv import field_text
from changefeed.exceptions import ChangefeedError
from changefeed.feeds import jobs as J
from changefeed.testing import validators as v
from tests.test_crdb_golden import Masker

pytestmark = pytest.mark.spark

GOLDEN = Path(__file__).parent / "golden" / "crdb" / "jobs"


@dataclass
class JobGolden:
    setup: list[str] = field(default_factory=list)
    job: str = ""
    then: list[str] = field(default_factory=list)
    expect: list[str] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    kafka: bool = False


def load(path: Path) -> JobGolden:
    g = JobGolden()
    section = "setup"
    pending: list[str] = []
    for line in path.read_text().splitlines():
        marker = line.strip()
        if marker in ("-- job", "-- then", "-- expect", "-- error"):
            if section == "job":
                g.job = " ".join(pending).strip().rstrip(";")
                pending = []
            section = marker[3:]
            continue
        if marker == "-- kafka":
            g.kafka = True
            continue
        if section == "expect":
            if line.strip():
                g.expect.append(line)
        elif section == "error" and line.startswith("ERROR: "):
            g.errors.append((" ".join(pending).strip().rstrip(";"), line))
            pending = []
        elif line.startswith("--") or not line.strip():
            continue
        elif section == "setup":
            g.setup.append(line)
        elif section == "then":
            g.then.append(line)
        else:
            pending.append(line)
    if section == "job":
        g.job = " ".join(pending).strip().rstrip(";")
    return g


def cases() -> list[Path]:
    return sorted(GOLDEN.glob("*.sql"))


def csv_line(topic: str, key: bytes | None, value: bytes) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow((topic, field_text(key), field_text(value)))
    return buf.getvalue()


def masked(lines: list[str]) -> list[str]:
    mask = Masker()
    out = [mask(x) for x in lines]
    mask.check_order()
    return out


def _run(db: Path, spark: Any) -> None:
    from tests.test_crdb_jobs_spark import _run as run

    run(db, spark)


class KafkaCluster:
    """The Kafka endpoint on 127.0.0.1:9092 (``kafka://localhost:9092``), started on first use."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db: Path | None = None
        self._stop: Any = None

    def start(self) -> Path:
        if self.db is not None:
            return self.db
        from changefeed.server import EndpointConfig
        from changefeed.server.kafka import create
        from tests.test_kafka import LoopThread

        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", 9092)) == 0:
                pytest.skip("127.0.0.1:9092 is in use: cannot serve the document's Kafka endpoint there")
        db = self.root / "kafka-cluster"
        changefeed.connect(db).close()
        lt = LoopThread()
        ep = create(EndpointConfig(db=db, port=9092))
        lt.start(ep)

        def stop() -> None:
            lt.call(ep.stop())
            lt.close()

        self._stop, self.db = stop, db
        return db

    def close(self) -> None:
        if self._stop is not None:
            self._stop()


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka"))
    yield cluster
    cluster.close()


def _records(db: Path, topic: str) -> list[tuple[int, int, bytes | None, bytes, int]]:
    from changefeed.topics.store import TopicStore

    return v.read_topic(db, topic) if any(t.name == topic for t in TopicStore(db).topics()) else []


def collect(g: JobGolden, db: Path, spark: Any, kafka_cluster: KafkaCluster) -> list[str]:
    """Set up, check the refusals, create the job, run the changes, deliver; the records, masked."""
    where = kafka_cluster.start() if g.kafka else db
    conn = changefeed.connect(db)
    try:
        for _ in conn.execute_script("\n".join(g.setup)):
            pass
        for stmt, error in g.errors:
            with pytest.raises(ChangefeedError) as e:
                conn.execute(stmt)
            assert f"ERROR: {e.value}" == error
        if not g.job:
            return []
        (job_id,) = conn.execute(g.job).rows[0]
        for _ in conn.execute_script("\n".join(g.then)):
            pass
        job = J.load_job(conn.db.conn, job_id)
        before = {t: {(p, o) for p, o, *_ in _records(where, t)} for t in job.topics}
        _run(db, spark)
        lines = ["topic,key,value"]
        for topic in job.topics:
            new = [r for r in _records(where, topic) if (r[0], r[1]) not in before[topic]]
            lines += [csv_line(topic, k, val) for _p, _o, k, val, _ts in new]
        return masked(lines)
    finally:
        conn.close()


@pytest.mark.parametrize("path", cases(), ids=lambda p: p.stem)
def test_golden_job(tmp_path: Path, path: Path, spark: Any, kafka_cluster: KafkaCluster) -> None:
    g = load(path)
    got = collect(g, tmp_path / "db", spark, kafka_cluster)
    assert got == (g.expect if g.job else [])
