"""Several single-statement transactions committed as one SQLite transaction (a commit group).

A server's event loop runs short autocommit writes of many sessions one after the other; each of
them alone would take the write gate, ``BEGIN IMMEDIATE``, allocate its commit timestamp, write,
``COMMIT`` and hand its commit to the durability sync. In a group they share everything but the
middle: the group takes the gate and begins once, every member runs as a :class:`Transaction`
inside a savepoint of the group's SQLite transaction (its own commit timestamp and transaction id,
its own change rows; an error rolls back to the savepoint and fails that member alone), and one
``COMMIT`` makes all of them visible at once, with one durability ticket for all.

Members are serialized in the order they ran, as separate transactions would be; none is
acknowledged before the group's ``COMMIT`` is durable, so a failure of the ``COMMIT`` (or of
SQLite's transaction under a member: a full disk or an I/O error ends it) fails every member,
and nothing of any of them is committed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from changefeed.engine.clock import CommitTs
from changefeed.exceptions import DatabaseError, LockNotAvailable

if TYPE_CHECKING:
    from changefeed.engine.database import Database

__all__ = ["MEMBER_SAVEPOINT", "CommitGroup"]

#: The savepoint each member runs in (a name no client can use: clients' savepoints live only
#: in their own explicit transactions, which never run in a group).
MEMBER_SAVEPOINT = '"changefeed member"'


class CommitGroup:
    """An open commit group on ``db`` (see the module docstring): :meth:`begin` it, run each
    member as a :class:`~changefeed.engine.txn.Transaction` on ``db`` (which finds the group in
    ``db.group``), then :meth:`commit` (or :meth:`rollback`) it."""

    def __init__(self, db: Database) -> None:
        self.db = db
        #: What members asked to run once they are committed, in their order.
        self.after_commit: list[Callable[[], None]] = []
        self._open = False
        #: The clock as the last member left it (written back at commit), and as it was when
        #: the running member began (what its rollback restores).
        self._clock = self._mark = (CommitTs(0), 0)
        self._version: Any = None

    @classmethod
    def begin(cls, db: Database) -> CommitGroup:
        """Take ``db``'s write gate and begin the group's SQLite transaction without waiting:
        ``LockNotAvailable`` (nothing done) when another writer holds either."""
        if db.group is not None:
            raise DatabaseError("a commit group is already open on this connection")
        if not db.write_gate.acquire(blocking=False):
            raise LockNotAvailable("another transaction is writing")
        try:
            db.begin_immediate_nowait()
        except BaseException:
            db.write_gate.release()
            raise
        group = cls(db)
        try:
            ((wall, logical, txid, version),) = db.conn.execute(
                "SELECT wall, logical, txid, (SELECT value FROM _meta WHERE key = 'catalog_version')"
                " FROM _clock WHERE id = 0"
            ).fetchall()
        except BaseException:
            db.conn.execute("ROLLBACK")
            db.write_gate.release()
            raise
        group._clock = group._mark = (CommitTs(wall, logical), txid)
        group._version = version
        group._open = True
        db.group = group
        return group

    # ------------------------------------------------------------------ members
    def enter(self) -> None:
        """A member's transaction begins: its savepoint."""
        if not self._open or not self.db.conn.in_transaction:
            # SQLite ended the group's transaction under an earlier member (SQLITE_FULL,
            # SQLITE_IOERR ..): a savepoint now would begin a transaction of its own.
            raise DatabaseError("the commit group's transaction has ended; nothing of it is committed")
        self.db.conn.execute(f"SAVEPOINT {MEMBER_SAVEPOINT}")
        self._mark = self._clock

    def stamp(self, now_ns: int) -> tuple[CommitTs, int, int]:
        """A member's commit timestamp, transaction id and the catalog version
        (``Database.begin_write``): the clock's next reading, kept here and written back once
        at commit instead of by each member."""
        ts, txid = self._clock
        self._clock = (ts.next(now_ns), txid + 1)
        return self._clock[0], self._clock[1], self._version

    def leave(self, after_commit: list[Callable[[], None]]) -> None:
        """A member committed: its work stays in the group's transaction."""
        if self.db.catalog_changed:
            # Its members' timestamps were read with the catalog version as the group began.
            raise DatabaseError("a commit group runs writes of rows only, not schema changes")
        self.db.conn.execute(f"RELEASE {MEMBER_SAVEPOINT}")
        self.after_commit += after_commit

    def undo(self) -> None:
        """A member rolled back: everything it did goes (its timestamp too), the group's
        transaction goes on."""
        self._clock = self._mark
        if self.db.conn.in_transaction:
            self.db.conn.execute(f"ROLLBACK TO {MEMBER_SAVEPOINT}")
            self.db.conn.execute(f"RELEASE {MEMBER_SAVEPOINT}")

    # ------------------------------------------------------------------ the group
    def commit(self) -> int:
        """Commit every member at once; returns the durability ticket to wait for before any
        member is acknowledged (``Database.commit_ticket``). Raises (and commits nothing) if
        the group's transaction ended under a member or the ``COMMIT`` fails."""
        db = self.db
        try:
            if not db.conn.in_transaction:
                raise DatabaseError("the commit group's transaction has ended; nothing of it is committed")
            ts, txid = self._clock
            db.conn.execute(
                "UPDATE _clock SET wall = ?, logical = ?, txid = ? WHERE id = 0", (ts.wall, ts.logical, txid)
            )
            ticket = db.commit_sqlite()
        except BaseException:
            self._end(rollback=True)
            raise
        self._end(rollback=False)
        db.commit_signal.notify()
        after, self.after_commit = self.after_commit, []
        for fn in after:
            fn()
        return ticket

    def rollback(self) -> None:
        """Roll every member back."""
        self._end(rollback=True)

    def _end(self, *, rollback: bool) -> None:
        if not self._open:
            return
        self._open = False
        try:
            if rollback and self.db.conn.in_transaction:
                self.db.conn.execute("ROLLBACK")
        finally:
            self.db.group = None
            self.db.write_gate.release()
