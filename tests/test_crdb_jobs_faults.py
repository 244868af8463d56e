"""A CockroachDB changefeed job under ``changefeed run`` (continuous, a separate process) while a
random workload commits: PAUSE JOB stops delivery within seconds, RESUME continues, and
``kill -9`` of the runner (and its JVM) mid-delivery ends, after a restart, with every change in
the topic exactly once (validated with the cdctest-style validators)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import changefeed
from changefeed.testing import validators as v, workload as w

PY = sys.executable
ROOT = Path(__file__).parents[1]
TOPIC = "t"

pytestmark = pytest.mark.spark


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = PY
    env["PYSPARK_DRIVER_PYTHON"] = PY
    env["CHANGEFEED_GC_MIN_AGE_S"] = str(10**9)
    env["PYTHONPATH"] = str(ROOT / "src")
    return env


def _cmd(db: Path, *, follow: bool) -> list[str]:
    return [PY, "-m", "changefeed.cli.main", "run", "--db", str(db), "--max-rows", "500"] + (
        [] if follow else ["--until-idle"]
    )


def _total(db: Path) -> int:
    from changefeed.topics import TopicStore

    store = TopicStore(db)
    try:
        return sum(n for _, n in store.offsets(TOPIC).values())
    finally:
        store.close()


def _status(conn: changefeed.Connection, job_id: int) -> str:
    return str(conn.execute(f"SHOW CHANGEFEED JOB {job_id}").rows[0][3])


def _wait_growth(db: Path, before: int, proc: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _total(db) == before and proc.poll() is None:
        time.sleep(0.1)
    return _total(db) > before


@pytest.mark.parametrize(
    "kills",
    [
        pytest.param(1, id="one-kill"),
        pytest.param(10, id="soak-10-kills", marks=[pytest.mark.slow, pytest.mark.soak]),
    ],
)
def test_pause_resume_and_kill_9_are_exactly_once(tmp_path: Path, kills: int) -> None:
    db = tmp_path / "db"
    w.setup_sql(db, feed=None, initial_rows=20)
    with changefeed.connect(db) as conn:
        (job_id,) = conn.execute(
            "CREATE CHANGEFEED FOR t INTO 'topics://' "
            "WITH updated, diff, resolved = '1s', min_checkpoint_frequency = '1s'"
        ).rows[0]
    rng = random.Random(99)
    bg = w.Background(db, seeds=[11], txns=None, duration=25.0 + kills * 15.0, sleep=0.01, keys=50)
    log = open(tmp_path / "runner.log", "wb")  # noqa: SIM115
    try:
        for round_ in range(kills):
            proc = subprocess.Popen(
                _cmd(db, follow=True),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_env(),
                start_new_session=True,
            )
            try:
                assert _wait_growth(db, _total(db), proc, 240.0), (tmp_path / "runner.log").read_text()[
                    -3000:
                ]
                if round_ == 0:
                    with changefeed.connect(db) as conn:
                        conn.execute(f"PAUSE JOB {job_id}")
                        # A live runner stops between micro-batches, then confirms (CockroachDB's
                        # pause-requested -> paused); one between micro-batches may have confirmed
                        # already when the status is read.
                        assert _status(conn, job_id) in ("pause-requested", "paused")
                        deadline = time.monotonic() + 180.0
                        while _status(conn, job_id) != "paused" and time.monotonic() < deadline:
                            time.sleep(0.2)
                        assert _status(conn, job_id) == "paused"
                    paused_at = _total(db)
                    time.sleep(4.0)
                    assert _total(db) == paused_at, "a paused job kept delivering"
                    with changefeed.connect(db) as conn:
                        conn.execute(f"RESUME JOB {job_id}")
                    assert _wait_growth(db, paused_at, proc, 120.0), "a resumed job did not deliver"
                time.sleep(rng.uniform(0.0, 2.0))
            finally:
                os.killpg(proc.pid, signal.SIGKILL)  # the runner and its JVM: kill -9
                proc.wait()
        bg.stop()  # the kills are over: no need to wait out the workload's duration
        stats = bg.join(timeout=600)
    finally:
        log.close()
    assert sum(s.committed for s in stats) > 100
    final = subprocess.run(_cmd(db, follow=False), env=_env(), capture_output=True, timeout=600)
    assert final.returncode == 0, final.stdout.decode()[-3000:] + final.stderr.decode()[-3000:]
    rep = v.validate_feed(db, TOPIC)
    assert rep.ok, str(rep)
    assert rep.stats["data_records"] == rep.stats["change_rows"] + 20  # + the initial scan's rows
    assert rep.stats["resolved_records"] > 0


def test_kill_9_mid_backfill_is_exactly_once(tmp_path: Path) -> None:
    """``ADD COLUMN .. DEFAULT`` under a job backfills every row twice (CockroachDB's old-schema
    duplicates, then the new schema) in chunk tasks that append on their own; ``kill -9`` of the
    runner while they append, then a restart, ends with each backfilled row exactly twice."""
    rows = 3000
    db = tmp_path / "db"
    w.setup_sql(db, feed=None, initial_rows=rows)
    with changefeed.connect(db) as conn:
        conn.execute("CREATE CHANGEFEED FOR t INTO 'topics://' WITH updated, diff")
    env = _env()
    env["CHANGEFEED_SCAN_CHUNK_ROWS"] = "100"  # 30 chunk tasks per backfill pass
    first = subprocess.run(_cmd(db, follow=False), env=env, capture_output=True, timeout=600)
    assert first.returncode == 0, first.stderr.decode()[-3000:]
    assert _total(db) == rows  # the initial scan
    with changefeed.connect(db) as conn:
        conn.execute("ALTER TABLE t ADD COLUMN extra INT DEFAULT 7")
        conn.execute("UPDATE t SET b = 1 WHERE k < 10")
    log = open(tmp_path / "runner.log", "wb")  # noqa: SIM115
    kills = 0
    try:
        for delay in (0.0, 0.5, 1.0):
            if _total(db) >= 3 * rows:
                break
            proc = subprocess.Popen(
                _cmd(db, follow=True), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
            try:
                assert _wait_growth(db, _total(db), proc, 240.0), (tmp_path / "runner.log").read_text()[
                    -3000:
                ]
                time.sleep(delay)
            finally:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            kills += 1
    finally:
        log.close()
    assert kills >= 1 and _total(db) < 3 * rows + 10  # killed before the backfill was complete
    final = subprocess.run(_cmd(db, follow=False), env=env, capture_output=True, timeout=600)
    assert final.returncode == 0, final.stderr.decode()[-3000:]
    rep = v.validate_feed(db, TOPIC)
    assert rep.ok, str(rep)
    assert _total(db) == rows + 2 * rows + 10  # the scan, both backfill passes, the updates
    from changefeed.topics import TopicStore

    store = TopicStore(db)
    try:
        seen: dict[tuple[bytes | None, bool], int] = {}
        for p in range(store.topic(TOPIC).partitions):
            for r in store.read(TOPIC, p, 0, 10 * rows):
                new = b'"extra"' in r.value
                seen[(r.key, new)] = seen.get((r.key, new), 0) + 1
    finally:
        store.close()
    # old schema: the initial scan and the duplicate; new schema: the backfill (and the update)
    updated = {f"[{k}]".encode() for k in range(10)}
    want = {
        (f"[{k}]".encode(), new): 2 if not new or f"[{k}]".encode() in updated else 1
        for k in range(rows)
        for new in (False, True)
    }
    assert seen == want
