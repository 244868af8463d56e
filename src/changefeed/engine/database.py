"""A database directory: one SQLite file (``changefeed.db``) in WAL mode, its catalog and clock.

Every writing transaction takes SQLite's write lock up front (``BEGIN IMMEDIATE``), so writers are
serialised across threads and processes and the commit timestamp allocated under that lock is the
commit order. Readers use snapshots and never block writers. A transaction that commits is in the
WAL before ``COMMIT`` returns; one that does not (rollback, exception, ``kill -9``) leaves nothing,
neither rows nor journal entries, because the journal is written in the same SQLite transaction.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from changefeed.engine.catalog import TableSchema
from changefeed.engine.cdc_streams import GENERATION_KEY
from changefeed.engine.clock import CommitTs, SystemClock, WallClock
from changefeed.engine.regions import register_functions
from changefeed.engine.storage import TableStore
from changefeed.exceptions import CorruptFile, DatabaseError, LockNotAvailable, UndefinedTable
from changefeed.sqlite_wal import Durability, WalSync, durability, use_wal, wal_sync

if TYPE_CHECKING:
    from changefeed.engine.commit_group import CommitGroup

T = TypeVar("T")

DB_FILE = "changefeed.db"
FORMAT = "changefeed-db"
#: Bumped whenever the layout of the tables in the file changes (2: nullable journal tokens,
#: 0/1 deleted flags). A file of another version is refused rather than misread.
FORMAT_VERSION = 2
#: How long a writer waits for another process's write transaction before giving up.
BUSY_TIMEOUT_MS = 60_000
#: WAL pages between automatic checkpoints (SQLite's default is 1,000): about 160 MB of WAL.
WAL_AUTOCHECKPOINT = 40_000

_BOOTSTRAP = [
    "CREATE TABLE IF NOT EXISTS _meta (key TEXT PRIMARY KEY, value)",
    "CREATE TABLE IF NOT EXISTS _clock (id INTEGER PRIMARY KEY CHECK (id = 0), wall INTEGER NOT NULL,"
    " logical INTEGER NOT NULL, txid INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS _catalog (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, spec TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS _keyspaces (name TEXT PRIMARY KEY, spec TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS _enums (name TEXT PRIMARY KEY, labels TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS _users (name TEXT PRIMARY KEY, options TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS _grants (grantee TEXT NOT NULL, table_id INTEGER NOT NULL,"
    " privilege TEXT NOT NULL, PRIMARY KEY (grantee, table_id, privilege))",
    # Role membership (changefeed.engine.privileges): GRANT role TO member [WITH ADMIN OPTION].
    "CREATE TABLE IF NOT EXISTS _role_members (role TEXT NOT NULL, member TEXT NOT NULL,"
    " admin_option INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (role, member))",
    # Changefeeds (changefeed.feeds owns the spec; the engine only needs to know they exist).
    "CREATE TABLE IF NOT EXISTS _feeds (id INTEGER PRIMARY KEY AUTOINCREMENT, table_id INTEGER NOT NULL,"
    " name TEXT NOT NULL, kind TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,"
    " created_wall INTEGER NOT NULL, created_logical INTEGER NOT NULL, created_seq INTEGER NOT NULL,"
    " UNIQUE (table_id, name))",
    # Progress the pipeline has durably delivered, per feed: protects journal rows from GC.
    "CREATE TABLE IF NOT EXISTS _progress (feed_id INTEGER PRIMARY KEY, seq INTEGER NOT NULL,"
    " wall INTEGER NOT NULL, logical INTEGER NOT NULL, updated_ns INTEGER NOT NULL, detail TEXT)",
]


def open_sqlite(path: Path, *, readonly: bool = False, group_commit: bool = False) -> sqlite3.Connection:
    """Open one of our SQLite files with the settings every connection must use.

    ``group_commit``: the caller makes each commit durable through :func:`wal_sync` (a
    :class:`Database` does); other connections that write sync at every commit themselves when
    commits are durable (``CHANGEFEED_SYNCHRONOUS``, default FULL)."""
    sync = durability()
    uri = f"file:{path}?mode={'ro' if readonly else 'rwc'}"
    try:
        conn = sqlite3.connect(
            uri,
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            timeout=BUSY_TIMEOUT_MS / 1000,
            cached_statements=256,  # bulk writes use a few texts per table and row count
        )
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if not readonly:
            mode = use_wal(conn)
            if mode != "wal":
                raise DatabaseError(f"{path}: could not switch to WAL mode (got {mode})")
        conn.execute(f"PRAGMA synchronous = {sync.pragma if group_commit else sync.pragma_unshared}")
        # Checkpoint the WAL every ~160 MB rather than SQLite's 4 MB. A checkpoint copies the latest
        # version of every page in the WAL to the database file and syncs it; on tables written in
        # hash order each transaction dirties pages all over, so the longer the interval, the more
        # rewrites of one page a checkpoint coalesces (10,000 -> 40,000 pages: +15-20% on the
        # ScyllaDB-shaped benchmark table). The cost is WAL disk space and a longer WAL scan when
        # a database is reopened after a crash (well under a second).
        conn.execute(
            f"PRAGMA wal_autocheckpoint = {int(os.environ.get('CHANGEFEED_WAL_AUTOCHECKPOINT', WAL_AUTOCHECKPOINT))}"
        )
        register_functions(conn)
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("PRAGMA cache_size = -65536")
        conn.execute("PRAGMA temp_store = MEMORY")
    except sqlite3.DatabaseError as exc:
        raise open_error(path, exc, readonly=readonly) from None
    return conn


def open_error(path: Path, exc: sqlite3.DatabaseError, *, readonly: bool = False) -> DatabaseError:
    """What is wrong when SQLite cannot use ``path``: a read-only directory, a file it cannot
    open, or a file that is not a changefeed database."""
    if isinstance(exc, sqlite3.OperationalError):
        if not readonly and not _writable(path.parent):
            return DatabaseError(
                f"database directory {path.parent} is read-only: changefeed writes {path.name} and its "
                f"journal files there ({exc})"
            )
        if "unable to open" in str(exc):
            return DatabaseError(f"{path}: cannot open the database file ({exc})")
    return CorruptFile(f"{path}: not a readable changefeed database file ({exc})")


def _writable(directory: Path) -> bool:
    """Whether this process can create files in ``directory`` (tried: root ignores mode bits)."""
    probe = directory / f".changefeed-write-check-{os.getpid()}-{threading.get_ident()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError:
        return False
    return True


#: The file beside a database that writers of several processes lock when the gate is shared.
GATE_FILE_SUFFIX = "-writers"


class WriteGate:
    """The lock this process's writers of one database file queue on before ``BEGIN IMMEDIATE``.

    SQLite's busy handler lets a writer that finds the file locked sleep 1, 2, 5, 10 .. ms before
    trying again, while a typical transaction holds the lock for a tenth of a millisecond: with a
    few connections writing at once (a server's sessions), most of their time went to those sleeps.
    Writers of one process wait on a thread lock instead and start the moment the previous one
    ends. Processes that serve one database together (the PostgreSQL endpoint's workers) also
    share the gate across processes (:func:`share_write_gate`): after the thread lock, a writer
    takes an exclusive ``flock`` of ``changefeed.db-writers``, which the kernel hands to the next
    waiter the moment it is released (and releases itself if its holder dies). A writer of a
    process that does not share the gate still meets the others at SQLite's lock."""

    def __init__(self, file: str, shared: bool, bell: tuple[int, int] | None = None) -> None:
        self.lock = threading.Lock()
        self.path = file + GATE_FILE_SUFFIX
        self.shared = shared
        self._fd = -1
        self._bell = bell if shared and bell is not None else (-1, -1)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self.lock.acquire(blocking, timeout):
            return False
        if not self.shared:
            return True
        try:
            if self._fd < 0:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            # One thread of this process waits here at a time (the others wait on the thread
            # lock, with its timeout); the holder is a transaction of another worker, which ends
            # when its client commits or goes away, as PostgreSQL's lock waits do.
            fcntl.flock(self._fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.lock.release()
            return False
        except BaseException:
            self.lock.release()
            raise
        return True

    def release(self) -> None:
        try:
            if self.shared and self._fd >= 0:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self.lock.release()
        self._ring()

    def bell(self) -> int:
        """A shared gate's doorbell: the read end of a non-blocking pipe that every process
        sharing the gate inherited (see :func:`share_write_gate`), -1 if there is none. Every
        release writes a byte to it, so a writer of another process that waits on an event loop
        (``server.gate_wait``) wakes the moment the gate is free, without a thread blocking on
        the lock for it (a thread that takes the lock must then wait for its interpreter lock
        while every writer of every process waits for it). A full pipe (nobody waiting) drops
        the byte; waiters drain the pipe before they look."""
        return self._bell[0]

    def _ring(self) -> None:
        fd = self._bell[1]  # -1: not shared, or no bell
        if fd >= 0:
            with contextlib.suppress(OSError):  # full: the waiters have a byte to wake on already
                os.write(fd, b"\0")


_gates: dict[str, WriteGate] = {}
_gates_lock = threading.Lock()
_shared_gates = False
_gate_bell: tuple[int, int] | None = None


def share_write_gate(shared: bool, bell: tuple[int, int] | None = None) -> None:
    """Share the write gates this process makes from now on with the other processes that do
    (see :class:`WriteGate`); the PostgreSQL endpoint's workers call it before opening anything.
    ``bell``: (read, write) ends of a non-blocking pipe all of them share, rung at each release
    (see :meth:`WriteGate.bell`)."""
    global _shared_gates, _gate_bell
    _shared_gates = shared
    _gate_bell = bell


def write_gate(file: Path) -> WriteGate:
    """The :class:`WriteGate` of this process for the SQLite file ``file``."""
    key = os.path.realpath(file)
    with _gates_lock:
        gate = _gates.get(key)
        if gate is None:
            gate = _gates[key] = WriteGate(key, _shared_gates, _gate_bell)
        return gate


class CommitSignal:
    """Wakes this process's waiters when a transaction of this process commits on a file (the
    pipeline of a node waits on it: a change written through an endpoint is delivered at once,
    without waiting for a poll). Commits of other processes are found by polling."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.count = 0

    def notify(self) -> None:
        with self._cond:
            self.count += 1
            self._cond.notify_all()

    def wait(self, seen: int, timeout: float) -> int:
        """Wait until a commit after the one numbered ``seen`` (at most ``timeout`` s); returns the
        latest commit number."""
        with self._cond:
            if self.count == seen:
                self._cond.wait(timeout)
            return self.count


_signals: dict[str, CommitSignal] = {}


def commit_signal(file: Path) -> CommitSignal:
    """The :class:`CommitSignal` of ``file`` in this process."""
    key = os.path.realpath(file)
    with _gates_lock:
        sig = _signals.get(key)
        if sig is None:
            sig = _signals[key] = CommitSignal()
        return sig


class Database:
    """One open database directory: a SQLite connection plus cached catalog."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True, clock: WallClock | None = None):
        self.path = Path(path)
        self.clock: WallClock = clock or SystemClock()
        self.lock = threading.RLock()
        self._check_dir(create)
        self.file = self.path / DB_FILE
        self.write_gate = write_gate(self.file)
        self.commit_signal = commit_signal(self.file)
        #: False: a write transaction that would wait for another writer of this process raises
        #: LockNotAvailable instead (a server's event loop runs short statements itself and must
        #: never block).
        self.writers_wait = True
        #: How commits become durable (``CHANGEFEED_SYNCHRONOUS``): with group commit, every
        #: commit waits for ``syncer`` before it is acknowledged.
        self.durability: Durability = durability()
        self.syncer: WalSync | None = wal_sync(self.file) if self.durability.group_commit else None
        #: True: commits do not wait to be durable; the highest ticket not waited for is left in
        #: ``pending_durable`` for the caller, who must wait for it before acknowledging anything
        #: (the PostgreSQL endpoint awaits it on its event loop before it writes a reply).
        self.defer_durable = False
        self.pending_durable = 0
        #: The commit group open on this connection, if any: its write transactions run inside
        #: it (``engine.commit_group``).
        self.group: CommitGroup | None = None
        #: SQLite's busy timeout on ``conn`` now (a writer that must not wait sets it to 0 and
        #: leaves it so until a transaction that may wait needs it back).
        self.busy_timeout_ms = BUSY_TIMEOUT_MS
        self.conn = open_sqlite(self.file, group_commit=True)
        try:
            self._bootstrap()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise open_error(self.file, exc) from None
        self._catalog_version = -1
        self.catalog_changed = False
        self._tables: dict[int, TableSchema] = {}
        self._by_name: dict[str, int] = {}
        self._stores: dict[tuple[int, int], TableStore] = {}
        self.enums: dict[str, tuple[str, ...]] = {}
        self.keyspaces: set[str] = set()

    # ------------------------------------------------------------------ opening
    def _check_dir(self, create: bool) -> None:
        p = self.path
        if p.exists() and not p.is_dir():
            raise DatabaseError(f"{p} is not a directory, so it cannot be a changefeed database")
        if not p.exists():
            if not create:
                raise DatabaseError(f"database directory {p} does not exist")
            p.mkdir(parents=True, exist_ok=True)  # another process may be making it too
            return
        if not (p / DB_FILE).exists():
            # Another process may be creating the database right now: its file is not foreign.
            foreign = [x.name for x in p.iterdir() if not x.name.startswith((".", DB_FILE))]
            if foreign and not create:
                raise DatabaseError(f"{p} is not a changefeed database (no {DB_FILE})")
            if foreign:
                raise DatabaseError(
                    f"{p} is not a changefeed database: it has no {DB_FILE} but holds other files "
                    f"({', '.join(sorted(foreign)[:3])}{'...' if len(foreign) > 3 else ''})"
                )

    def _bootstrap(self) -> None:
        c = self.conn
        if self._check_format():
            return
        # A new file. Another process may be bootstrapping it too: decide under the write lock.
        c.execute("BEGIN IMMEDIATE")
        try:
            if self._check_format():
                c.execute("COMMIT")
                return
            if c.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise CorruptFile(f"{self.file}: an SQLite file that is not a changefeed database")
            for stmt in _BOOTSTRAP:
                c.execute(stmt)
            c.execute(
                "INSERT OR IGNORE INTO _meta VALUES ('format', ?), ('version', ?), ('catalog_version', 0)",
                (FORMAT, FORMAT_VERSION),
            )
            c.execute("INSERT OR IGNORE INTO _clock VALUES (0, 0, 0, 0)")
            # The ScyllaDB CDC generation of this one-node store starts with the database.
            c.execute(
                "INSERT OR IGNORE INTO _meta VALUES (?, ?)",
                (GENERATION_KEY, self.clock.now_ns() // 1_000_000),
            )
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise
        self.sync()

    def _check_format(self) -> bool:
        """True when the file is a changefeed database of this version; False when it has no
        ``_meta`` yet; an error when it is another format or version."""
        try:
            row = self.conn.execute("SELECT value FROM _meta WHERE key = 'format'").fetchone()
        except sqlite3.OperationalError:
            return False
        if row is None:
            return False
        if row[0] != FORMAT:
            raise CorruptFile(f"{self.file}: not a changefeed database (format {row[0]!r})")
        version = self.conn.execute("SELECT value FROM _meta WHERE key = 'version'").fetchone()
        if version is None or version[0] != FORMAT_VERSION:
            found = "no" if version is None else repr(version[0])
            raise DatabaseError(
                f"{self.file}: database format version {found}, but this changefeed reads version "
                f"{FORMAT_VERSION}; export it with the version that wrote it, or recreate it"
            )
        return True

    def close(self) -> None:
        self.conn.close()
        if self.syncer is not None:
            self.syncer.release_reserve()

    # ------------------------------------------------------------------ durability
    def wait_for_locks(self) -> None:
        """Give ``conn`` back SQLite's busy timeout before a statement that may wait for another
        process's lock (a short write of a server may have left it at 0)."""
        if self.busy_timeout_ms != BUSY_TIMEOUT_MS:
            self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self.busy_timeout_ms = BUSY_TIMEOUT_MS

    def begin_immediate_nowait(self) -> None:
        """``BEGIN IMMEDIATE`` without SQLite's busy wait: a writer in another process holds the
        file, so LockNotAvailable (nothing done) instead of sleeping. The timeout stays 0 for
        the transaction (it holds the write lock: nothing in it waits) and after it, until a
        transaction that may wait sets it back: one statement less per short write."""
        if self.busy_timeout_ms != 0:
            self.conn.execute("PRAGMA busy_timeout = 0")
            self.busy_timeout_ms = 0
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise LockNotAvailable("another process is writing") from None
            raise

    def commit_intent(self, wrote: bool = True) -> None:
        """Called right before ``COMMIT`` (see ``WalSync.announce``); ``wrote``: the transaction
        holds SQLite's write lock (it began with ``BEGIN IMMEDIATE``), so nothing else writes
        the WAL and its zeros may be kept ahead (``WalSync.reserve``). A read-only transaction
        holds no lock: another connection may be appending frames at the WAL's end."""
        if self.syncer is not None:
            if wrote:
                self.syncer.reserve()
            self.syncer.announce()

    def commit_withdrawn(self) -> None:
        """The ``COMMIT`` announced by :meth:`commit_intent` failed."""
        if self.syncer is not None:
            self.syncer.withdraw()

    def commit_sqlite(self, *, wrote: bool = True) -> int:
        """``COMMIT`` the connection's SQLite transaction, announced to the durability board
        (:meth:`commit_intent`, withdrawn if it fails); returns the ticket to
        :meth:`wait_durable` on."""
        self.commit_intent(wrote=wrote)
        try:
            self.conn.execute("COMMIT")
        except BaseException:
            self.commit_withdrawn()
            raise
        return self.commit_ticket()

    def run_if_free(self, fn: Callable[..., T], *args: Any) -> tuple[bool, T | None]:
        """``(True, fn(*args))`` if its write transactions find the write lock free; ``(False,
        None)`` if one found it held (by another thread or process), which refuses at once,
        before changing anything, instead of waiting (:attr:`writers_wait`): ``LockNotAvailable``
        is raised only there, when a transaction starts. For an event loop that runs short
        statements itself and must never block; its callers then wait another way
        (``server.gate_wait.run_inline``). ``fn`` runs one transaction: a refusal after an
        earlier commit of its own would be taken for one before it."""
        before, self.writers_wait = self.writers_wait, False
        try:
            return True, fn(*args)
        except LockNotAvailable:
            return False, None
        finally:
            self.writers_wait = before

    def commit_ticket(self) -> int:
        """Right after a ``COMMIT`` of this connection returned: the ticket to :meth:`wait_durable`
        on (0 when commits are not made durable here)."""
        return self.syncer.ticket() if self.syncer is not None else 0

    def wait_durable(self, ticket: int) -> None:
        """Return once the commit that took ``ticket`` survives power loss (group commit: one
        sync of the WAL for every commit waiting at that moment). Call it without holding the
        write lock, so the next writers commit while this one syncs."""
        if ticket and self.syncer is not None:
            if self.defer_durable:
                self.pending_durable = max(self.pending_durable, ticket)
            else:
                self.syncer.wait(ticket)

    def sync(self) -> None:
        """Make every commit already in the database's WAL durable (no-op under NORMAL/OFF)."""
        if self.syncer is not None:
            self.syncer.barrier()

    # ------------------------------------------------------------------ clock
    def allocate_ts(self) -> tuple[CommitTs, int]:
        """Inside a write transaction: the next commit timestamp and transaction id."""
        ts, txid, _ = self.begin_write()
        return ts, txid

    def begin_write(self) -> tuple[CommitTs, int, int]:
        """Inside a write transaction: the next commit timestamp, transaction id and the
        catalog version, in one statement (what :meth:`refresh_catalog` reads first)."""
        if self.group is not None:
            return self.group.stamp(self.clock.now_ns())
        # CommitTs.next in one statement (SET expressions read the row as it was).
        ((wall, logical, txid, version),) = self.conn.execute(
            "UPDATE _clock SET logical = CASE WHEN ?1 > wall THEN 0 ELSE logical + 1 END,"
            " wall = max(wall, ?1), txid = txid + 1 WHERE id = 0 RETURNING wall, logical, txid,"
            " (SELECT value FROM _meta WHERE key = 'catalog_version')",
            (self.clock.now_ns(),),
        ).fetchall()
        return CommitTs(wall, logical), txid, version

    def close_timestamp(self) -> tuple[CommitTs, int]:
        """Commit an empty write transaction and return its (CommitTs, txid): every later commit gets
        a larger timestamp, and every commit at or below it is visible to snapshots taken after."""
        with self.lock:
            self.wait_for_locks()
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                ts, txid = self.allocate_ts()
                ticket = self.commit_sqlite()
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
        self.wait_durable(ticket)
        return ts, txid

    def last_ts(self) -> CommitTs:
        wall, logical = self.conn.execute("SELECT wall, logical FROM _clock WHERE id = 0").fetchone()
        return CommitTs(wall, logical)

    # ------------------------------------------------------------------ catalog
    def refresh_catalog(self, version: int | None = None) -> None:
        """Reload the catalog if another connection changed it (cheap when it did not);
        ``version``: the catalog version already read in this transaction."""
        if version is None:
            version = self.conn.execute("SELECT value FROM _meta WHERE key = 'catalog_version'").fetchone()[0]
        if version == self._catalog_version:
            return
        tables: dict[int, TableSchema] = {}
        by_name: dict[str, int] = {}
        for tid, name, spec in self.conn.execute("SELECT id, name, spec FROM _catalog"):
            try:
                schema = TableSchema.from_json(orjson.loads(spec))
            except (ValueError, KeyError, TypeError) as exc:
                raise CorruptFile(
                    f"{self.file}: catalog entry for table {name!r} is corrupt ({exc})"
                ) from None
            tables[tid] = schema
            by_name[name] = tid
        self._tables, self._by_name = tables, by_name
        self.enums = {
            n: tuple(orjson.loads(labels))
            for n, labels in self.conn.execute("SELECT name, labels FROM _enums")
        }
        self.keyspaces = {n for (n,) in self.conn.execute("SELECT name FROM _keyspaces")}
        self._catalog_version = version

    @property
    def catalog_version(self) -> int:
        """The catalog version last read by :meth:`refresh_catalog`; -1 after a change not yet re-read."""
        return self._catalog_version

    def bump_catalog(self) -> None:
        self.conn.execute("UPDATE _meta SET value = value + 1 WHERE key = 'catalog_version'")
        self._catalog_version = -1
        #: Set until the transaction ends: a rollback must drop what was cached at the new version.
        self.catalog_changed = True

    def tables(self) -> list[TableSchema]:
        return sorted(self._tables.values(), key=lambda s: s.name)

    def table_by_id(self, tid: int) -> TableSchema:
        try:
            return self._tables[tid]
        except KeyError:
            raise UndefinedTable(f"table id {tid} does not exist") from None

    def find_table(self, name: str) -> TableSchema | None:
        tid = self._by_name.get(name)
        if tid is None:
            lowered = name.lower()
            matches = [i for n, i in self._by_name.items() if n.lower() == lowered]
            if len(matches) != 1:
                return None
            tid = matches[0]
        return self._tables[tid]

    def store(self, schema: TableSchema) -> TableStore:
        k = (schema.id, schema.version)
        st = self._stores.get(k)
        if st is None:
            st = TableStore(schema)
            self._stores[k] = st
        return st

    def save_table(self, schema: TableSchema) -> None:
        self.conn.execute(
            "INSERT INTO _catalog (id, name, spec) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET name = excluded.name, spec = excluded.spec",
            (schema.id, schema.name, orjson.dumps(schema.to_json()).decode()),
        )
        self.bump_catalog()

    def delete_table(self, schema: TableSchema) -> None:
        self.conn.execute("DELETE FROM _catalog WHERE id = ?", (schema.id,))
        self.conn.execute("DELETE FROM _grants WHERE table_id = ?", (schema.id,))
        self.bump_catalog()

    def next_table_id(self) -> int:
        row = self.conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM _catalog").fetchone()
        seq = self.conn.execute("SELECT value FROM _meta WHERE key = 'next_table_id'").fetchone()
        nid = max(int(row[0]), int(seq[0]) if seq else 1)
        self.conn.execute(
            "INSERT INTO _meta VALUES ('next_table_id', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (nid + 1,),
        )
        return nid

    def meta(self, key: str) -> Any:
        r = self.conn.execute("SELECT value FROM _meta WHERE key = ?", (key,)).fetchone()
        return None if r is None else r[0]

    def cluster_id(self) -> str:
        """This database's cluster id (a UUID, CockroachDB's ``crdb_internal.cluster_id()``),
        made on first use; call inside a write transaction the first time."""
        got = self.meta("cluster_id")
        if got is None:
            import uuid

            self.conn.execute("INSERT OR IGNORE INTO _meta VALUES ('cluster_id', ?)", (str(uuid.uuid4()),))
            got = self.meta("cluster_id")
        return str(got)
