"""What a Describe tells before a statement runs: its parameters' types, and its result's
columns (a SELECT or catalog query run with NULL parameters, read-only; a write's RETURNING
shape; a core changefeed's three columns)."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from changefeed.exceptions import ChangefeedError, UndefinedObject
from changefeed.server.pg import session_commands, type_lookup, types as t
from changefeed.server.pg.errors import UndefinedStatement
from changefeed.server.pg.params import param_count, param_types
from changefeed.server.pg.portals import Prepared
from changefeed.server.pg.values import column_oids
from changefeed.sql import ast
from changefeed.sql.statements.dml import returning_shape

if TYPE_CHECKING:
    from changefeed.server.pg.session import PgSession

__all__ = ["param_types_of", "result_columns"]


def param_types_of(session: PgSession, prep: Prepared, n: int) -> list[int]:
    """The OIDs a Describe of statement ``prep`` gives its ``n`` parameters."""
    if prep.kind == "catalog" and type_lookup.is_type_lookup(prep.sql):
        return list(type_lookup.PARAM_OIDS)
    if prep.kind != "engine" or len(prep.stmts) != 1 or session.conn is None or n == 0:
        return [t.TEXT] * n
    session.conn.db.refresh_catalog()
    return param_types(prep.stmts[0], session.conn.db.tables(), n)


async def result_columns(session: PgSession, prep: Prepared) -> list[tuple[str, int]]:
    """Columns of a statement's result without running it: SELECTs (and catalog queries, which
    only read) are run with NULL parameters in a read-only way; others return no rows."""
    if prep.kind == "stream":
        return [("table", t.TEXT), ("key", t.BYTEA), ("value", t.BYTEA)]
    if prep.kind == "command" and prep.command is not None and prep.command.kind == "execute":
        executed = session.prepared.get(prep.command.name)
        if executed is None:
            raise UndefinedStatement(f'prepared statement "{prep.command.name}" does not exist')
        return await result_columns(session, executed)
    if prep.kind == "command" and prep.command is not None and prep.command.kind.startswith("show"):
        shown = session_commands.run_command(session, prep.command)
        return [(c, t.TEXT) for c in shown.columns]
    stmt = prep.stmts[-1] if prep.stmts else None
    if prep.kind == "engine" and isinstance(stmt, ast.Insert | ast.Update | ast.Delete | ast.UpsertSelect):
        conn = session.conn
        assert conn is not None
        write = stmt

        def describe_returning() -> list[tuple[str, int]]:
            try:
                res = conn.session.run(lambda txn: returning_shape(conn.session, txn, write), write=False)
            except UndefinedObject:
                raise  # a missing table or column: PostgreSQL says so when it is prepared
            except ChangefeedError:
                return []  # the statement's own error when it runs
            return list(zip(res.columns, column_oids(res.types, [], len(res.columns)), strict=True))

        return await session.call(describe_returning)
    if prep.kind == "catalog" or (
        prep.kind == "engine" and isinstance(prep.stmts[-1], ast.Select | ast.Show | ast.SetOperation)
    ):
        params = [None] * max(param_count(prep.sql), len(prep.param_oids))
        assert session.conn is not None
        aborted = session.conn.session.aborted
        try:
            res = await session.execute(prep, params)
        except UndefinedObject:
            raise  # a missing table, column or function, whatever the parameters
        except (ChangefeedError, sqlite3.Error, ValueError, TypeError):
            return []
        finally:
            session.conn.session.aborted = aborted
        if res is None:
            return []
        oids = column_oids(res.types, res.rows, len(res.columns))
        return list(zip(res.columns, oids, strict=True))
    return []
