"""PostgreSQL's implicit transaction of the extended protocol: the Executes a client pipelines
before one Sync, outside a transaction block, run in one transaction committed at the Sync (rolled
back after an error), so a failing row of psycopg's ``executemany`` or a JDBC batch rolls back the
rows before it too and nothing of the pipeline is half-applied."""

from __future__ import annotations

from typing import TYPE_CHECKING

from changefeed.server.pg.portals import Prepared
from changefeed.server.pg.protocol import CLIENT_GONE
from changefeed.sql import ast

if TYPE_CHECKING:
    from changefeed.server.pg.session import PgSession

__all__ = ["begin", "end"]


async def begin(session: PgSession, prep: Prepared, *, at_describe: bool = False) -> None:
    """Before a write's Execute (or Describe, which runs it) outside a transaction block: unless
    it is alone before a Sync that has already arrived (pgbench, most single statements: it runs
    as a transaction of its own, in a commit group), open the implicit transaction."""
    if session.implicit or session.conn is None or prep.kind != "engine" or len(prep.stmts) != 1:
        return
    if not isinstance(prep.stmts[0], ast.Insert | ast.Update | ast.Delete):
        return
    engine = session.conn.session
    if engine.in_transaction:
        return
    # Alone before its Sync, and the Sync here already: a transaction of its own. (Its own
    # Execute is still to come after its Describe.)
    executes, synced = session.messages.executes_before_sync()
    if synced and executes <= int(at_describe):
        return
    await session.call(engine.begin)
    session.implicit = True


async def end(session: PgSession) -> None:
    """At Sync: commit the implicit transaction, or roll it back after an error; a commit's own
    error is sent before the ReadyForQuery."""
    session.implicit = False
    assert session.conn is not None
    engine = session.conn.session
    if not engine.in_transaction:
        return
    if engine.aborted:
        await session.call(engine.rollback)
        return
    try:
        await session.call(engine.commit)
    except CLIENT_GONE:
        raise
    except Exception as exc:
        session.send_error(exc)
