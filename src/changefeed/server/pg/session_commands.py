"""Session statements a PostgreSQL endpoint session answers itself (parsed by ``commands.py``):
SET, RESET, SHOW <variable>, SHOW ALL, DISCARD, DEALLOCATE on the session's own state, and SHOW
QUERIES / CANCEL QUERY, which span every worker of the endpoint (``sessions.Registry``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from changefeed.connection import Result
from changefeed.exceptions import ChangefeedError
from changefeed.server.pg import protocol as p
from changefeed.server.pg.commands import Command
from changefeed.server.pg.errors import InvalidValue, UndefinedQuery, UndefinedVariable
from changefeed.server.pg.sessions import QUERY_COLUMNS
from changefeed.server.pg.variables import REPORTED, defaults

if TYPE_CHECKING:
    from changefeed.server.pg.session import PgSession

__all__ = ["run_cluster_command", "run_command", "var_name"]


def var_name(variables: Mapping[str, str], name: str) -> str:
    """The session variable ``name`` names, as it is spelled among ``variables`` (names are
    case-insensitive); lower case when it is none of them."""
    low = name.lower()
    for k in variables:
        if k.lower() == low:
            return k
    return low


def _var_name(session: PgSession, name: str) -> str:
    return var_name(session.vars, name)


#: The settings of transactions' access mode (``SET SESSION CHARACTERISTICS``, ``SET
#: TRANSACTION`` and JDBC's ``setReadOnly`` set them).
READ_ONLY_VARIABLES = frozenset({"default_transaction_read_only", "transaction_read_only"})
_TRUE = frozenset({"on", "true", "yes", "1", "t", "y"})
_FALSE = frozenset({"off", "false", "no", "0", "f", "n"})


def _set_read_only(session: PgSession, name: str, said: str, value: str) -> str:
    """Apply a transaction access mode setting to the engine's session; its shown value."""
    low = value.strip().lower()
    if low not in _TRUE | _FALSE:
        raise InvalidValue(f'parameter "{said}" requires a Boolean value')
    on = low in _TRUE
    engine = session.conn.session if session.conn is not None else None
    if engine is not None:
        if name == "default_transaction_read_only":
            engine.default_read_only = on
        else:
            engine.set_read_only(on)
    return "on" if on else "off"


def run_command(session: PgSession, cmd: Command) -> Result:
    if cmd.kind == "set":
        name = _var_name(session, cmd.name)
        if name in ("server_version", "server_encoding", "is_superuser", "session_authorization"):
            raise ChangefeedError(f'parameter "{cmd.name}" cannot be changed')
        value = (
            cmd.value
            if cmd.value is not None
            else defaults(session.user, session.vars["server_version"]).get(name, "")
        )
        if name == "client_encoding" and value.upper().replace("-", "") not in ("UTF8", "UNICODE"):
            raise InvalidValue(f'invalid value for parameter "client_encoding": "{value}"')
        if name == "client_encoding":
            value = "UTF8"
        if name == "TimeZone" and value.lower() in ("utc", "etc/utc", "z", "0", "+00", "gmt"):
            value = "UTC"
        if name in READ_ONLY_VARIABLES:
            value = _set_read_only(session, name, cmd.name, value)
        session.vars[name] = value
        if name in REPORTED:
            session.send(p.parameter_status(name, value))
        return Result(status="SET")
    if cmd.kind == "reset":
        base = defaults(session.user, session.vars["server_version"])
        names = list(base) if cmd.name == "all" else [_var_name(session, cmd.name)]
        for n in names:
            if (n in base and n not in ("application_name",)) or cmd.name != "all":
                session.vars[n] = base.get(n, "")
        return Result(status="RESET")
    if cmd.kind == "show":
        name = _var_name(session, cmd.name)
        if name not in session.vars:
            raise UndefinedVariable(f'unrecognized configuration parameter "{cmd.name}"')
        return Result(columns=[cmd.name], rows=[(session.vars[name],)], types=[None], status="SHOW")
    if cmd.kind == "show_all":
        rows = [(k, v, "") for k, v in sorted(session.vars.items(), key=lambda kv: kv[0].lower())]
        return Result(columns=["name", "setting", "description"], rows=rows, types=[None] * 3, status="SHOW")
    if cmd.kind == "show_queries":  # the rows come from run_cluster_command; this shape describes it
        return Result(
            columns=list(QUERY_COLUMNS), rows=[], types=[None] * len(QUERY_COLUMNS), status="SELECT 0"
        )
    if cmd.kind == "discard":
        session.prepared.clear()
        session.sql_types.clear()
        session.portals.clear()
        return Result(status="DISCARD ALL")
    return Result(status=cmd.name or "SET")


async def run_cluster_command(session: PgSession, cmd: Command) -> Result | None:
    """SHOW QUERIES and CANCEL QUERY, which span every process of the endpoint; None for
    other commands."""
    registry = session.endpoint.registry
    if cmd.kind == "show_queries":
        return await registry.queries()
    if cmd.kind == "cancel":
        assert cmd.value is not None
        if not await registry.cancel_by_query_id(cmd.value):
            raise UndefinedQuery(f"query ID {cmd.value} not found")
        return Result(status="CANCEL QUERIES 1")
    return None
