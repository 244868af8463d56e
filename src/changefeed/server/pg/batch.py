"""Pipelined bulk writes through the extended protocol.

A client that pipelines Bind/Execute pairs of one single-row ``INSERT``/``UPSERT`` (psycopg's
``executemany``, JDBC batches) inside an explicit transaction gets them run as one bulk write
(``Session.execute_many``, the engine's compiled bulk path, as ``Connection.executemany`` in one
process) instead of one statement each. Their replies (BindComplete, NoData, CommandComplete) are
held back and sent in the order of the messages when the batch runs: at the first message that
does not belong to it (Sync, Flush, another statement) or at :data:`BATCH_ROWS` rows.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from changefeed.connection import Result
from changefeed.server.pg import protocol as p
from changefeed.server.pg.portals import Prepared, Running, new_query_id
from changefeed.server.pg.values import normalise_tag
from changefeed.sql import ast

if TYPE_CHECKING:
    from changefeed.server.pg.session import PgSession

#: Batched Executes run once this many are waiting.
BATCH_ROWS = 4096


def batchable(session: PgSession, prep: Prepared) -> bool:
    """Executes of ``prep`` may wait to run together: a single-row INSERT/UPSERT of bound
    values without RETURNING, inside an explicit transaction (so running them together changes
    nothing a client can see: every reply comes before the transaction ends, and an error
    aborts the transaction either way)."""
    if prep.kind != "engine" or len(prep.stmts) != 1 or session.conn is None:
        return False
    stmt = prep.stmts[0]
    engine = session.conn.session
    return (
        isinstance(stmt, ast.Insert)
        and len(stmt.rows) == 1
        and not stmt.returning
        and not stmt.on_conflict_do_nothing  # its tag counts the rows each one wrote
        and engine.in_transaction
        and not engine.aborted
        and engine.statements.handler(stmt).plan_many is not None
    )


def batch_message(session: PgSession, kind: bytes, body: bytes) -> bool:
    """Take one message into the batch if it belongs there: a Bind of the batch's statement to
    the unnamed portal, a Describe or an Execute of that portal. False: the batch runs first."""
    batch = session.batch
    if batch is None:
        return False
    prep = batch.prepared
    if kind == b"B":
        if not body.startswith(b"\x00"):
            return False
        z = body.find(b"\x00", 1)
        if z < 0 or session.prepared.get(body[1:z].decode("utf-8", "replace")) is not prep:
            return False
        session.bind(body)
        batch.pending.append(p.BIND_COMPLETE)
        return True
    portal = session.portals.get("")
    if portal is None or portal.prepared is not prep or portal.result is not None:
        return False
    if kind == b"D" and body == b"P\x00":
        batch.pending.append(p.NO_DATA)
        portal.described = True
        return True
    if kind == b"E" and body.startswith(b"\x00") and len(body) == 5:
        batch.rows.append(portal.params)
        batch.replies.append(b"".join(batch.pending))
        batch.pending.clear()
        return True
    return False


def take_pipelined(session: PgSession) -> None:
    """Take into the batch the messages that belong there and have already arrived, without a
    trip through the main loop each (a pipelining client sends thousands per segment)."""
    stream = session.messages
    while session.batch is not None and len(session.batch.rows) < BATCH_ROWS:
        nxt = stream.peek()
        if nxt is None or not batch_message(session, *nxt):
            return
        stream.advance()


async def flush_batch(session: PgSession) -> None:
    """Run the batched Executes as one ``execute_many`` (the engine's bulk write, as
    ``Connection.executemany`` in one process) and send each its replies. psycopg's
    ``executemany`` and JDBC batches pipeline Bind/Execute pairs up to one Sync, so a
    1,000-row transaction costs one bulk write instead of 1,000 statements. On an error the
    first Execute gets it and the rest are skipped to Sync: the transaction is aborted, as it
    would be had one of the rows failed on its own."""
    batch, session.batch = session.batch, None
    if batch is None or session.conn is None:
        return
    prep, rows = batch.prepared, batch.rows
    engine = session.conn.session
    stmt = prep.stmts[0]
    try:
        if len(rows) == 1:  # nothing was pipelined behind it: run as any statement (inline if short)
            await session.execute(prep, rows[0])
        elif rows:
            session.cancelled.clear()
            session.running = Running(new_query_id(), prep.sql, dt.datetime.now(dt.UTC))
            try:
                await session.call(engine.execute_many, stmt, rows)
            finally:
                session.running = None
    except BaseException:
        engine.aborted = True
        if batch.replies:
            session.send(batch.replies[0])
        raise
    tag = p.command_complete(normalise_tag(Result(status="INSERT 1"), stmt))
    session.send(b"".join(r + tag for r in batch.replies))
    if batch.pending:
        session.send(b"".join(batch.pending))
