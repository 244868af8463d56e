"""Users, roles and grants: ``CREATE USER|ROLE``, ``GRANT``/``REVOKE``."""

from __future__ import annotations

import orjson

from changefeed.engine.auth import password_option
from changefeed.engine.txn import Transaction
from changefeed.exceptions import DuplicateObject
from changefeed.sql import ast
from changefeed.sql.evaluator import Params
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily
from changefeed.sql.statements.common import jsonable

FAMILY = StatementFamily("access")


@FAMILY.statement(ast.CreateUser)
def create_user(session: Session, txn: Transaction, s: ast.CreateUser, ev: Params) -> Result:
    name = session.ident(s.name)
    if txn.conn.execute("SELECT 1 FROM _users WHERE name = ?", (name,)).fetchone():
        if s.if_not_exists:
            return Result(status="CREATE ROLE")
        raise DuplicateObject(f'role "{name}" already exists')
    opts = {k.lower(): session.option_value(v, ev) for k, v in s.options}
    if "password" in opts:
        opts["password"] = password_option(opts["password"])
    txn.conn.execute("INSERT INTO _users VALUES (?, ?)", (name, orjson.dumps(jsonable(opts)).decode()))
    return Result(status="CREATE ROLE")


@FAMILY.statement(ast.Grant)
def grant(session: Session, txn: Transaction, s: ast.Grant, ev: Params) -> Result:
    tables = [session.resolve_table(txn, q) for q in s.tables] if s.tables else []
    ids = [t.id for t in tables] or [0]  # table id 0: default privileges for tables created later
    for g in s.grantees:
        grantee = session.ident(g)
        for tid in ids:
            for p in s.privileges:
                priv = p.upper()
                if s.revoke:
                    txn.conn.execute(
                        "DELETE FROM _grants WHERE grantee = ? AND table_id = ? AND privilege = ?",
                        (grantee, tid, priv),
                    )
                else:
                    txn.conn.execute("INSERT OR IGNORE INTO _grants VALUES (?, ?, ?)", (grantee, tid, priv))
    return Result(status="REVOKE" if s.revoke else "GRANT")
