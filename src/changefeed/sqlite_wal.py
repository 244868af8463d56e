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

A committer on an event loop (a server's session) must not block in the sync: it awaits
:meth:`WalSync.wait_async`, answered by a small process of the loop's own
(``changefeed/wal_syncer.py``) that syncs on the other core and answers on a pipe the loop reads.

Every process syncs for its own commits; the sync of any process makes every frame already in the
file durable, so processes that write the same database need no coordination beyond SQLite's.
``NORMAL`` (opt-in) skips the sync: commits survive ``kill -9`` of any process but may be lost on
power loss or an operating-system crash, never half-applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
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
from dataclasses import dataclass

from changefeed import wal_syncer
from changefeed.exceptions import DatabaseError
from changefeed.wal_syncer import sync_wal

_log = logging.getLogger(__name__)

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
        #: The last sync that failed: (synced before it, its target, its error); see _outcome.
        self._failed: tuple[int, int, OSError] | None = None
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
        # ends of processes in a row without an answer; no processes any more (a thread syncs)
        self._deaths = 0
        self._no_process = False
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
            inode, size = wal_syncer.file_identity(self.wal)  # not os.stat: see file_identity
        except FileNotFoundError:
            return
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
        _, size = wal_syncer.file_identity(fd=fd)  # the inode checked above: the same file
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
            while True:
                decided, failure = self._outcome(ticket)
                if failure is not None:
                    raise failure
                if decided:
                    return
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
                    self._synced_to(target, error)

    def _outcome(self, ticket: int) -> tuple[bool, DatabaseError | None]:
        """(decided, error) of ``ticket``: decided once a sync made it durable (no error), or once
        a sync that covered it failed (and none before it had made it durable): the durability
        error, for good, whatever later syncs do, since after a failed ``fdatasync`` the kernel
        may have dropped the pages it could not write, and a later sync that succeeds says
        nothing about them."""
        failed = self._failed
        if failed is not None and failed[0] < ticket <= failed[1]:
            return True, _sync_error(self.wal, failed[2])
        return self._synced >= ticket, None

    def _synced_to(self, target: int, error: OSError | None) -> None:
        """Under the lock: a sync that began after ``target`` was issued ended (``error``: failed)."""
        self.syncs += 1
        if error is None:
            self._synced = max(self._synced, target)
            if self._board is not None:
                _U64.pack_into(self._board, self._slot * BOARD_SLOT + 8, self._synced)
        else:
            self._failed = (self._synced, target, error)
        self._cond.notify_all()

    @property
    def sync_process(self) -> SyncProcess | None:
        """The event loop's sync process in use, if any (see :meth:`wait_async`)."""
        proc = self._process
        return proc if proc is not None and not proc.closed else None

    async def wait_async(self, ticket: int) -> None:
        """:meth:`wait` for an event loop, which never blocks: the loop's :class:`SyncProcess`
        syncs (one request in flight: the commits that arrive meanwhile are the next group), and
        the answer is one more readable pipe for the loop. A loop other than the one the process
        answers to (rare: one loop serves a process's endpoints), or any loop once processes
        could not be started or kept ending without answering, is served by one thread of this
        ``WalSync`` instead, which wakes each loop once per group."""
        decided, error = self._outcome(ticket)
        if error is not None:
            raise error
        if decided:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        if self._process_for(loop) is not None:
            self._loop_waiters.append((ticket, fut))
            if not self._requested:
                self._request()
        else:
            self._to_drainer(loop, [(ticket, fut)])
        await fut

    def _to_drainer(
        self, loop: asyncio.AbstractEventLoop, waiters: list[tuple[int, asyncio.Future[None]]]
    ) -> None:
        with self._cond:
            self._futures.extend((t, loop, f) for t, f in waiters if not f.done())
            if self._futures:
                self._wake_drainer()

    def _process_for(self, loop: asyncio.AbstractEventLoop) -> SyncProcess | None:
        """The sync process answering to ``loop`` (started if needed), or None: the process
        answers to another loop that is still open, or processes are not to be had. The waiters,
        the request in flight and the process belong to the process's loop: only that loop
        touches them (or any thread, once that loop is closed)."""
        with self._cond:
            proc = self._process
            if proc is not None and not proc.closed:
                if proc.loop is loop:
                    return proc
                if not proc.loop.is_closed():
                    return None
            if self._no_process:
                return None
            # none yet, or its loop is gone (and its waiters with it)
            self._process, self._loop_waiters, self._requested = None, [], 0
        if proc is not None:
            proc.close()
        try:
            new = SyncProcess(self.wal, loop, self._answered)
        except (OSError, RuntimeError, NotImplementedError, ValueError) as exc:
            self._give_up_processes(f"could not start one ({exc})")
            return None
        with self._cond:
            if self._process is None:
                self._process = new
                return new
            other = self._process  # another thread's loop started one meanwhile
        new.close()
        return other if other.loop is loop else None

    def _give_up_processes(self, why: str) -> None:
        with self._cond:
            if self._no_process:
                return
            self._no_process = True
        _log.warning("%s: group commit by a thread from now on: sync process %s", self.wal, why)

    def _request(self) -> None:
        """Ask the loop's process for a sync covering every ticket issued so far."""
        proc = self._process
        assert proc is not None
        self._requested = self._issued
        if not proc.request(self._requested):
            self._process_ended()

    def _process_ended(self) -> None:
        """On the process's loop: it ended (idle exit, killed, failed to run). Waiters go to a
        new process, or to the thread after :data:`PROCESS_DEATHS` ends in a row without an
        answer."""
        proc = self._process
        assert proc is not None
        with self._cond:
            self._process = None
        proc.close()
        self._requested = 0
        waiters, self._loop_waiters = [w for w in self._loop_waiters if not w[1].done()], []
        if not waiters:
            self._deaths = 0  # an idle exit: nothing owed
            return
        self._deaths += 1
        if self._deaths >= PROCESS_DEATHS:
            self._give_up_processes(f"ended {self._deaths} times without answering")
        if self._process_for(proc.loop) is None:
            self._to_drainer(proc.loop, waiters)
            return
        self._loop_waiters = waiters
        self._request()  # a failed write ends here again: at most PROCESS_DEATHS deep

    def _answered(self, target: int, errno: int) -> None:
        """On the loop: the process synced (``errno`` 0) everything up to ``target``, or failed;
        ``target`` -1: it ended."""
        if target < 0:
            self._process_ended()
            return
        self._deaths = 0
        with self._cond:
            self._synced_to(target, None if errno == 0 else OSError(errno, os.strerror(errno)))
        self._requested = 0
        keep: list[tuple[int, asyncio.Future[None]]] = []
        for t, fut in self._loop_waiters:
            if fut.done():
                continue  # its session went away
            decided, error = self._outcome(t)
            if decided:
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
            with contextlib.suppress(DatabaseError):  # each waiter's own outcome below
                self.wait(target)
            with self._cond:
                keep: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
                outcomes: list[
                    tuple[asyncio.AbstractEventLoop, asyncio.Future[None], DatabaseError | None]
                ] = []
                for t, loop, fut in self._futures:
                    decided, error = self._outcome(t)
                    if decided:
                        outcomes.append((loop, fut, error))
                    else:
                        keep.append((t, loop, fut))
                self._futures = keep
            for loop, fut, error in outcomes:
                with contextlib.suppress(RuntimeError):  # a loop that closed meanwhile
                    loop.call_soon_threadsafe(_settle, fut, error)

    def _sync(self) -> None:
        self._inode = sync_wal(self.wal, self.dir, self._inode)


class SyncProcess:
    """The process (``changefeed/wal_syncer.py``) that syncs one ``-wal`` file for one event
    loop. ``on_answer(target, errno)`` is called on the loop for each answer, and
    ``on_answer(-1, 0)`` once if the process ends (it exits after a minute without requests,
    or when its input closes). Closing never blocks: a process still running then (in a slow
    sync) is reaped later, when another starts."""

    def __init__(
        self, wal: str, loop: asyncio.AbstractEventLoop, on_answer: Callable[[int, int], None]
    ) -> None:
        _sweep()
        self.loop = loop
        self.closed = False
        self._on_answer = on_answer
        self._proc = subprocess.Popen(
            [sys.executable, "-I", wal_syncer.__file__, wal],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            start_new_session=True,  # a terminal's Ctrl-C is for the server, which ends it
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._wfd = self._proc.stdin.fileno()
        self._rfd = self._proc.stdout.fileno()
        self._buffer = b""
        try:
            os.set_blocking(self._rfd, False)
            loop.add_reader(self._rfd, self._readable)
        except BaseException:
            self.closed = True
            self._proc.kill()
            self._proc.stdin.close()
            self._proc.stdout.close()
            self._proc.wait()
            raise
        with _processes_lock:
            _processes.add(self)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def request(self, target: int) -> bool:
        """Send a request; False if the process is gone."""
        try:
            os.write(self._wfd, wal_syncer.REQUEST.pack(target))
        except OSError:
            return False
        return True

    def _readable(self) -> None:
        try:
            data = os.read(self._rfd, 1 << 12)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._on_answer(-1, 0)
            return
        self._buffer += data
        size = wal_syncer.ANSWER.size
        whole = len(self._buffer) - len(self._buffer) % size
        answers, self._buffer = self._buffer[:whole], self._buffer[whole:]
        for target, errno in wal_syncer.ANSWER.iter_unpack(answers):
            self._on_answer(target, errno)

    def close(self) -> None:
        """Stop reading it and close its input (it exits at the end of its input); on the loop,
        or anywhere once the loop is closed."""
        if self.closed:
            return
        self.closed = True
        if not self.loop.is_closed():
            self.loop.remove_reader(self._rfd)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with contextlib.suppress(OSError):
            self._proc.stdin.close()
        self._proc.stdout.close()
        with _processes_lock:
            _processes.discard(self)
            if self._proc.poll() is None:
                _unreaped.append(self._proc)


#: Sync processes not closed, and closed ones that had not exited yet (see :func:`_sweep`).
_processes: set[SyncProcess] = set()
_unreaped: list[subprocess.Popen[bytes]] = []
_processes_lock = threading.Lock()
#: A loop's sync process ending this many times in a row with waiters and no answer (it cannot
#: run here) makes its ``WalSync`` sync by a thread from then on.
PROCESS_DEATHS = 3


def _sweep() -> None:
    """Close the sync processes of loops that are closed (a process that ran servers one after
    the other, as a test suite does) and reap the closed ones that have exited."""
    with _processes_lock:
        stale = [p for p in _processes if p.loop.is_closed()]
    for p in stale:
        p.close()
    with _processes_lock:
        _unreaped[:] = [p for p in _unreaped if p.poll() is None]


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
