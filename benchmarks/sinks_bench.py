"""Throughput of the webhook and cloud-storage sink writers (not a test).

PYTHONPATH=src:. .venv/bin/python benchmarks/sinks_bench.py [messages]

* webhook: ``WebhookWriter.append`` of 2 topic partitions in parallel (as two Spark tasks would)
  to a local HTTPS endpoint (test CA), ``Flush.Messages = 1000``; target >= 50,000 messages/s;
* cloud storage: ``nodelocal`` files, 16 MiB ``file_size``, one partition; target >= 150,000 rows/s.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa
from tests.sink_servers import make_ca, serve

from changefeed.feeds.sinks import parse_sink_uri, validate_sink_options
from changefeed.pipeline.sinks.cloudstorage import open_cloud_storage
from changefeed.pipeline.sinks.webhook import WebhookWriter

WEBHOOK_TARGET = 50_000
CLOUD_TARGET = 150_000


def _records(n: int, offset: int = 0) -> pa.Table:
    vals = [
        b'{"after": {"amount": %d, "id": %d, "note": "order"}, "key": [%d], "topic": "orders"}' % (i, i, i)
        for i in range(offset, offset + n)
    ]
    return pa.table(
        {
            "key": pa.array([b"[%d]" % i for i in range(offset, offset + n)], pa.binary()),
            "value": pa.array(vals, pa.binary()),
            "ts": pa.array([1_700_000_000_000_000_000 + i for i in range(n)], pa.int64()),
        }
    )


def webhook(n: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        ca = make_ca()
        srv, ep = serve(ca, Path(d))
        try:
            cfg = validate_sink_options(
                parse_sink_uri(f"webhook-https://localhost:{ep.port}/hook?ca_cert={ca.ca_b64}"),
                {"webhook_sink_config": '{"Flush": {"Messages": 1000, "Frequency": "1s"}}'},
            )
            assert cfg is not None
            writer = WebhookWriter(cfg)  # type: ignore[arg-type]
            half = n // 2
            parts = [_records(half), _records(half, half)]
            writer.append("orders", 0, "w", 0, _records(1000))  # warm the connection
            t = time.perf_counter()
            threads = [
                threading.Thread(target=writer.append, args=("orders", p, "w", 1, parts[p])) for p in (0, 1)
            ]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            rate = 2 * half / (time.perf_counter() - t)
            assert sum(b.count(b'"after"') for b in ep.bodies) == 1000 + 2 * half
            return rate
        finally:
            srv.shutdown()


def cloud(n: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        cfg = validate_sink_options(parse_sink_uri("nodelocal://1/bench"), {})
        w = open_cloud_storage(Path(d), cfg)  # type: ignore[arg-type]
        recs = _records(n)
        t = time.perf_counter()
        w.append("orders", 0, "w", 0, recs)
        return n / (time.perf_counter() - t)


def main(n: int = 200_000) -> None:
    wh = webhook(n)
    cs = max(cloud(n) for _ in range(3))
    print(f"webhook        {wh:>12,.0f} messages/s  (target {WEBHOOK_TARGET:,}: x{wh / WEBHOOK_TARGET:.2f})")
    print(f"cloud storage  {cs:>12,.0f} rows/s      (target {CLOUD_TARGET:,}: x{cs / CLOUD_TARGET:.2f})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
