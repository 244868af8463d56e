"""The Python API of DESIGN.md's interface contract: ``changefeed.connect`` and ``Connection``."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from changefeed.engine.clock import WallClock
from changefeed.engine.database import Database
from changefeed.engine.privileges import check_login
from changefeed.exceptions import InvalidStatement, TransactionError
from changefeed.sql.parser import parse
from changefeed.sql.result import Result
from changefeed.sql.statements import open_session

if TYPE_CHECKING:
    from changefeed.pipeline.sinkless import CoreChangefeed

__all__ = ["Connection", "Result", "connect"]


#: The path that asks for a database of the connection's own, as sqlite3 takes it.
MEMORY = ":memory:"


class Connection:
    """A session on one database directory, in the ``sql`` or ``cql`` dialect."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        user: str = "root",
        dialect: str = "sql",
        clock: WallClock | None = None,
    ) -> None:
        #: ``:memory:`` (as sqlite3 reads it): a database of this connection's own, in a
        #: temporary directory removed when it closes.
        self._scratch = os.fspath(path) == MEMORY
        self.path = Path(tempfile.mkdtemp(prefix="changefeed-memory-")) if self._scratch else Path(path)
        try:
            self.db = Database(self.path, clock=clock)
        except BaseException:
            self._remove_scratch()
            raise
        try:
            check_login(self.db.conn, user)
            self.session = open_session(self.db, user=user, dialect=dialect)
        except BaseException:
            self.db.close()
            self._remove_scratch()
            raise
        self._closed = False

    @property
    def dialect(self) -> str:
        return self.session.dialect

    @property
    def user(self) -> str:
        return self.session.user

    def _check(self) -> None:
        if self._closed:
            raise TransactionError("the connection is closed")

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Result:
        """Run one statement (or several separated by ';') and return the last one's result."""
        last = Result()
        for res in self.execute_script(sql, params):
            last = res
        return last

    def execute_script(self, sql: str, params: Sequence[Any] | None = None) -> Iterator[Result]:
        """Run each statement of ``sql`` in turn, yielding its result; stops at the first error."""
        from changefeed.sql.statements.crdb_feeds import is_core_changefeed, run_bounded

        self._check()
        for stmt in parse(sql, self.session.dialect):  # type: ignore[arg-type]
            if is_core_changefeed(stmt):  # CockroachDB core changefeed: only when it ends by itself
                yield run_bounded(self.session, stmt, params or ())
                continue
            yield self.session.execute(stmt, params or ())

    def stream(self, sql: str, params: Sequence[Any] | None = None) -> CoreChangefeed:
        """Run a CockroachDB core changefeed (``EXPERIMENTAL CHANGEFEED FOR t ..``, or ``CREATE
        CHANGEFEED FOR t ..`` without ``INTO``) and iterate its messages ``(table, key, value)``
        as they commit; closing the iterator (``close()``, or leaving a ``with`` block) cancels it."""
        from changefeed.sql.statements.crdb_feeds import is_core_changefeed, start_core

        self._check()
        stmts = parse(sql, self.session.dialect)  # type: ignore[arg-type]
        if len(stmts) != 1 or not is_core_changefeed(stmt := stmts[0]):
            raise InvalidStatement(
                "stream() takes one core changefeed statement: EXPERIMENTAL CHANGEFEED FOR t [WITH ..] "
                "or CREATE CHANGEFEED FOR t [WITH ..] / CREATE CHANGEFEED [WITH ..] AS SELECT .. without INTO"
            )
        return start_core(self.session, stmt, params or ())

    def executemany(self, sql: str, seq_of_params: Iterable[Sequence[Any]]) -> Result:
        """Run one statement once per parameter tuple, all in one transaction."""
        self._check()
        stmts = parse(sql, self.session.dialect)  # type: ignore[arg-type]
        if len(stmts) != 1:
            raise TransactionError("executemany takes exactly one statement")
        stmt = stmts[0]
        own = not self.session.in_transaction
        if own:
            self.session.begin()
        try:
            total = self.session.execute_many(stmt, seq_of_params)
        except BaseException:
            if own:
                self.session.rollback()
            raise
        if own:
            self.session.commit()
        return Result(status=f"{total}", rowcount=total)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """``with conn.transaction():`` commits on a clean exit and rolls back on an exception."""
        self._check()
        self.session.begin()
        try:
            yield self
        except BaseException:
            self.session.rollback()
            raise
        self.session.commit()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self.session.close()
                self.db.close()
            finally:
                self._remove_scratch()

    def _remove_scratch(self) -> None:
        if self._scratch:
            shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    path: str | os.PathLike[str], user: str = "root", dialect: str = "sql", *, clock: WallClock | None = None
) -> Connection:
    """Open (creating if needed) the database directory ``path``; ``":memory:"``: a database of
    the connection's own, gone when it closes (a temporary directory, as its changefeeds' runners
    and the endpoints need files)."""
    return Connection(path, user=user, dialect=dialect, clock=clock)
