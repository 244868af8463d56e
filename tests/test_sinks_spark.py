"""CockroachDB jobs into the webhook and cloud-storage sinks, run on Spark (one session)."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed.testing import validators as v
from tests.crdb_standin import ensure_crdb_json
from tests.sink_servers import make_ca, serve

pytestmark = pytest.mark.spark


def _after(value: bytes | str) -> str:
    doc = json.loads(value)
    return json.dumps(doc.get("after"), sort_keys=True)


def test_jobs_into_webhook_and_cloud_storage(tmp_path: Path, spark: Any) -> None:
    from changefeed.pipeline.runner import run_until_idle

    ensure_crdb_json()
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
        conn.execute("CREATE CHANGEFEED FOR foo INTO 'topics://?topic_prefix=ref_'")
        conn.execute("CREATE CHANGEFEED FOR foo INTO 'nodelocal://1/cdc?partition_format=flat&file_size=2KB'")
        hook = f"webhook-https://localhost:{ep.port}/hook?ca_cert={ca.ca_b64}"
        conn.execute(
            f"CREATE CHANGEFEED FOR foo INTO '{hook}' WITH webhook_client_timeout = '300ms', "
            """webhook_sink_config = '{"Flush": {"Messages": 10, "Frequency": "1s"}, "Retry": {"Max": "inf", "Backoff": "5ms"}}'"""
        )
        conn.execute(
            "CREATE CHANGEFEED FOR foo INTO 'nodelocal://1/export' WITH format = csv, initial_scan_only"
        )
        for _ in range(80):
            with conn.transaction():
                k = rng.randrange(40)
                if rng.random() < 0.2:
                    conn.execute(f"DELETE FROM foo WHERE id = {k}")
                else:
                    conn.execute(f"UPSERT INTO foo VALUES ({k}, 'v,{rng.randrange(1000)}')")

        run_until_idle(db, spark=spark, gc=False)

        ref = Counter(_after(r[3]) for r in v.read_topic(db, "ref_foo") if r[2] is not None)
        assert sum(ref.values()) == 30 + 80

        # cloud storage: exactly the feed's messages, read back with Spark's JSON reader
        root = db / "extern" / "cdc"
        names = [p.name for p in root.iterdir()]
        assert names and all(n.endswith("-foo-1.ndjson") and len(n.split("-")[0]) == 33 for n in names), names
        assert not [n for n in names if n.startswith(".")]
        rows = spark.read.json(str(root), primitivesAsString=False).toJSON().collect()
        got = Counter(_after(r) if "after" in json.loads(r) else "null" for r in rows)
        assert got == ref

        # webhook: every message at least once, under failures and time-outs
        assert ep.failures > 0
        seen: Counter[str] = Counter()
        for body in ep.bodies:
            doc = json.loads(body)
            if "payload" in doc:
                assert doc["length"] == len(doc["payload"]) <= 10
                seen.update(json.dumps(m.get("after"), sort_keys=True) for m in doc["payload"])
        assert set(seen) == set(ref) and all(seen[k] >= n for k, n in ref.items())

        # CSV export of the scan: one record per row, no key, CockroachDB quoting
        (csv_file,) = [p for p in (db / "extern" / "export").rglob("*.csv")]
        lines = sorted(csv_file.read_text().splitlines(), key=lambda s: int(s.split(",")[0]))
        assert lines == [f"{k},init {k}" for k in range(30)]
    finally:
        srv.shutdown()
