"""Syncing one SQLite ``-wal`` file: the sync itself (:func:`sync_wal`), and the small process that
syncs it for an event loop (:func:`serve`, run as ``python -I wal_syncer.py WAL``).

Why a process: a server's event loop that waits for a group commit must not block in
``fdatasync`` (the other sessions' statements would wait), and a thread of the same interpreter
that syncs for it needs the interpreter lock around each sync to hand the result over, which it
gets only when the loop thread releases it: at the loop's next wait for I/O, or after the
interpreter's switch interval (5 ms) of a busy loop. Under load every group paid those hand-overs
(five to fifteen context switches a commit were measured). A process of its own syncs on the other
core without that lock, and its answer is one more readable pipe for the loop.

The protocol on the process's standard input and output: each request is a little-endian
unsigned 64-bit *target* (the last commit ticket the asker issued before writing the request, so
every commit frame it covers is already in the file); the process reads every request waiting,
syncs once, and answers ``target, errno`` (unsigned 64-bit, signed 64-bit; ``errno`` 0 when the
sync succeeded) for the largest target it read. It exits when its input closes (the asker is
gone) or after :data:`IDLE_EXIT_S` without a request (the asker starts another when it needs one).

This file imports nothing of the package: the process runs it by path, in isolated mode, so that
starting one costs an interpreter and a few standard modules (``ctypes`` for ``statx``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import struct
import sys
from typing import Any

#: A request: the target ticket.
REQUEST = struct.Struct("<Q")
#: An answer: the target synced (or not), and the sync's errno (0: durable).
ANSWER = struct.Struct("<Qq")
#: Seconds without a request after which the process exits.
IDLE_EXIT_S = 60.0

# statx(2), asked for the inode number and size only (see file_identity).
_AT_FDCWD = -100
_AT_EMPTY_PATH = 0x1000
_STATX_INO = 0x100
_STATX_SIZE = 0x200
_STATX_BUFFER = 256  # sizeof(struct statx)
_STATX_MASK = struct.Struct("=I")  # stx_mask: what the kernel filled in
_STATX_INO_SIZE = struct.Struct("=QQ")  # stx_ino, stx_size at 32
_STATX_DEV = struct.Struct("=II")  # stx_dev_major, stx_dev_minor at 136
#: statx failing so means it cannot be used here (not the file's doing): stat instead.
_STATX_UNUSABLE = frozenset({errno.ENOSYS, errno.EPERM, errno.EOPNOTSUPP, errno.EINVAL})
_statx: Any = None
try:
    _statx = ctypes.CDLL(None, use_errno=True).statx
    _statx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_char_p]
    _statx.restype = ctypes.c_int
except (AttributeError, OSError):  # not Linux, or a C library without statx
    _statx = None


def file_identity(path: str | None = None, fd: int = -1) -> tuple[tuple[int, int], int]:
    """``((st_dev, st_ino), st_size)`` of ``path`` (or of the open descriptor ``fd``), without
    asking for its timestamps.

    Why not ``os.stat``: on ext4 (Linux 6.18, virtio disk) the ``fdatasync`` of a ``-wal`` file
    that was stat'ed before each commit took about 100 µs more (p50 0.26 ms against 0.15 ms);
    ``statx`` asked for the inode and size only costs nothing. The likely cause: since Linux
    6.13 a file system with multigrain timestamps marks a file whose change time was read, and
    its next write then stamps a fine-grained time, which dirties the inode. Without ``statx``:
    ``os.stat`` / ``os.fstat``."""
    global _statx
    if _statx is not None:
        buf = ctypes.create_string_buffer(_STATX_BUFFER)
        want = _STATX_INO | _STATX_SIZE
        if path is None:
            rc = _statx(fd, b"", _AT_EMPTY_PATH, want, buf)
        else:
            rc = _statx(_AT_FDCWD, os.fsencode(path), 0, want, buf)
        if rc == 0:
            (mask,) = _STATX_MASK.unpack_from(buf, 0)
            if mask & want == want:
                ino, size = _STATX_INO_SIZE.unpack_from(buf, 32)
                major, minor = _STATX_DEV.unpack_from(buf, 136)
                return (os.makedev(major, minor), ino), size
        else:
            err = ctypes.get_errno()
            if err not in _STATX_UNUSABLE:
                raise OSError(err, os.strerror(err), *(() if path is None else (path,)))
            _statx = None  # not allowed or not there (a seccomp filter, an old kernel): stat from now on
    st = os.fstat(fd) if path is None else os.stat(path)
    return (st.st_dev, st.st_ino), st.st_size


def sync_wal(wal: str, directory: str, last_inode: tuple[int, int] | None) -> tuple[int, int] | None:
    """Make every frame written to ``wal`` so far durable; return the file's identity, which the
    caller passes back next time: the first sync of a new ``-wal`` file (a different inode) also
    syncs ``directory``, so the new file's entry survives power loss too (as SQLite's unix VFS
    does for a new WAL). No ``-wal`` file: the last connection to close checkpointed it into the
    database file and synced that file before deleting it; nothing to do."""
    try:
        fd = os.open(wal, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return last_inode
    try:
        inode, _ = file_identity(fd=fd)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    if inode != last_inode:
        dfd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return inode


def serve(wal: str, stdin: int = 0, stdout: int = 1) -> None:
    """Answer sync requests for ``wal`` until the input closes or stays idle (see the module)."""
    directory = os.path.dirname(wal) or "."
    inode: tuple[int, int] | None = None
    pending = b""
    while True:
        ready, _, _ = select.select([stdin], [], [], IDLE_EXIT_S)
        if not ready:
            return
        data = os.read(stdin, 1 << 16)
        if not data:
            return
        pending += data
        whole = len(pending) - len(pending) % REQUEST.size
        if not whole:
            continue
        target = max(t for (t,) in REQUEST.iter_unpack(pending[:whole]))
        pending = pending[whole:]
        try:
            inode = sync_wal(wal, directory, inode)
            failure = 0
        except OSError as exc:
            failure = exc.errno or errno.EIO  # EIO when the error names none
        try:
            os.write(stdout, ANSWER.pack(target, failure))
        except BrokenPipeError:
            return  # the asker is gone


if __name__ == "__main__":
    serve(sys.argv[1])
