"""SQL's PREPARE, EXECUTE and DEALLOCATE, as PostgreSQL runs them: ``PREPARE name [(types)] AS
statement`` keeps the statement under ``name`` in the session's prepared statements, the same
ones the extended protocol's Parse names (a name both use is 42P05); ``EXECUTE name [(args)]``
runs it with the arguments' values (each evaluated as a SELECT item, then cast to its parameter's
declared type), its result and tag the statement's own; ``DEALLOCATE name | ALL`` forgets it
(26000 for a name that is not prepared)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from changefeed.connection import Result
from changefeed.server.pg import describe
from changefeed.server.pg.commands import Command
from changefeed.server.pg.errors import DuplicateStatement, UndefinedStatement, WrongParameterCount
from changefeed.server.pg.params import param_count
from changefeed.server.pg.portals import Prepared
from changefeed.server.pg.types import oid_of

if TYPE_CHECKING:
    from changefeed.server.pg.session import PgSession

#: A type's modifiers: ``(10, 2)`` of ``numeric(10, 2)``.
_TYPMOD = re.compile(r"\(\s*\d+\s*(?:,\s*\d+\s*)?\)")

__all__ = ["deallocate", "execute", "prepare", "prepared_of", "split_list"]


async def prepare(session: PgSession, cmd: Command) -> Result:
    """``PREPARE``: the statement classified (its errors now, as PostgreSQL's) and kept."""
    assert cmd.value is not None
    if cmd.name in session.prepared:
        raise DuplicateStatement(f'prepared statement "{cmd.name}" already exists')
    types = split_list(cmd.args) if cmd.args is not None else []
    prep = await session.call(session.classify, cmd.value)
    if types:
        oids = await session.call(_oids_of, session, types)
        prep = prep.retyped(oids)
    await describe.result_columns(session, prep)  # a missing table or column: 42P01 / 42703 now
    session.prepared[cmd.name] = prep
    session.sql_types[cmd.name] = types
    return Result(status="PREPARE")


def _oids_of(session: PgSession, types: list[str]) -> list[int]:
    """The OIDs of declared parameter types (42704 for a type that does not exist)."""
    prep = session.classify("SELECT " + ", ".join(f"CAST(NULL AS {t})" for t in types))
    assert session.conn is not None
    res = session.conn.session.execute(prep.stmts[0], [])
    return [oid_of(t) for t in res.types]


def prepared_of(session: PgSession, name: str) -> Prepared:
    prep = session.prepared.get(name)
    if prep is None:
        raise UndefinedStatement(f'prepared statement "{name}" does not exist')
    return prep


async def execute(session: PgSession, cmd: Command) -> Result | None:
    """``EXECUTE``: the prepared statement run with the arguments' values."""
    prep = prepared_of(session, cmd.name)
    expected = max(param_count(prep.sql), len(prep.param_oids))
    args: list[Any] = []
    if cmd.args is not None and cmd.args.strip():
        got = await session.execute(await session.call(session.classify, f"SELECT {cmd.args}"), [])
        assert got is not None
        args = list(got.rows[0])
    if len(args) != expected:
        err = WrongParameterCount(f'wrong number of parameters for prepared statement "{cmd.name}"')
        err.detail = f"Expected {expected} parameters but got {len(args)}."
        raise err
    # each cast to its declared type (its modifiers aside, which parameters do not keep)
    declared = [_TYPMOD.sub("", t) for t in session.sql_types.get(cmd.name, [])]
    if declared:
        casts = ", ".join(f"CAST(${i + 1} AS {t})" for i, t in enumerate(declared))
        cast = await session.execute(await session.call(session.classify, f"SELECT {casts}"), args)
        assert cast is not None
        args[: len(declared)] = list(cast.rows[0])
    return await session.execute(prep, args)


def deallocate(session: PgSession, name: str) -> Result:
    """``DEALLOCATE name`` (26000 if not prepared) or ``DEALLOCATE ALL``."""
    if name == "all":
        session.prepared.clear()
        session.sql_types.clear()
        return Result(status="DEALLOCATE ALL")
    prepared_of(session, name)
    del session.prepared[name]
    session.sql_types.pop(name, None)
    return Result(status="DEALLOCATE")


def split_list(text: str) -> list[str]:
    """A comma-separated list as written, split at its top-level commas (not within quotes or
    parentheses): ``numeric(10, 2), text`` is two items."""
    items: list[str] = []
    depth, start, quote = 0, 0, ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return [x for x in items if x]
