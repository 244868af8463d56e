"""The one pipeline that delivers a database's changefeeds, and whether it is at work.

A pipeline (a node, ``changefeed start``, or ``changefeed run``) holds an exclusive ``flock`` on
``<db>/runner.lock`` for as long as it lives; the kernel drops it when the process exits,
``kill -9`` included. So one pipeline at a time delivers a database's feeds: a second one is
refused with an error naming the first (its pid and kind, from ``<db>/runner.json``, written once
the lock is held) and never delivers a feed concurrently.

Anyone can ask whether a pipeline holds the lock (:func:`runner_live`, a non-blocking shared
probe) without waiting. ``PAUSE JOB`` uses this the way CockroachDB's registry does: with a
pipeline at work the job becomes ``pause-requested`` and the pipeline marks it ``paused`` once its
feeds have stopped between micro-batches; with none, the job is ``paused`` at once. The status of
a job (``changefeed feeds``, ``SHOW CHANGEFEED JOBS``) says whether a pipeline holds it.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from changefeed.exceptions import DatabaseError, PipelineError

RUNNER_LOCK = "runner.lock"
RUNNER_INFO = "runner.json"
#: A status probe holds the lock (shared) for microseconds; a claim retries this long before it
#: takes a failure to lock for another pipeline at work.
CLAIM_PATIENCE_S = 0.5


@dataclass(frozen=True, slots=True)
class RunnerInfo:
    pid: int
    kind: str  # "node" (changefeed start) or "run" (changefeed run)
    started_ns: int

    def describe(self) -> str:
        what = "a changefeed node (changefeed start)" if self.kind == "node" else "changefeed run"
        return f"{what}, pid {self.pid}"


def _open(db: Path) -> int:
    return os.open(db / RUNNER_LOCK, os.O_RDWR | os.O_CREAT, 0o644)


def runner_info(db: Path) -> RunnerInfo | None:
    """Who holds the lock, as it wrote itself down (None when unknown)."""
    try:
        d = json.loads((db / RUNNER_INFO).read_text())
        return RunnerInfo(int(d["pid"]), str(d["kind"]), int(d["started_ns"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


@contextmanager
def claim(db: Path, kind: str = "run") -> Iterator[RunnerInfo]:
    """Hold the database's pipeline lock for the block; a :class:`PipelineError` naming the
    pipeline at work when another process holds it."""
    db = Path(db).absolute()
    try:
        fd = _open(db)
    except PermissionError:
        raise DatabaseError(
            f"database directory {db} is read-only: a pipeline needs to write its lock, checkpoints "
            "and topics there"
        ) from None
    except OSError as exc:
        raise DatabaseError(f"database directory {db}: cannot open {RUNNER_LOCK}: {exc.strerror}") from None
    try:
        deadline = time.monotonic() + CLAIM_PATIENCE_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    other = runner_info(db)
                    who = other.describe() if other is not None else "another process"
                    raise PipelineError(
                        f"{who} is already delivering the changefeeds of {db}: one pipeline per "
                        "database at a time (a node delivers every feed continuously; stop it first "
                        "to use changefeed run)"
                    ) from None
                time.sleep(0.02)
        info = RunnerInfo(os.getpid(), kind, time.time_ns())
        tmp = db / (RUNNER_INFO + ".tmp")
        try:
            tmp.write_text(json.dumps({"pid": info.pid, "kind": info.kind, "started_ns": info.started_ns}))
            os.replace(tmp, db / RUNNER_INFO)
        except OSError:
            pass  # the lock is what counts; the note only names the holder in errors
        yield info
    finally:
        os.close(fd)  # closing releases the lock


@contextmanager
def presence(db: Path) -> Iterator[RunnerInfo]:
    """:func:`claim` as ``changefeed run`` takes it."""
    with claim(db, "run") as info:
        yield info


def runner_live(db: Path) -> bool:
    """True while some pipeline holds the lock of ``db``."""
    try:
        fd = os.open(db / RUNNER_LOCK, os.O_RDONLY)
    except OSError:
        return False  # no lock file, or an unreadable directory: no pipeline could hold it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
