"""Fault injection: kill -9 the delivery process at random points during a concurrent random
workload, restart it each time, finish with a run to idle, then run every feed validator.

The Spark variant runs ``changefeed run --db DIR`` (kills spread 2-15 s after start: Spark takes
~7 s to start, so some land during startup, some mid-read/encode/commit of a micro-batch). The
baseline variant runs the single-process loop (``python -m changefeed.pipeline.baseline``) with
small chunks, killed 1-4 s after start, so kills land mid-chunk.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from changefeed.testing import validators as v
from changefeed.testing import workload as w

from . import _stub_encoder

STUB = _stub_encoder.install()
TESTS = Path(__file__).parent
PY = sys.executable
KILLS = int(os.environ.get("CHANGEFEED_FAULT_KILLS", "10"))


def _spark_ready() -> str | None:
    if STUB:
        return "the real encoders (changefeed.formats.ydb_json) are not in the tree yet; Spark needs encode_spark"
    if not (Path(__file__).parents[1] / "src/changefeed/cli/run_cmd.py").exists():
        return "changefeed run (cli/run_cmd.py) does not exist yet"
    return None


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = PY
    env["PYSPARK_DRIVER_PYTHON"] = PY
    return env


def _baseline_cmd(db: Path, *, follow: bool) -> list[str]:
    code = (
        f"import sys; sys.path.insert(0, {str(TESTS.parent)!r}); "
        "from tests import _stub_encoder; _stub_encoder.install(); "
        "from changefeed.pipeline.baseline import main; "
        f"raise SystemExit(main(['--db', {str(db)!r}, '--feed', 'f', '--batch-rows', '40'{', ' + repr('--follow') if follow else ''}]))"
    )
    return [PY, "-c", code]


def _spark_cmd(db: Path, *, follow: bool) -> list[str]:
    cli = Path(PY).parent / "changefeed"
    return [str(cli), "run", "--db", str(db)] + ([] if follow else ["--until-idle"])


def _total(db: Path) -> int:
    from changefeed.topics import TopicStore

    store = TopicStore(db)
    try:
        return sum(n for _, n in store.offsets("t/f").values())
    finally:
        store.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    "runner",
    [
        pytest.param("baseline", id="baseline"),
        pytest.param(
            "spark",
            id="spark",
            marks=[
                pytest.mark.spark,
                pytest.mark.skipif(_spark_ready() is not None, reason=str(_spark_ready())),
            ],
        ),
    ],
)
def test_kill_9_during_workload_is_exactly_once(tmp_path: Path, runner: str) -> None:
    db = tmp_path / "db"
    w.setup_sql(
        db,
        feed_options='TOPIC_MIN_ACTIVE_PARTITIONS = 4, RESOLVED_TIMESTAMPS = Interval("PT1S")',
        initial_rows=20,
    )
    rng = random.Random(2024)
    spark = runner == "spark"
    cmd = _spark_cmd if spark else _baseline_cmd
    lo, hi = (2.0, 15.0) if spark else (1.0, 4.0)  # baseline start-up (imports) is ~0.5-1 s
    delays = [lo + (hi - lo) * (i + rng.random()) / KILLS for i in range(KILLS)]
    rng.shuffle(delays)
    budget = sum(delays) + 5
    bg = w.Background(db, seeds=[101, 102], txns=None, duration=budget, sleep=0.01, keys=60)
    seen: list[int] = []
    log = open(tmp_path / "runner.log", "wb")  # noqa: SIM115
    try:
        for delay in delays:
            proc = subprocess.Popen(
                cmd(db, follow=True), stdout=log, stderr=subprocess.STDOUT, env=_env(), start_new_session=True
            )
            time.sleep(delay)
            os.killpg(proc.pid, signal.SIGKILL)  # the runner and its children (the JVM): kill -9
            proc.wait()
            seen.append(_total(db))
            # a topic checked while the writers run never holds a duplicate or a phantom
        stats = bg.join(timeout=budget + 120)
    finally:
        log.close()
    assert sum(s.committed for s in stats) > 200
    final = subprocess.run(cmd(db, follow=False), env=_env(), capture_output=True, timeout=300)
    assert final.returncode == 0, final.stdout.decode()[-3000:] + final.stderr.decode()[-3000:]
    rep = v.validate_feed(db, "f")
    assert rep.ok, str(rep)
    assert rep.stats["data_records"] >= rep.stats["change_rows"] > 0
    # last: the kills must have hit a runner that was delivering, or the test proves little
    assert seen[-1] > seen[0], f"the topic did not grow between kills: {seen}"
