"""Asynchronous replication on the Spark pipeline (issue 20), a source on this machine (by path).

* ``run --until-idle`` applies a GLOBAL and a ROW replication of a multi-table source: the GLOBAL
  replicas equal the source as of their barrier, the ROW ones converge, and both show in the
  system view and in ``changefeed feeds``;
* ``kill -9`` of ``changefeed run --db DST`` (which also delivers the local source's changefeeds)
  during a random multi-table transactional workload: every snapshot of the GLOBAL replicas,
  sampled all along, equals the source as of its barrier; after the workload the ROW replicas equal
  the source, and after ``STATE = "DONE"`` so do the GLOBAL ones. ``make test`` kills twice
  (``CHANGEFEED_REPLICATION_KILLS``), ``make soak`` five times over a longer workload.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed.testing.replication import (
    BankWorkload,
    Check,
    check_at_barrier,
    check_equal,
    setup_bank,
    wait_caught_up,
)

PY = sys.executable


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = PY
    env["PYSPARK_DRIVER_PYTHON"] = PY
    env["CHANGEFEED_GC_MIN_AGE_S"] = str(10**9)  # the checks undo changes through the change stream
    env["PYTHONPATH"] = str(Path(__file__).parents[1] / "src")
    return env


def _create(dst: Path, src: Path, interval: str = "PT0.5S") -> None:
    c = changefeed.connect(dst)
    c.execute(
        "CREATE ASYNC REPLICATION g FOR accounts AS accounts_g, moves AS moves_g WITH ("
        f"CONNECTION_STRING = 'file://{src}', CONSISTENCY_LEVEL = 'GLOBAL', COMMIT_INTERVAL = Interval('{interval}'))"
    )
    c.execute(
        "CREATE ASYNC REPLICATION r FOR accounts AS accounts_r, moves AS moves_r WITH ("
        f"CONNECTION_STRING = 'file://{src}', CONSISTENCY_LEVEL = 'ROW')"
    )
    c.close()


@pytest.mark.spark
def test_until_idle_global_and_row(spark: Any, tmp_path: Path) -> None:
    from changefeed.cli.run_cmd import feeds_report
    from changefeed.pipeline.runner import run_until_idle
    from changefeed.testing.replication import bank_transactions

    src, dst = tmp_path / "src", tmp_path / "dst"
    setup_bank(src)
    _create(dst, src, "PT0.05S")
    s = changefeed.connect(src)
    bank_transactions(s, random.Random(3), 40)
    run_until_idle(dst, spark=spark)
    check = check_at_barrier(src, dst, "g")
    assert check.ok and check.barrier > 0, str(check)
    assert check_equal(src, dst, "r").ok
    bank_transactions(s, random.Random(4), 40)
    time.sleep(0.1)  # a barrier after the last change
    run_until_idle(dst, spark=spark)
    assert check_equal(src, dst, "g").ok, str(check_equal(src, dst, "g"))
    assert check_equal(src, dst, "r").ok
    d = changefeed.connect(dst)
    rows = d.execute(
        "SELECT name, destination_path, state, consistency_level, initial_scan_progress, applied_rows"
        " FROM `.sys/async_replications` ORDER BY name, item"
    ).rows
    assert [r[:5] for r in rows] == [
        ("g", "accounts_g", "Running", "Global", 100.0),
        ("g", "moves_g", "Running", "Global", 100.0),
        ("r", "accounts_r", "Running", "Row", 100.0),
        ("r", "moves_r", "Running", "Row", 100.0),
    ]
    assert all(r[5] > 0 for r in rows)
    report = {r["name"]: r for r in feeds_report(dst) if r["kind"] == "async replication"}
    assert set(report) == {"g", "r"} and report["g"]["high_water_ydb"].endswith(", 0]")
    d.close()
    s.close()


def _sampler(src: Path, dst: Path, stop: threading.Event, out: list[Check]) -> None:
    while not stop.is_set():
        try:
            out.append(check_at_barrier(src, dst, "g"))
        except Exception as exc:  # a table read while the runner starts: try again
            out.append(Check(mismatches=[]))
            print("sampler:", exc)
        time.sleep(0.3)


def _kill_run(tmp_path: Path, kills: int, duration: float) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    setup_bank(src, accounts=40)
    _create(dst, src)
    rng = random.Random(20)
    bg = BankWorkload(src, seeds=[11, 12], duration=duration, sleep=0.005, keys=60)
    samples: list[Check] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_sampler, args=(src, dst, stop, samples), daemon=True)
    sampler.start()
    log = open(tmp_path / "runner.log", "wb")  # noqa: SIM115
    barriers_at_kill = []
    try:
        for _ in range(kills):
            proc = subprocess.Popen(
                [PY, "-m", "changefeed.cli.main", "run", "--db", str(dst)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_env(),
                start_new_session=True,
            )
            before = max((c.barrier for c in samples), default=0)
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and max((c.barrier for c in samples), default=0) <= before:
                time.sleep(0.2)
            time.sleep(rng.uniform(0.0, 3.0))
            os.killpg(proc.pid, signal.SIGKILL)  # the runner and its JVM: kill -9
            proc.wait()
            barriers_at_kill.append(max((c.barrier for c in samples), default=0))
        committed = bg.join(timeout=900)
        assert committed > 100
        proc = subprocess.Popen(
            [PY, "-m", "changefeed.cli.main", "run", "--db", str(dst)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_env(),
            start_new_session=True,
        )
        try:
            time.sleep(1.0)  # a barrier after the last change of the quiet source
            wait_caught_up(src, dst, "g", timeout_s=300)
            wait_caught_up(src, dst, "r", timeout_s=300)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=120)
    finally:
        stop.set()
        sampler.join()
        log.close()
    samples.append(check_at_barrier(src, dst, "g"))  # caught up: the barrier past the last change
    bad = [c for c in samples if not c.ok]
    assert not bad, str(bad[0])
    assert len({c.barrier for c in samples if c.barrier}) > kills, barriers_at_kill
    assert all(b > 0 for b in barriers_at_kill), f"kills before anything was applied: {barriers_at_kill}"
    row = check_equal(src, dst, "r")
    assert row.ok, str(row)
    d = changefeed.connect(dst)
    d.execute("ALTER ASYNC REPLICATION g SET (STATE = 'DONE', FAILOVER_MODE = 'FORCE')")
    d.close()
    done = check_equal(src, dst, "g")
    assert done.ok, str(done)


@pytest.mark.slow
@pytest.mark.spark
def test_kill_9_of_the_apply_keeps_every_barrier_consistent(tmp_path: Path) -> None:
    _kill_run(tmp_path, int(os.environ.get("CHANGEFEED_REPLICATION_KILLS", "2")), duration=40)


@pytest.mark.soak
@pytest.mark.spark
def test_soak_five_kills(tmp_path: Path) -> None:
    _kill_run(tmp_path, 5, duration=150)
