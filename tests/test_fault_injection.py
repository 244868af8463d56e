"""Fault injection: kill -9 the delivery process at random points during a concurrent random
workload, restart it each time, finish with a run to idle, then run every feed validator.

Each round starts the runner, waits until it is delivering (the topic grows), then kills the
runner and its JVM with SIGKILL after a further random 0-3 s, so kills land mid-read, mid-encode
and mid-commit of micro-batches. The Spark variant runs ``changefeed run --db DIR``; the baseline
variant the single-process loop (``python -m changefeed.pipeline.baseline``) with small chunks.
Change-stream GC is held off (``CHANGEFEED_GC_MIN_AGE_S``) because the validators compare the
topic with the full change stream.
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

from changefeed.testing import validators as v, workload as w

PY = sys.executable
KILLS = int(os.environ.get("CHANGEFEED_FAULT_KILLS", "10"))
TOPIC = "t/f"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = PY
    env["PYSPARK_DRIVER_PYTHON"] = PY
    env["CHANGEFEED_GC_MIN_AGE_S"] = str(10**9)
    env["PYTHONPATH"] = str(Path(__file__).parents[1] / "src")
    return env


def _baseline_cmd(db: Path, *, follow: bool) -> list[str]:
    args = [PY, "-m", "changefeed.pipeline.baseline", "--db", str(db), "--feed", "f", "--batch-rows", "40"]
    return args + (["--follow"] if follow else [])


def _spark_cmd(db: Path, *, follow: bool) -> list[str]:
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


@pytest.mark.slow
@pytest.mark.parametrize(
    "runner",
    [pytest.param("baseline", id="baseline"), pytest.param("spark", id="spark", marks=pytest.mark.spark)],
)
def test_kill_9_during_workload_is_exactly_once(tmp_path: Path, runner: str) -> None:
    db = tmp_path / "db"
    w.setup_sql(
        db,
        feed_options='TOPIC_MIN_ACTIVE_PARTITIONS = 4, RESOLVED_TIMESTAMPS = Interval("PT1S")',
        initial_rows=20,
    )
    rng = random.Random(2024)
    cmd = _spark_cmd if runner == "spark" else _baseline_cmd
    start_wait = 60.0 if runner == "spark" else 10.0
    bg = w.Background(
        db, seeds=[101, 102], txns=None, duration=KILLS * (start_wait / 2 + 3), sleep=0.01, keys=60
    )
    kills_while_delivering = 0
    log = open(tmp_path / "runner.log", "wb")  # noqa: SIM115
    try:
        for _ in range(KILLS):
            before = _total(db)
            proc = subprocess.Popen(
                cmd(db, follow=True), stdout=log, stderr=subprocess.STDOUT, env=_env(), start_new_session=True
            )
            deadline = time.monotonic() + start_wait
            while time.monotonic() < deadline and _total(db) == before and proc.poll() is None:
                time.sleep(0.1)
            delivering = _total(db) > before
            time.sleep(rng.uniform(0.0, 3.0))
            os.killpg(proc.pid, signal.SIGKILL)  # the runner and its children (the JVM): kill -9
            proc.wait()
            kills_while_delivering += delivering
        bg.stop()  # the kills are over: no need to wait out the workload's duration
        stats = bg.join(timeout=600)
    finally:
        log.close()
    assert sum(s.committed for s in stats) > 200
    final = subprocess.run(cmd(db, follow=False), env=_env(), capture_output=True, timeout=600)
    assert final.returncode == 0, final.stdout.decode()[-3000:] + final.stderr.decode()[-3000:]
    rep = v.validate_feed(db, "f")
    assert rep.ok, str(rep)
    assert rep.stats["data_records"] >= rep.stats["change_rows"] > 0
    # The kills must have hit runners that were delivering, or the test proves little.
    assert kills_while_delivering >= KILLS // 2, (
        f"only {kills_while_delivering} of {KILLS} kills hit a delivering runner"
    )


def _group_members(pgid: int, *, wait: float) -> list[str]:
    """Command lines of the processes still in group ``pgid`` after up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        members = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    members.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200])
            except (OSError, IndexError, ValueError):
                continue
        if not members or time.monotonic() > deadline:
            return members
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_continuous_run_stops_cleanly_on_a_signal(tmp_path: Path, sig: signal.Signals) -> None:
    """``changefeed run`` (continuous) stops between micro-batches on SIGTERM or Ctrl-C: it exits
    0, leaves no process behind (the JVM included), and a later run resumes exactly once."""
    db = tmp_path / "db"
    w.setup_sql(db, feed_options='RESOLVED_TIMESTAMPS = Interval("PT1S")', initial_rows=20)
    bg = w.Background(db, seeds=[7], txns=None, duration=20.0, sleep=0.01, keys=40)
    log = open(tmp_path / "runner.log", "wb")  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            _spark_cmd(db, follow=True),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_env(),
            start_new_session=True,
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and _total(db) == 0 and proc.poll() is None:
            time.sleep(0.1)
        assert _total(db) > 0, (tmp_path / "runner.log").read_text()[-3000:]
        time.sleep(2.0)  # mid-stream: the workload is still committing
        os.kill(proc.pid, sig)  # the driver only, as a service manager or a terminal would
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        assert code == 0, (tmp_path / "runner.log").read_text()[-3000:]
        survivors = _group_members(proc.pid, wait=30.0)
        assert not survivors, f"left running after the runner exited: {survivors}"
        bg.stop()  # the kills are over: no need to wait out the workload's duration
        bg.join(timeout=120)
    finally:
        log.close()
    final = subprocess.run(_spark_cmd(db, follow=False), env=_env(), capture_output=True, timeout=600)
    assert final.returncode == 0, final.stdout.decode()[-3000:] + final.stderr.decode()[-3000:]
    rep = v.validate_feed(db, "f")
    assert rep.ok, str(rep)
