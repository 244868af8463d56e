"""Whether a pipeline runner is at work on a database.

A runner (``changefeed run``) holds a shared ``flock`` on ``<db>/runner.lock`` for as long as it
lives, and an exclusive one on ``<db>/checkpoints/feed-<id>.lock`` for each feed whose streaming
query it runs (:func:`try_feed_lock`), so two runners never run one feed's query at once (the
destination of an asynchronous replication runs its local source's replication feeds too); the kernel drops it when the process exits, ``kill -9`` included. Anyone can ask whether
some runner holds it (:func:`runner_live`) without waiting. ``PAUSE JOB`` uses this the way
CockroachDB's registry does: with a runner at work the job becomes ``pause-requested`` and the
runner marks it ``paused`` once its feeds have stopped between micro-batches; with none, the job
is ``paused`` at once.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

RUNNER_LOCK = "runner.lock"


def _open(db: Path) -> int:
    return os.open(db / RUNNER_LOCK, os.O_RDWR | os.O_CREAT, 0o644)


@contextmanager
def presence(db: Path) -> Iterator[None]:
    """Hold the runner lock (shared: several runners may work at once) for the block."""
    fd = _open(db)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def runner_live(db: Path) -> bool:
    """True while some runner holds the lock of ``db``."""
    try:
        fd = _open(db)
    except OSError:
        return False  # a read-only directory: no runner could have taken it either
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def try_feed_lock(db: Path, feed_id: int) -> int | None:
    """Take the exclusive lock of one feed's query without waiting: the open descriptor to keep
    while the query runs (close it to release), or None when another runner holds it."""
    d = db / "checkpoints"
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd = os.open(d / f"feed-{feed_id}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def release(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)
