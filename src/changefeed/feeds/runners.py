"""Whether a pipeline runner is at work on a database.

A runner (``changefeed run``) holds a shared ``flock`` on ``<db>/runner.lock`` for as long as it
lives; the kernel drops it when the process exits, ``kill -9`` included. Anyone can ask whether
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
