"""Short autocommit writes of one process's sessions, committed together (a commit group,
``engine.commit_group``).

Eight pgbench clients upserting single rows spend most of a statement's time around the write,
not in it: the write gate, ``BEGIN IMMEDIATE``, the ``COMMIT``, the hand-over to the durability
sync, and each session's own SQLite connection reading again the pages the previous commit of
another connection changed. Here a session that is not in a transaction block hands its short
``INSERT``/``UPSERT``/``UPDATE``/``DELETE`` (``inline.runs_inline``) to its process's
:class:`WriteGroup` instead; the statements that arrive while the loop is busy, or while
another process holds the write gate, run one after the other on one SQLite connection in one
SQLite transaction, each in a savepoint of its own (its own commit timestamp, change rows,
result or error), and commit with one ``COMMIT`` and one durable sync, as PostgreSQL's group
commit shares one WAL flush among the backends that commit together.

What a client sees is what it sees of separate transactions: each statement commits on its own
(an error fails it alone and changes nothing of it), in the order the group ran them, and its
reply waits until the group's commit is durable. A session alone in its process never waits for
company: it runs its statement itself, as before. A group that cannot get the write gate for
``gate_wait.ON_LOOP_S`` (another session's transaction block holds it) gives its statements back
to their sessions, which wait for the gate their own way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from changefeed.engine.commit_group import CommitGroup
from changefeed.engine.database import Database
from changefeed.exceptions import LockNotAvailable
from changefeed.server import gate_wait
from changefeed.server.pg.values import normalise_tag
from changefeed.sql import ast
from changefeed.sql.result import Result
from changefeed.sql.session import Session
from changefeed.sql.statements import open_session

__all__ = ["GROUP_MAX", "WriteGroup", "groups"]

#: At most this many statements in one commit group (the later ones wait for the next).
GROUP_MAX = 64


def groups(stmts: Sequence[ast.Statement]) -> bool:
    """Whether a short statement (``inline.runs_inline``) may run in a commit group: one write
    of rows (what may run in an autocommit transaction of its own and touch nothing else)."""
    return len(stmts) == 1 and isinstance(stmts[0], ast.Insert | ast.Update | ast.Delete)


@dataclass(frozen=True, slots=True)
class _Member:
    user: str
    stmt: ast.Statement
    params: Sequence[Any]
    own: Database  # the session's connection: its reply waits for the group's ticket there
    done: asyncio.Future[Result | None]
    bound: Callable[[], ast.Statement] | None = None  # ``Session.execute``'s


class WriteGroup:
    """The commit groups of one process's sessions on ``path`` (see the module docstring)."""

    def __init__(self, path: Path, pool: Executor) -> None:
        self.path = path
        self.pool = pool
        self.db: Database | None = None
        self._sessions: dict[str, Session] = {}
        self._queue: list[_Member] = []
        self._runner: asyncio.Task[None] | None = None
        #: Statements run and groups committed (for tests and benchmarks).
        self.statements = 0
        self.commits = 0

    async def run(
        self,
        user: str,
        stmt: ast.Statement,
        params: Sequence[Any],
        own: Database,
        bound: Callable[[], ast.Statement] | None = None,
    ) -> Result | None:
        """Run ``stmt`` for a session of ``user`` in the next commit group; its result once the
        group committed (its reply must still wait for ``own.pending_durable``), or None: the
        group could not get the write gate soon, the session runs the statement itself."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Result | None] = loop.create_future()
        self._queue.append(_Member(user, stmt, params, own, done, bound))
        if self._runner is None or self._runner.done():
            self._runner = loop.create_task(self._drain())
        return await done

    async def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None and not runner.done():
            runner.cancel()
            with contextlib.suppress(BaseException):
                await runner
        self._give_back()
        db, self.db = self.db, None
        if db is not None:
            db.close()

    async def _drain(self) -> None:
        try:
            await self._run_groups()
        except asyncio.CancelledError:
            self._give_back()
            raise
        except Exception as exc:  # never leave a session waiting for an answer
            members, self._queue = self._queue, []
            self._fail(members, exc)

    async def _run_groups(self) -> None:
        loop = asyncio.get_running_loop()
        if self.db is None:
            self.db = await loop.run_in_executor(self.pool, Database, self.path)
            self.db.writers_wait = False  # never block the loop: LockNotAvailable instead
            self.db.defer_durable = True
        db = self.db
        # The sessions whose statements arrived with this one's (ready in this turn of the loop)
        # queue up before the group begins.
        await asyncio.sleep(0)
        waited_since = 0.0
        while self._queue:
            try:
                group = CommitGroup.begin(db)
            except LockNotAvailable:
                now = loop.time()
                waited_since = waited_since or now
                if now - waited_since >= gate_wait.ON_LOOP_S:
                    self._give_back()
                    return
                await gate_wait.released(db.write_gate)
                continue
            except Exception as exc:
                self._fail(self._take(), exc)
                continue
            waited_since = 0.0
            self._commit(group, self._take())

    def _take(self) -> list[_Member]:
        members = [m for m in self._queue[:GROUP_MAX] if not m.done.done()]  # cancelled: gone
        del self._queue[:GROUP_MAX]
        return members

    def _commit(self, group: CommitGroup, members: list[_Member]) -> None:
        outcomes: list[Result | BaseException] = []
        try:
            for m in members:
                try:
                    res = self._session(m.user).execute(m.stmt, m.params, bound=m.bound)
                    res.status = normalise_tag(res, m.stmt)
                    outcomes.append(res)
                except Exception as exc:  # that member's alone (its savepoint is rolled back)
                    outcomes.append(exc)
            ticket = group.commit()
        except BaseException as exc:
            group.rollback()
            self._fail(members, exc)
            if not isinstance(exc, Exception):
                raise
            return
        self.statements += len(members)
        self.commits += 1
        for m, outcome in zip(members, outcomes, strict=True):
            if m.done.done():
                continue  # its session went away; committed all the same
            if isinstance(outcome, BaseException):
                m.done.set_exception(outcome)
            else:
                m.own.pending_durable = max(m.own.pending_durable, ticket)
                m.done.set_result(outcome)

    def _session(self, user: str) -> Session:
        session = self._sessions.get(user)
        if session is None:
            assert self.db is not None
            session = self._sessions[user] = open_session(self.db, user=user, dialect="sql")
        return session

    @staticmethod
    def _fail(members: list[_Member], exc: BaseException) -> None:
        for m in members:
            if not m.done.done():
                m.done.set_exception(exc)

    def _give_back(self) -> None:
        members, self._queue = self._queue, []
        for m in members:
            if not m.done.done():
                m.done.set_result(None)
