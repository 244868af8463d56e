"""``changefeed run`` (continuous) that also writes each micro-batch's figures as JSON lines.

    python benchmarks/run_progress.py DB_DIR OUT.jsonl

For ``kafka_sink_bench.py --batches``: after every micro-batch of every query, its id, Spark's
``durationMs`` (``addBatch`` is the ``foreachBatch`` call; ``walCommit`` and ``commitOffsets`` the
offset-log and commit-log writes), the CPU seconds so far of this process (the driver's Python)
and of its process tree (the JVM and the Python workers too), and the load average.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from proctree import cpu_seconds, tree  # this directory is the script's: first on sys.path


def _watch(spark: Any, out: Any) -> None:
    seen: set[tuple[str, int]] = set()
    while True:
        for q in spark.streams.active:
            try:
                progress = q.recentProgress
            except Exception:  # the query is stopping
                continue
            for p in progress:
                key = (str(q.id), int(p["batchId"]))
                if key in seen:
                    continue
                seen.add(key)
                t = os.times()
                row = {
                    "batch": key[1],
                    "ts": p.get("timestamp"),
                    "durationMs": p.get("durationMs") or {},
                    "driver_cpu": t.user + t.system,
                    "tree_cpu": cpu_seconds(tree(os.getpid())),
                    "load": os.getloadavg()[0],
                }
                out.write(json.dumps(row) + "\n")
                out.flush()
        time.sleep(0.2)


def main() -> None:
    from changefeed.pipeline import runner
    from changefeed.pipeline.spark.session import get_spark

    db, path = sys.argv[1], sys.argv[2]
    spark = runner.warm(get_spark())
    with open(path, "w") as out:
        threading.Thread(target=_watch, args=(spark, out), daemon=True).start()
        runner.run_forever(db, spark=spark)


def summary(path: str | Path, skip: int = 2) -> str:
    """Per micro-batch medians from batch ``skip`` on (the first batches warm up)."""
    from datetime import datetime
    from statistics import median

    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r["batch"] >= skip]
    if len(rows) < 3:
        return "too few micro-batches"
    n = rows[-1]["batch"] - rows[0]["batch"]

    def at(r: dict[str, Any]) -> float:
        return datetime.fromisoformat(str(r["ts"]).replace("Z", "+00:00")).timestamp()

    def dur(r: dict[str, Any], *names: str) -> int:
        return sum(int(r["durationMs"].get(x, 0)) for x in names)

    trig = [dur(r, "triggerExecution") for r in rows]
    tree_s = rows[-1]["tree_cpu"] - rows[0]["tree_cpu"]
    return (
        f"{n} micro-batches in {at(rows[-1]) - at(rows[0]):.1f} s; per batch: trigger median {median(trig):.0f} ms "
        f"(max {max(trig)}), addBatch {median(dur(r, 'addBatch') for r in rows):.0f} ms, offset + commit log "
        f"{median(dur(r, 'walCommit', 'commitOffsets') for r in rows):.0f} ms; CPU a batch: driver "
        f"{(rows[-1]['driver_cpu'] - rows[0]['driver_cpu']) / n * 1000:.0f} ms, process tree "
        f"{tree_s / n * 1000:.0f} ms ({tree_s:.1f} s in all)"
    )


if __name__ == "__main__":
    main()
