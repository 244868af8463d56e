"""A statement on an event loop that finds a shared write gate held waits for the gate's doorbell
(rung by every release) on the loop, not on a pool thread, and wakes as soon as it is free."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from changefeed.engine.database import WriteGate
from changefeed.server import gate_wait


def test_a_release_wakes_a_loop_waiter_at_once(tmp_path: Path) -> None:
    bell = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    holder = WriteGate(str(tmp_path / "x.db"), shared=True, bell=bell)
    # another process's gate: the same file and pipe, its own open file (flock is per open file)
    other = WriteGate(str(tmp_path / "x.db"), shared=True, bell=bell)
    try:
        assert holder.acquire(blocking=False)
        for _ in range(100):
            holder._ring()  # stale rings from before the wait: drained, never mistaken for a release

        async def waiter() -> float:
            t0 = time.monotonic()
            while not other.acquire(blocking=False):
                await gate_wait.released(other, timeout=10.0)
            other.release()
            return time.monotonic() - t0

        def release_later() -> None:
            time.sleep(0.3)
            holder.release()

        threading.Thread(target=release_later).start()
        waited = asyncio.run(waiter())
        assert 0.25 < waited < 2.0  # woken by the release's ring, not the 10 s timer
    finally:
        for fd in bell:
            os.close(fd)


def test_without_a_bell_the_waiter_looks_again_on_a_timer(tmp_path: Path) -> None:
    gate = WriteGate(str(tmp_path / "y.db"), shared=True)
    assert gate.bell() == -1

    async def once() -> float:
        t0 = time.monotonic()
        await gate_wait.released(gate, timeout=0.05)
        return time.monotonic() - t0

    assert 0.04 < asyncio.run(once()) < 1.0


def test_run_if_free_reports_a_refusal_and_restores_the_flag(tmp_path: Path) -> None:
    import changefeed
    from changefeed.exceptions import LockNotAvailable

    conn = changefeed.connect(tmp_path / "db")
    db = conn.db
    try:

        def refuse() -> int:
            assert db.writers_wait is False  # the write transactions inside refuse at once
            raise LockNotAvailable("another process is writing")

        def boom() -> int:
            raise ValueError("not a lock")

        assert db.run_if_free(lambda: 7) == (True, 7)
        assert db.run_if_free(refuse) == (False, None)
        assert db.writers_wait is True
        with pytest.raises(ValueError):
            db.run_if_free(boom)
        assert db.writers_wait is True
        db.writers_wait = False  # an outer caller's setting is kept
        assert db.run_if_free(refuse) == (False, None)
        assert db.writers_wait is False
        db.writers_wait = True
    finally:
        conn.close()


class _Db:
    """What run_inline uses of a Database: a writer that refuses ``refusals`` times."""

    def __init__(self, gate: WriteGate, refusals: int) -> None:
        self.write_gate = gate
        self.refusals = refusals
        self.tries = 0

    def run_if_free(self, fn: Callable[..., int], *args: Any) -> tuple[bool, int | None]:
        self.tries += 1
        if self.tries <= self.refusals:
            return False, None
        return True, fn(*args)


def test_run_inline_waits_on_the_loop_for_a_shared_gate_then_goes_to_the_pool(tmp_path: Path) -> None:
    pooled: list[tuple[Any, ...]] = []

    async def pool(fn: Callable[..., int], *args: Any) -> int:
        pooled.append(args)
        return fn(*args)

    def add(a: int, b: int) -> int:
        return a + b

    async def run(db: _Db, **kw: Any) -> tuple[int, float]:
        t0 = time.monotonic()
        got = await gate_wait.run_inline(cast(Any, db), pool, add, 2, 3, **kw)
        return got, time.monotonic() - t0

    shared = WriteGate(str(tmp_path / "s.db"), shared=True)  # no bell: looks again every 5 ms
    # free at the third look, on the loop
    db = _Db(shared, refusals=2)
    assert asyncio.run(run(db))[0] == 5 and db.tries == 3 and not pooled
    # the caller's own try was refused already: the wait comes first, no second try at once
    db = _Db(shared, refusals=1)
    assert asyncio.run(run(db, refused=True))[0] == 5 and db.tries == 2 and not pooled
    # held all along: on the pool once the wait on the loop is over
    db = _Db(shared, refusals=10**6)
    got, took = asyncio.run(run(db, wait_on_loop_s=0.05))
    assert got == 5 and pooled == [(2, 3)] and 0.04 < took < 1.0
    # a gate of this process alone does not ring: on the pool at once
    pooled.clear()
    db = _Db(WriteGate(str(tmp_path / "u.db"), shared=False), refusals=10**6)
    got, took = asyncio.run(run(db))
    assert got == 5 and pooled == [(2, 3)] and db.tries == 1 and took < 0.04
