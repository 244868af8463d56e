"""SQLite write-ahead logging as every changefeed file uses it: switching a file to WAL when other
processes may be doing the same, and durable commits shared by concurrent committers (group commit).

Switching: ``PRAGMA journal_mode=WAL`` on a file still in rollback mode needs an exclusive lock.
When two processes open the same new file at once, each holds a shared lock while asking for the
exclusive one; SQLite sees the deadlock and fails one of them at once with "database is locked",
without calling its busy handler. The loser only has to ask again: by then its shared lock is
released and the winner has switched the file, so the second attempt finds WAL already on.

Durability (``CHANGEFEED_SYNCHRONOUS``, see docs/durability.md): by default (``FULL``) a commit is
acknowledged only once it survives power loss. Connections run SQLite's ``synchronous=NORMAL``
(a commit appends its frames to the ``-wal`` file without syncing it) and, after ``COMMIT``
returns, the committer waits for :meth:`WalSync.wait`: one thread (the leader) syncs the ``-wal``
file with ``fdatasync``, and every commit that reached the file before that sync began is durable
when it ends; commits that arrive meanwhile are made durable together by the next sync. This is
what ``synchronous=FULL`` gives (SQLite syncs the WAL after writing each commit's frames), with
one sync per group instead of one per commit. It is sound because:

* a WAL frame is valid only if its salts match the WAL header and its checksum chains from the
  header through every earlier frame, so a synced prefix of the file recovers exactly the
  transactions whose commit frames it holds (SQLite's wal.c, "WAL FILE FORMAT");
* when a writer restarts the WAL from its beginning (after a complete checkpoint), SQLite writes
  the new header and syncs it before the first new frame unless ``synchronous=OFF`` (wal.c,
  ``sqlite3WalFrames``, ticket ff5be73dee), and a checkpoint syncs the WAL before copying it and
  the database file after: frames that were checkpointed before our sync are durable in the
  database file, and frames written after a restart are covered by our sync like any other;
* the unix VFS reports powersafe overwrite, so SQLite's FULL mode pads no commit frame either;
* a ``-wal`` file created since the last sync also needs its directory entry: the first sync of
  each new WAL inode syncs the directory too (as SQLite's unix VFS does for a new WAL).

Every process syncs for its own commits; the sync of any process makes every frame already in the
file durable, so processes that write the same database need no coordination beyond SQLite's.
``NORMAL`` (opt-in) skips the sync: commits survive ``kill -9`` of any process but may be lost on
power loss or an operating-system crash, never half-applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import mmap
import os
import random
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass

from changefeed import wal_syncer
from changefeed.exceptions import DatabaseError
from changefeed.wal_syncer import sync_wal

#: How long to keep retrying the switch before the error is the caller's.
SWITCH_TIMEOUT_S = 30.0
#: The environment variable that sets the durability of commits.
SYNCHRONOUS_ENV = "CHANGEFEED_SYNCHRONOUS"
#: Its default: durable across power loss, with group commit.
DEFAULT_SYNCHRONOUS = "FULL"
#: Accepted values (SQLite's ``synchronous`` levels). FULL and EXTRA are durable (group commit);
#: NORMAL and OFF are passed to SQLite as they are.
SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")
#: Bytes of one process's slot on a shared durability board (see ``WalSync.share``).
BOARD_SLOT = 24
#: Written zeros kept ahead of the WAL's last frame (see ``WalSync.reserve``): when less than a
#: quarter of a chunk is left past the last frame, a chunk more is written; a chunk is the
#: file's size, at least ``WAL_RESERVE_MIN`` and at most ``WAL_RESERVE_CHUNK`` (a database that
#: commits a few times does not get a megabyte of zeros).
WAL_RESERVE_CHUNK = 1 << 20
WAL_RESERVE_MIN = 64 << 10
#: Commits between two looks at how far SQLite wrote into the reserve (a look is two reads).
RESERVE_PROBE_EVERY = 16
#: The WAL file's header (wal.c): magic, format version, page size, checkpoint sequence, salts.
_WAL_HDR = struct.Struct(">IIII8s")
_WAL_MAGIC = (0x377F0682, 0x377F0683)
_WAL_HEADER = 32
_FRAME_HEADER = 24
_ZEROS = bytes(1 << 20)
_SLOT = struct.Struct("@QQQ")
_U64 = struct.Struct("@Q")


def use_wal(conn: sqlite3.Connection, *, timeout_s: float = SWITCH_TIMEOUT_S) -> str:
    """Run ``PRAGMA journal_mode=WAL`` until it is not refused for a lock; return the mode in force."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            row = conn.execute("PRAGMA journal_mode=WAL").fetchone()
            return str(row[0]).lower() if row else ""
        except sqlite3.OperationalError as exc:
            if not _is_lock_conflict(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(random.uniform(0.001, 0.02))


def _is_lock_conflict(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    text = str(exc)
    return "locked" in text or "busy" in text


# ---------------------------------------------------------------------------- durability
@dataclass(frozen=True, slots=True)
class Durability:
    """The durability of commits: ``mode`` as configured (one of :data:`SYNCHRONOUS_MODES`)."""

    mode: str

    @property
    def group_commit(self) -> bool:
        """True when commits are acknowledged only once durable (FULL, EXTRA)."""
        return self.mode in ("FULL", "EXTRA")

    @property
    def pragma(self) -> str:
        """``PRAGMA synchronous`` for a connection whose commits go through :class:`WalSync`."""
        return "NORMAL" if self.group_commit else self.mode

    @property
    def pragma_unshared(self) -> str:
        """``PRAGMA synchronous`` for a connection that commits without :class:`WalSync` (a rare
        writer, such as a feed's progress): SQLite's own sync at every commit."""
        return self.mode


def durability() -> Durability:
    """The durability configured by ``CHANGEFEED_SYNCHRONOUS`` (read each time: tests change it)."""
    raw = os.environ.get(SYNCHRONOUS_ENV, DEFAULT_SYNCHRONOUS).strip().upper()
    if raw not in SYNCHRONOUS_MODES:
        raise DatabaseError(
            f"{SYNCHRONOUS_ENV}={raw!r} is not a synchronous mode: use one of {', '.join(SYNCHRONOUS_MODES)}"
        )
    return Durability(raw)


class WalSync:
    """Group sync of one SQLite file's ``-wal`` within this process (see the module docstring).

    :meth:`ticket` is taken after a ``COMMIT`` returned (its frames are in the file); :meth:`wait`
    returns once a sync that began after the ticket was taken has ended. Thread-safe."""

    def __init__(self, db_file: str) -> None:
        self.wal = db_file + "-wal"
        # reserve(): its descriptor of the -wal file (used under the write lock only), the file
        # it is open on, the size last seen, and calls since the last look at the frames.
        self._reserve_lock = threading.Lock()
        self._reserve_fd = -1
        self._reserve_inode: tuple[int, int] | None = None
        self._reserve_size = -1
        self._reserve_calls = 0
        self.dir = os.path.dirname(db_file) or "."
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._issued = 0
        self._synced = 0
        self._leading = False
        self._failed: tuple[int, OSError] | None = None
        self._inode: tuple[int, int] | None = None
        #: Syncs done (for tests and benchmarks: commits / syncs is the group size).
        self.syncs = 0
        # wait_async: futures of event-loop waiters, and whether a worker is syncing for them.
        self._futures: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._work = threading.Condition(self._lock)  # wakes the drainer thread only
        self._drainer: threading.Thread | None = None
        # wait_async on the loop of a sync process: its waiters (ticket, future), the process,
        # and the target of the request in flight (0: none).
        self._loop_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._process: SyncProcess | None = None
        self._requested = 0
        # share(): the board where processes serving one database publish their commits' state.
        self._board: mmap.mmap | None = None
        self._slot = 0
        self._slots = 0

    def share(self, board: mmap.mmap, slot: int, slots: int) -> None:
        """Publish this process's commits in ``slot`` of ``board`` (shared memory of ``slots``
        slots of :data:`BOARD_SLOT` bytes: tickets issued, tickets synced, a commit in flight), and
        count the other slots' commits in :meth:`pending`: processes that serve one database
        together (the PostgreSQL endpoint's workers) then never show a reader another's commit
        before it is durable."""
        self._board, self._slot, self._slots = board, slot, slots
        self._publish(inflight=0)

    def _publish(self, *, inflight: int) -> None:
        board = self._board
        if board is not None:
            _SLOT.pack_into(board, self._slot * BOARD_SLOT, self._issued, self._synced, inflight)

    def announce(self) -> None:
        """A commit is about to write its frames (called under the write lock, before ``COMMIT``):
        from here other processes sharing the board treat it as visible and not durable, until
        :meth:`ticket` (or :meth:`withdraw`, if the commit failed)."""
        if self._board is not None:
            with self._cond:
                self._publish(inflight=1)

    def withdraw(self) -> None:
        if self._board is not None:
            with self._cond:
                self._publish(inflight=0)

    def reserve(self) -> None:
        """Keep written zeros ahead of the WAL's last frame, so that commits overwrite blocks the
        file already has instead of growing it (call under the write lock, before ``COMMIT``).

        Why: ``fdatasync`` of a file that grew (or whose blocks are fallocated but unwritten) must
        also commit the file system's journal (the new size, the new extents), which on ext4 is
        one commit shared with every other process's metadata changes, several times slower
        than flushing overwritten data blocks; PostgreSQL zero-fills its WAL segments for the
        same reason. The zeros are never a frame SQLite would accept: recovery reads frames until
        the first whose salts or checksum do not match, which a zeroed frame never does (the
        same as the stale frames SQLite itself leaves past the end after restarting its WAL).
        Only bytes past the file's current end are written, under the write lock: nothing else
        writes the WAL then (frames of an uncommitted transaction spilled early lie below the
        end, and checkpoints only read it). The zeros become durable with the next group sync.

        How far SQLite has written is read from the WAL itself: the frame a quarter of a chunk
        before the end carries the header's salts once written in this generation of the
        WAL (zeros and frames left from before a restart do not), looked at when the file has
        grown or every :data:`RESERVE_PROBE_EVERY` calls (a commit writes a few frames, the
        reserve holds hundreds). The ``-shm`` index is not read: SQLite holds its locks as POSIX
        record locks on that file, which closing any descriptor of it in this process would
        drop. A -wal file deleted (the last connection closed) and made again is a new inode:
        the descriptor kept here is then reopened on it."""
        with self._reserve_lock:  # against release_reserve of another thread
            self._reserve()

    def _reserve(self) -> None:
        try:
            st = os.stat(self.wal)
        except FileNotFoundError:
            return
        inode, size = (st.st_dev, st.st_ino), st.st_size
        self._reserve_calls += 1
        if (
            inode == self._reserve_inode
            and size == self._reserve_size
            and self._reserve_calls % RESERVE_PROBE_EVERY
        ):
            return  # the file did not grow: look at how far SQLite wrote every few commits only
        if inode != self._reserve_inode:
            if self._reserve_fd >= 0:
                os.close(self._reserve_fd)  # no lock of SQLite's is on the -wal file itself
                self._reserve_fd = -1
            try:
                self._reserve_fd = os.open(self.wal, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                return
            self._reserve_inode = inode
        fd = self._reserve_fd
        self._reserve_size = size
        head = os.pread(fd, _WAL_HEADER, 0)
        if len(head) < _WAL_HEADER:
            return
        magic, _, page, _, salts = _WAL_HDR.unpack_from(head)
        if magic not in _WAL_MAGIC or not 512 <= page <= 65536:
            return
        frame = page + _FRAME_HEADER
        chunk = min(WAL_RESERVE_CHUNK, max(WAL_RESERVE_MIN, size))
        probe = size - chunk // 4
        if probe >= _WAL_HEADER:
            at = _WAL_HEADER + (probe - _WAL_HEADER) // frame * frame
            if os.pread(fd, _FRAME_HEADER, at)[8:16] != salts:
                return  # SQLite has not written that far yet
        size = os.fstat(fd).st_size  # the inode checked above: the same file
        for off in range(size, size + chunk, len(_ZEROS)):
            os.pwrite(fd, _ZEROS[: min(len(_ZEROS), size + chunk - off)], off)
        # Not synced here, under the write lock (a stall of every writer): the next group sync
        # writes the zeros back with the commits' frames, once, and later syncs overwrite them.
        self._reserve_size = size + chunk

    def release_reserve(self) -> None:
        """Close :meth:`reserve`'s descriptor (a database of this file was closed; the next
        commit opens it again): it would otherwise keep a deleted -wal file's space."""
        with self._reserve_lock:
            fd, self._reserve_fd = self._reserve_fd, -1
            self._reserve_inode = None
        if fd >= 0:
            os.close(fd)

    def ticket(self) -> int:
        with self._cond:
            self._issued += 1
            if self._board is not None:
                self._publish(inflight=0)
            return self._issued

    def pending(self) -> int:
        """The last ticket issued if a commit of this process may be visible to readers but not
        durable yet; a new ticket if a commit of another process sharing the board may be (a sync
        of this process makes it durable too); else 0."""
        issued = self._issued
        if issued > self._synced:
            return issued
        board = self._board
        if board is not None:
            for i in range(self._slots):
                if i != self._slot:
                    o_issued, o_synced, o_inflight = _SLOT.unpack_from(board, i * BOARD_SLOT)
                    if o_inflight or o_issued > o_synced:
                        return self.ticket()
        return 0

    def barrier(self) -> None:
        """Make everything written to the file so far durable (by this or any process)."""
        self.wait(self.ticket())

    def wait(self, ticket: int) -> None:
        cond = self._cond
        with cond:
            while self._synced < ticket:
                failed = self._failed
                if failed is not None and failed[0] >= ticket:
                    raise _sync_error(self.wal, failed[1])
                if self._leading:
                    cond.wait()
                    continue
                self._leading = True
                target = self._issued
                cond.release()
                error: OSError | None = None
                try:
                    self._sync()
                except OSError as exc:
                    error = exc
                finally:
                    cond.acquire()
                    self._leading = False
                    self.syncs += 1
                    if error is None:
                        self._synced = max(self._synced, target)
                        if self._board is not None:
                            _U64.pack_into(self._board, self._slot * BOARD_SLOT + 8, self._synced)
                    else:
                        self._failed = (target, error)
                    cond.notify_all()

    async def wait_async(self, ticket: int, executor: Executor | None = None) -> None:
        """:meth:`wait` for an event loop, which never blocks: the loop's :class:`SyncProcess`
        syncs (one request in flight: the commits that arrive meanwhile are the next group), and
        the answer is one more readable pipe for the loop. A loop other than the one the process
        answers to (rare: one loop serves a process's endpoints) is served by one thread of this
        ``WalSync`` instead, which wakes each loop once per group (``executor`` is not used)."""
        if self._synced >= ticket:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        if self._process_for(loop) is not None:
            self._loop_waiters.append((ticket, fut))
            if not self._requested:
                self._request()
        else:
            with self._cond:
                self._futures.append((ticket, loop, fut))
                self._wake_drainer()
        await fut

    def _process_for(self, loop: asyncio.AbstractEventLoop) -> SyncProcess | None:
        proc = self._process
        if proc is not None and proc.loop is not loop:
            if not proc.loop.is_closed():
                return None  # another loop's: that one keeps it
            proc.close()  # its loop is gone, and the waiters with it
            self._process, self._loop_waiters, self._requested = None, [], 0
        if self._process is None:
            try:
                self._process = SyncProcess(self.wal, loop, self._answered)
            except OSError:
                return None  # no process to be had (out of processes or descriptors): a thread
        return self._process

    def _request(self) -> None:
        """Ask the loop's process for a sync covering every ticket issued so far."""
        proc = self._process
        assert proc is not None
        self._requested = self._issued
        if not proc.request(self._requested):
            self._restart()

    def _restart(self) -> None:
        """The process is gone (idle exit, killed) with waiters: a new one, or a thread."""
        proc, self._process = self._process, None
        requested, self._requested = self._requested, 0
        if proc is not None:
            proc.close()
            if self._process_for(proc.loop) is not None:
                if requested or self._loop_waiters:
                    self._request()
                return
            waiters, self._loop_waiters = self._loop_waiters, []
            with self._cond:
                self._futures.extend((t, proc.loop, f) for t, f in waiters)
                if self._futures:
                    self._wake_drainer()

    def _answered(self, target: int, errno: int) -> None:
        """On the loop: the process synced (``errno`` 0) everything up to ``target``, or failed."""
        if target < 0:  # the process ended
            if self._requested or self._loop_waiters:
                self._restart()
            else:
                proc, self._process = self._process, None
                if proc is not None:
                    proc.close()
            return
        error: BaseException | None = None
        with self._cond:
            self.syncs += 1
            if errno == 0:
                self._synced = max(self._synced, target)
                if self._board is not None:
                    _U64.pack_into(self._board, self._slot * BOARD_SLOT + 8, self._synced)
            else:
                self._failed = (target, OSError(errno, os.strerror(errno)))
                error = _sync_error(self.wal, self._failed[1])
            synced = self._synced
            self._cond.notify_all()
        self._requested = 0
        keep: list[tuple[int, asyncio.Future[None]]] = []
        for t, fut in self._loop_waiters:
            if t <= synced:
                _settle(fut, None)
            elif error is not None and t <= target:
                _settle(fut, error)
            else:
                keep.append((t, fut))
        self._loop_waiters = keep
        if keep:
            self._request()

    def _wake_drainer(self) -> None:
        if self._drainer is None:
            self._drainer = threading.Thread(target=self._drain, name="wal-sync", daemon=True)
            self._drainer.start()
        else:
            self._work.notify()

    def _drain(self) -> None:
        while True:
            with self._cond:
                while not self._futures:
                    self._work.wait()
                target = max(t for t, _, _ in self._futures)
            error: BaseException | None = None
            try:
                self.wait(target)
            except BaseException as exc:  # handed to the waiters
                error = exc
            with self._cond:
                done = [w for w in self._futures if error is not None or w[0] <= self._synced]
                self._futures = [w for w in self._futures if w not in done]
            by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
            for _, loop, fut in done:
                by_loop.setdefault(loop, []).append(fut)
            for loop, futs in by_loop.items():
                with contextlib.suppress(RuntimeError):  # a loop that closed meanwhile
                    loop.call_soon_threadsafe(_settle_all, futs, error)

    def _sync(self) -> None:
        self._inode = sync_wal(self.wal, self.dir, self._inode)


class SyncProcess:
    """The process (``changefeed/wal_syncer.py``) that syncs one ``-wal`` file for one event
    loop; ``on_answer(target, errno)`` is called on the loop for each answer, and
    ``on_answer(-1, 0)`` once if the process ends (it exits after a minute without requests)."""

    def __init__(
        self, wal: str, loop: asyncio.AbstractEventLoop, on_answer: Callable[[int, int], None]
    ) -> None:
        self.loop = loop
        self.on_answer = on_answer
        self.proc = subprocess.Popen(
            [sys.executable, "-I", wal_syncer.__file__, wal],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            start_new_session=True,  # a terminal's Ctrl-C is for the server, which ends it
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        os.set_blocking(self.rfd, False)
        self.buffer = b""
        self.closed = False
        loop.add_reader(self.rfd, self._readable)

    def request(self, target: int) -> bool:
        """Send a request; False if the process is gone."""
        try:
            os.write(self.wfd, wal_syncer.REQUEST.pack(target))
        except OSError:
            return False
        return True

    def _readable(self) -> None:
        try:
            data = os.read(self.rfd, 1 << 12)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.on_answer(-1, 0)
            return
        self.buffer += data
        size = wal_syncer.ANSWER.size
        whole = len(self.buffer) - len(self.buffer) % size
        answers, self.buffer = self.buffer[:whole], self.buffer[whole:]
        for target, errno in wal_syncer.ANSWER.iter_unpack(answers):
            self.on_answer(target, errno)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if not self.loop.is_closed():
            self.loop.remove_reader(self.rfd)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # the process exits at the end of its input
        self.proc.stdout.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=1.0)
        if self.proc.returncode is None:
            self.proc.kill()


def _settle_all(futs: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for fut in futs:
        _settle(fut, error)


def _settle(fut: asyncio.Future[None], error: BaseException | None) -> None:
    if fut.done():
        return
    if error is None:
        fut.set_result(None)
    else:
        fut.set_exception(error)


def _sync_error(wal: str, exc: OSError) -> DatabaseError:
    return DatabaseError(
        f"{wal}: the commit is written but could not be made durable ({exc.strerror or exc}); "
        "it may be lost if the machine loses power before the next successful sync"
    )


_syncs: dict[str, WalSync] = {}
_syncs_lock = threading.Lock()


def wal_sync(db_file: str | os.PathLike[str]) -> WalSync:
    """The :class:`WalSync` of this process for the SQLite file ``db_file``."""
    key = os.path.realpath(db_file)
    s = _syncs.get(key)
    if s is not None:
        return s
    with _syncs_lock:
        s = _syncs.get(key)
        if s is None:
            s = _syncs[key] = WalSync(key)
        return s


def _after_fork_in_child() -> None:
    # A forked child must not wait on a condition a thread of the parent holds.
    global _syncs_lock
    _syncs_lock = threading.Lock()
    _syncs.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
