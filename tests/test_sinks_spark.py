"""CockroachDB jobs into the webhook and cloud-storage sinks, run on Spark (one session)."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed.exceptions import PipelineError
from tests.sink_servers import make_ca, serve

pytestmark = pytest.mark.spark


def _after(value: bytes | str) -> str:
    doc = json.loads(value)
    return json.dumps(doc.get("after"), sort_keys=True)


def test_jobs_into_webhook_and_cloud_storage(tmp_path: Path, spark: Any) -> None:
    from changefeed.pipeline.runner import run_until_idle

    ca = make_ca()
    srv, ep = serve(ca, tmp_path)
    ep.fail_share, ep.stall_s = 1 / 3, 0.5
    try:
        db = tmp_path / "db"
        rng = random.Random(11)
        conn = changefeed.connect(db)
        conn.execute("CREATE TABLE foo (id INT PRIMARY KEY, v STRING) WITH (uniform_partitions = 3)")
        for k in range(30):
            conn.execute(f"INSERT INTO foo VALUES ({k}, 'init {k}')")
        (files_job,) = conn.execute(
            "CREATE CHANGEFEED FOR foo INTO 'nodelocal://1/cdc?partition_format=flat&file_size=2KB'"
        ).rows[0]
        hook = f"webhook-https://localhost:{ep.port}/hook?ca_cert={ca.ca_b64}"
        (hook_job,) = conn.execute(
            f"CREATE CHANGEFEED FOR foo INTO '{hook}' WITH webhook_client_timeout = '300ms', "
            """webhook_sink_config = '{"Flush": {"Messages": 10, "Frequency": "1s"}, "Retry": {"Max": "inf", "Backoff": "5ms"}}'"""
        ).rows[0]
        conn.execute(
            "CREATE CHANGEFEED FOR foo INTO 'nodelocal://1/export' WITH format = csv, initial_scan_only"
        )
        # the feed's messages: the scan's rows, then one message per transaction (one key each)
        ref: Counter[str] = Counter(
            json.dumps({"id": k, "v": f"init {k}"}, sort_keys=True) for k in range(30)
        )
        live = set(range(30))
        for _ in range(80):
            k = rng.randrange(40)
            if k in live and rng.random() < 0.25:
                conn.execute(f"DELETE FROM foo WHERE id = {k}")
                live.discard(k)
                ref["null"] += 1
            else:
                val = f"v,{rng.randrange(1000)}"
                conn.execute(f"UPSERT INTO foo VALUES ({k}, '{val}')")
                live.add(k)
                ref[json.dumps({"id": k, "v": val}, sort_keys=True)] += 1

        # One job's queries at a time (the other paused), and a run that fails is run again: on
        # this shared machine Spark's Python workers can miss their 10 s connect-back under load;
        # the sinks take replayed batches.
        def run() -> None:
            for attempt in range(4):
                try:
                    run_until_idle(db, spark=spark, gc=False)
                    return
                except PipelineError:
                    if attempt == 3:
                        raise

        conn.execute(f"PAUSE JOB {hook_job}")
        run()
        conn.execute(f"RESUME JOB {hook_job}")
        conn.execute(f"PAUSE JOB {files_job}")
        run()

        # cloud storage: exactly the feed's messages, read back with Spark's JSON reader
        root = db / "extern" / "cdc"
        names = [p.name for p in root.iterdir()]
        assert names and all(
            re.fullmatch(r"\d{33}-[0-9a-f]{16}-1-[0-2]-[0-9a-f]{8}-foo-[0-9a-f]+\.ndjson", n) for n in names
        ), names
        assert not [n for n in names if n.startswith(".")]
        rows = spark.read.json(str(root), primitivesAsString=False).toJSON().collect()
        got = Counter(_after(r) if "after" in json.loads(r) else "null" for r in rows)
        # cloud storage forces key_in_value (not topic_in_value)
        for line in (root / names[0]).read_text().splitlines():
            doc = json.loads(line)
            assert "topic" not in doc and isinstance(doc["key"], list)
            assert line.startswith('{"after": ')
        assert got == ref

        # webhook: every message at least once, under failures and time-outs
        assert ep.failures > 0
        seen: Counter[str] = Counter()
        for body in ep.bodies:
            doc = json.loads(body)
            if "payload" in doc:
                assert doc["length"] == len(doc["payload"]) <= 10
                seen.update(json.dumps(m.get("after"), sort_keys=True) for m in doc["payload"])
                # the webhook forces key_in_value and topic_in_value
                assert all(m["topic"] == "foo" and len(m["key"]) == 1 for m in doc["payload"])
        assert set(seen) == set(ref) and all(seen[k] >= n for k, n in ref.items())

        # CSV export of the scan: one record per row, no key, CockroachDB quoting
        (csv_file,) = [p for p in (db / "extern" / "export").rglob("*.csv")]
        lines = sorted(csv_file.read_text().splitlines(), key=lambda s: int(s.split(",")[0]))
        assert lines == [f"{k},init {k}" for k in range(30)]
    finally:
        srv.shutdown()


def test_hadoop_file_systems_write_or_fail_clearly(tmp_path: Path, spark: Any) -> None:
    """Schemes other than nodelocal go through the driver's Hadoop FileSystem: the local one
    (``file://``) writes the same layout; s3 without its connector is a clear error."""
    from changefeed.engine.clock import CommitTs
    from changefeed.exceptions import SinkError
    from changefeed.feeds.sinks import CloudStorageConfig
    from changefeed.pipeline.sinks.cloudstorage import HadoopWriter

    w = HadoopWriter(
        CloudStorageConfig(scheme="file", base=f"file://{tmp_path}/out", partition_format="flat"), 1
    )
    import pyarrow as pa

    w.append(
        "foo",
        0,
        "w",
        0,
        pa.table({"key": [b"[1]"], "value": [b'{"after": {"a": 1}}'], "ts": pa.array([5], pa.int64())}),
    )
    w.emit_resolved("foo", "w", 0, b'{"resolved":"5.0000000000"}', CommitTs(5, 0))
    files = sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith("."))
    data, resolved = files  # "-" sorts before "."
    assert resolved == "197001010000000000000050000000000.RESOLVED"
    assert data.startswith("197001010000000000000050000000000-") and data.endswith(
        "-1-0-00000000-foo-1.ndjson"
    )
    assert (tmp_path / "out" / data).read_bytes() == b'{"after": {"a": 1}}\n'
    s3 = HadoopWriter(CloudStorageConfig(scheme="s3", base="s3://bucket/cdc"), 1)
    with pytest.raises(SinkError, match=r"no Hadoop file system for s3a:// on Spark's classpath"):
        s3.write_file("x.ndjson", b"{}\n")


@pytest.mark.slow
def test_kill_9_of_run_mid_webhook_batch_loses_nothing(tmp_path: Path) -> None:
    """``changefeed run`` (and its JVM) killed with SIGKILL while webhook batches are in flight:
    after a restart every message has reached the endpoint at least once."""
    import os
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).parents[1]
    runner = "import sys; sys.path.insert(0, sys.argv.pop(1)); from changefeed.cli.main import main; main()"
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": str(root / "src"),
    }
    ca = make_ca()
    srv, ep = serve(ca, tmp_path)
    ep.fail_share, ep.stall_s, ep.delay_s = 1 / 3, 0.4, 0.05
    try:
        db = tmp_path / "db"
        conn = changefeed.connect(db)
        conn.execute("CREATE TABLE foo (id INT PRIMARY KEY, v STRING) WITH (uniform_partitions = 2)")
        for k in range(20):
            conn.execute(f"INSERT INTO foo VALUES ({k}, 'init {k}')")
        hook = f"webhook-https://localhost:{ep.port}/hook?ca_cert={ca.ca_b64}"
        conn.execute(
            f"CREATE CHANGEFEED FOR foo INTO '{hook}' WITH webhook_client_timeout = '300ms', "
            """webhook_sink_config = '{"Flush": {"Messages": 5, "Frequency": "1s"}, "Retry": {"Max": "inf", "Backoff": "5ms"}}'"""
        )
        want = {json.dumps({"id": k, "v": f"init {k}"}, sort_keys=True) for k in range(20)}
        for i in range(300):
            conn.execute(f"UPSERT INTO foo VALUES ({i % 40}, 'u{i}')")
            want.add(json.dumps({"id": i % 40, "v": f"u{i}"}, sort_keys=True))
        cmd = [sys.executable, "-c", runner, str(root), "run", "--db", str(db), "--max-rows", "50"]
        with open(tmp_path / "runner.log", "wb") as log:
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
            try:
                deadline = time.monotonic() + 240
                while len(ep.bodies) < 30 and time.monotonic() < deadline and proc.poll() is None:
                    time.sleep(0.05)
                assert len(ep.bodies) >= 30, (tmp_path / "runner.log").read_text()[-3000:]
            finally:
                os.killpg(proc.pid, signal.SIGKILL)  # mid-batch: the runner and its JVM
                proc.wait()
        killed_at = len(ep.bodies)
        for _ in range(3):  # a run whose Python workers missed their connect-back is run again
            final = subprocess.run([*cmd, "--until-idle"], env=env, capture_output=True, timeout=600)
            if final.returncode == 0:
                break
        assert final.returncode == 0, final.stdout.decode()[-3000:] + final.stderr.decode()[-3000:]
        seen = {
            json.dumps(m["after"], sort_keys=True)
            for body in ep.bodies
            for m in json.loads(body).get("payload", [])
        }
        assert len(ep.bodies) > killed_at
        assert seen == want
    finally:
        srv.shutdown()
