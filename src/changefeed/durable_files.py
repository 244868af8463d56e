"""Files that must survive a power loss: written whole, synced, and their directory entry synced.

SQLite makes our tables durable (``sqlite_wal``); a few plain files carry state the exactly-once
argument rests on too: a micro-batch's planned offsets (``checkpoints/feed-N/offsets/<batch id>``,
written before any of its records is appended), a checkpoint's writer epoch, a scan's chunk plan,
a cloud-storage sink's output. Were one of them lost after the records it describes were appended
(durably), a replayed batch id would be planned afresh over other rows and skipped as a duplicate.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def sync_dir(directory: str | os.PathLike[str]) -> None:
    """Make the directory's entries (a rename into it, a new file) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_file(path: str | os.PathLike[str]) -> None:
    """Make an existing file's contents and its directory entry durable (a file another program,
    such as Spark, wrote and renamed into place without syncing)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    sync_dir(Path(path).parent)


def write_durably(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically and durably: a temporary file in the same
    directory, synced, renamed over ``path``, the directory synced. A crash leaves the old file
    or the new one, never a torn one."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    sync_dir(target.parent)
