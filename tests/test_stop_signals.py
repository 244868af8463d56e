"""Ctrl-C and SIGTERM stop the commands that run until told to: cleanly, whenever they arrive.

A handler that raised ``KeyboardInterrupt`` could land inside ``threading.Condition.wait`` and
turn a clean stop into ``RuntimeError: release unlocked lock`` and exit 1 (seen in CI on
``changefeed sql 'EXPERIMENTAL CHANGEFEED FOR ..'``). :mod:`changefeed.stop_signals` only wakes a
helper thread (the window is a few bytecodes wide, so the tests below hold the handler to never
raising, and each command to a clean stop while it works, rather than replaying the race).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

import changefeed
from changefeed.stop_signals import stop_on_signals
from changefeed.topics import TopicStore

SRC = str(Path(__file__).resolve().parents[1] / "src")


def test_the_first_signal_calls_stop_and_raises_nothing() -> None:
    stopped = threading.Event()
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals(stopped.set):
        os.kill(os.getpid(), signal.SIGTERM)
        assert stopped.wait(5)
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_second_signal_raises_keyboard_interrupt() -> None:
    stopped = threading.Event()
    before = signal.getsignal(signal.SIGINT)  # (PySpark, when loaded, has its own)
    with pytest.raises(KeyboardInterrupt), stop_on_signals(stopped.set):
        os.kill(os.getpid(), signal.SIGINT)
        assert stopped.wait(5)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler raises at the next bytecode
    assert signal.getsignal(signal.SIGINT) is before


def test_outside_the_main_thread_the_block_runs_without_handlers() -> None:
    seen: list[object] = []

    def body() -> None:
        with stop_on_signals(lambda: None):
            seen.append(signal.getsignal(signal.SIGTERM))

    before = signal.getsignal(signal.SIGTERM)
    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert seen == [before]


# ------------------------------------------------------------------------------------ the commands
def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "changefeed.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )


def _stop(proc: subprocess.Popen[str], sig: signal.Signals) -> tuple[int, str]:
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=30)
    return proc.returncode, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_core_changefeed_under_writes_stops_with_exit_0(tmp_path: Path, sig: signal.Signals) -> None:
    db = tmp_path / "db"
    conn = changefeed.connect(db)
    conn.execute("CREATE TABLE t (a INT PRIMARY KEY)")
    proc = _start("sql", "--db", str(db), "EXPERIMENTAL CHANGEFEED FOR t")
    assert proc.stdout is not None
    assert proc.stdout.readline() == "table,key,value\n"
    drain = threading.Thread(target=proc.stdout.read)
    drain.start()
    for i in range(200):  # the feed is busy reading and writing when the signal comes
        conn.execute(f"INSERT INTO t VALUES ({i})")
    assert _stop(proc, sig) == (0, "")
    drain.join()
    conn.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_read_follow_stops_with_exit_0(tmp_path: Path, sig: signal.Signals) -> None:
    db = tmp_path / "db"
    store = TopicStore(db)
    store.ensure_topic("t/feed", 1, 0)
    values = pa.array([b"v"], pa.binary())
    store.append(
        "t/feed",
        0,
        "w",
        0,
        pa.table({"key": pa.array([b"k"], pa.binary()), "value": values, "ts": pa.array([1], pa.int64())}),
    )
    proc = _start("read", "--db", str(db), "t/feed", "--from-beginning", "--follow")
    assert proc.stdout is not None
    assert proc.stdout.readline() == "0:0 k v\n"
    assert _stop(proc, sig) == (0, "")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_cdc_poll_stops_with_exit_0(tmp_path: Path, sig: signal.Signals) -> None:
    db = tmp_path / "db"
    conn = changefeed.connect(db)
    conn.execute("CREATE TABLE T (k INTEGER PRIMARY KEY, v INTEGER) COLUMN_ENCODED_BYTES=0")
    conn.execute("CREATE CDC C ON T")
    conn.execute("UPSERT INTO T VALUES (1, 10)")
    proc = _start("cdc-poll", "--db", str(db), "C", "--safety-ms", "50", "--interval-ms", "50")
    assert proc.stdout is not None
    assert "\t1\t" in proc.stdout.readline()
    assert _stop(proc, sig) == (0, "")
    conn.close()
