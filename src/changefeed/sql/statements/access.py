"""Users, roles and grants: ``CREATE/ALTER/DROP USER|ROLE``, ``GRANT/REVOKE`` of table privileges
and of roles, ``ALTER DEFAULT PRIVILEGES``, ``SHOW GRANTS``. The privilege model itself (who may
do what, and CockroachDB's error texts) is ``changefeed.engine.privileges``.

Who may run these: admins; ``CREATEROLE`` holders create, alter and drop users and roles (only
admins touch admin roles), and any user may change its own password; a table's privileges are
granted by admins and by holders of ``ALL`` on it (its creator); roles by admins and members
holding the role ``WITH ADMIN OPTION``. Every change bumps the catalog version, which invalidates
cached effective privileges.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Any

import orjson

from changefeed.engine import privileges as priv
from changefeed.engine.auth import password_option
from changefeed.engine.catalog import TableSchema
from changefeed.engine.privileges import Privilege
from changefeed.engine.txn import Transaction
from changefeed.exceptions import (
    DuplicateObject,
    InvalidOption,
    InvalidStatement,
    PermissionDenied,
    UndefinedRole,
)
from changefeed.sql import ast
from changefeed.sql.evaluator import Params
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily
from changefeed.sql.statements.common import jsonable

FAMILY = StatementFamily("access")

#: Role options CockroachDB accepts (those with a meaning here are in engine.privileges).
ROLE_OPTIONS = frozenset(
    {
        "controlchangefeed", "controljob", "createrole", "createdb", "createlogin", "login",
        "viewactivity", "viewactivityredacted", "cancelquery", "modifyclustersetting",
        "viewclustersetting", "nosqllogin", "replication", "bypassrls",
    }
)  # fmt: skip
VALUE_OPTIONS = frozenset({"password", "valid"})


def role_name(i: ast.Ident) -> str:
    """User and role names are case-insensitive unless quoted, as in CockroachDB."""
    return i.name if i.quoted else i.name.lower()


def _options(session: Session, options: Iterable[ast.Option], ev: Params) -> dict[str, Any]:
    """Role options as stored: ``name: bool`` (``NOname`` stores false), ``password`` a secret."""
    out: dict[str, Any] = {}
    for key, expr in options:
        k = key.lower()
        if k in VALUE_OPTIONS:
            v = session.option_value(expr, ev)
            if k == "password":
                if v is not None and not isinstance(v, str):
                    raise InvalidOption("PASSWORD takes a string or NULL")
                out[k] = password_option(v)
            else:
                out[k] = v if v is None or isinstance(v, str) else str(v)
        elif expr is not None:
            raise InvalidOption(f"role option {key.upper()} takes no value")
        elif k in ROLE_OPTIONS:
            out[k] = True
        elif k.startswith("no") and k[2:] in ROLE_OPTIONS:
            out[k[2:]] = False
        else:
            raise InvalidOption(f"unknown role option {key.upper()}")
    return out


def _store(txn: Transaction, name: str, options: dict[str, Any]) -> None:
    txn.conn.execute(
        "INSERT INTO _users VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET options = excluded.options",
        (name, orjson.dumps(jsonable(options)).decode()),
    )
    txn.db.bump_catalog()


def _require_existing(conn: sqlite3.Connection, name: str) -> None:
    if not priv.role_exists(conn, name):
        raise UndefinedRole(f"role/user {name} does not exist")


def _check_may_manage(session: Session, txn: Transaction, target: str) -> None:
    """CREATEROLE (or admin) to manage roles; only admins manage admins."""
    me = session.privileges(txn)
    priv.check_role_option(me, priv.CREATEROLE)
    if not me.admin and priv.effective(txn.conn, target).admin:
        raise PermissionDenied(f"user {me.user} must be an admin to alter or drop the admin role {target}")


@FAMILY.statement(ast.CreateUser)
def create_user(session: Session, txn: Transaction, s: ast.CreateUser, ev: Params) -> Result:
    name = role_name(s.name)
    priv.check_role_option(session.privileges(txn), priv.CREATEROLE)
    if name == priv.PUBLIC:
        raise InvalidStatement(f'role name "{name}" is reserved')
    if priv.role_exists(txn.conn, name):
        if s.if_not_exists:
            return Result(status="CREATE ROLE")
        raise DuplicateObject(f"a role/user named {name} already exists")
    _store(txn, name, _options(session, s.options, ev))
    return Result(status="CREATE ROLE")


@FAMILY.statement(ast.AlterUser)
def alter_user(session: Session, txn: Transaction, s: ast.AlterUser, ev: Params) -> Result:
    name = role_name(s.name)
    stored = priv.role_options(txn.conn, name)
    if stored is None:
        if s.if_exists:
            return Result(status="ALTER ROLE")
        raise UndefinedRole(f"role/user {name} does not exist")
    changes = _options(session, s.options, ev)
    own_password = name == session.user and set(changes) <= {"password"}
    if not own_password:
        _check_may_manage(session, txn, name)
    if name == priv.PUBLIC or (name == priv.ROOT and set(changes) - {"password"}):
        raise InvalidStatement(f"cannot edit the role options of {name}")
    _store(txn, name, {**stored, **changes})  # root has a row only once it has a password
    return Result(status="ALTER ROLE")


@FAMILY.statement(ast.DropUser)
def drop_user(session: Session, txn: Transaction, s: ast.DropUser, ev: Params) -> Result:
    names = [role_name(i) for i in s.names]
    for name in names:
        if name in priv.BUILTIN_ROLES:
            raise InvalidStatement(f"cannot drop special role {name}")
        if name == session.user:
            raise InvalidStatement("cannot drop the current user")
    for name in names:
        if not priv.role_exists(txn.conn, name):
            if s.if_exists:
                continue
            raise UndefinedRole(f"role/user {name} does not exist")
        _check_may_manage(session, txn, name)
        # The user's grants and memberships go with it.
        txn.conn.execute("DELETE FROM _users WHERE name = ?", (name,))
        txn.conn.execute("DELETE FROM _grants WHERE grantee = ?", (name,))
        txn.conn.execute("DELETE FROM _role_members WHERE role = ? OR member = ?", (name, name))
        txn.db.bump_catalog()
    return Result(status="DROP ROLE")


# ------------------------------------------------------------------ table privileges


@FAMILY.statement(ast.Grant)
def grant(session: Session, txn: Transaction, s: ast.Grant, ev: Params) -> Result:
    privileges = [Privilege.parse(p) for p in s.privileges]
    grantees = [role_name(g) for g in s.grantees]
    for g in grantees:
        _require_existing(txn.conn, g)
    me = session.privileges(txn)
    if s.tables:
        tables = [session.resolve_table(txn, q) for q in s.tables]
        for t in tables:
            _check_may_grant(me, t, privileges)
        ids = [t.id for t in tables]
    else:
        if not me.admin:
            raise PermissionDenied(
                "only users with the admin role are allowed to ALTER DEFAULT PRIVILEGES FOR ALL ROLES"
            )
        ids = [priv.DEFAULT_PRIVILEGES_TABLE]
    for grantee in grantees:
        for tid in ids:
            for p in privileges:
                if s.revoke:
                    # REVOKE of one privilege from an ALL grant keeps the others, as in CockroachDB.
                    held = {
                        r[0]
                        for r in txn.conn.execute(
                            "SELECT privilege FROM _grants WHERE grantee = ? AND table_id = ?", (grantee, tid)
                        )
                    }
                    if p is not Privilege.ALL and Privilege.ALL.value in held:
                        txn.conn.execute(
                            "DELETE FROM _grants WHERE grantee = ? AND table_id = ? AND privilege = 'ALL'",
                            (grantee, tid),
                        )
                        txn.conn.executemany(
                            "INSERT OR IGNORE INTO _grants VALUES (?, ?, ?)",
                            [(grantee, tid, q.value) for q in priv.TABLE_PRIVILEGES],
                        )
                    rm = [p.value] if p is not Privilege.ALL else [q.value for q in Privilege]
                    txn.conn.executemany(
                        "DELETE FROM _grants WHERE grantee = ? AND table_id = ? AND privilege = ?",
                        [(grantee, tid, v) for v in rm],
                    )
                else:
                    txn.conn.execute(
                        "INSERT OR IGNORE INTO _grants VALUES (?, ?, ?)", (grantee, tid, p.value)
                    )
    txn.db.bump_catalog()
    return Result(status="REVOKE" if s.revoke else "GRANT")


def _check_may_grant(me: priv.UserPrivileges, table: TableSchema, privileges: list[Privilege]) -> None:
    """Admins and holders of ALL (a table's creator) grant anything on it; CockroachDB's texts
    otherwise: a privilege not held, or held without the grant option."""
    if me.admin or me.has(Privilege.ALL, table.id):
        return
    for p in privileges:
        if not me.has(p, table.id):
            raise priv.denied(me.user, p, table)
    shown = ", ".join(p.value for p in privileges)
    if len(privileges) > 1:
        raise PermissionDenied(
            f"user {me.user} missing WITH GRANT OPTION privilege on one or more of {shown}"
        )
    raise PermissionDenied(f"user {me.user} missing WITH GRANT OPTION privilege on {shown}")


# ------------------------------------------------------------------ roles


@FAMILY.statement(ast.GrantRole)
def grant_role(session: Session, txn: Transaction, s: ast.GrantRole, ev: Params) -> Result:
    roles = [role_name(r) for r in s.roles]
    members = [role_name(m) for m in s.members]
    for name in roles + members:
        _require_existing(txn.conn, name)
    me = session.privileges(txn)
    for role in roles:
        if role == priv.PUBLIC:
            raise InvalidStatement("role public cannot be granted or revoked: every user is a member")
        if not me.admin and not _admin_option(txn.conn, me.roles, role):
            raise PermissionDenied(f'{me.user} must have admin option on role "{role}"')
        for member in members:
            if s.revoke:
                if role == priv.ADMIN and member == priv.ROOT:
                    raise InvalidStatement(
                        "user root cannot be removed from role admin or lose the ADMIN OPTION"
                    )
                if s.admin_option:
                    txn.conn.execute(
                        "UPDATE _role_members SET admin_option = 0 WHERE role = ? AND member = ?",
                        (role, member),
                    )
                else:
                    txn.conn.execute(
                        "DELETE FROM _role_members WHERE role = ? AND member = ?", (role, member)
                    )
                continue
            if member == role:
                raise InvalidStatement(f"{role} cannot be a member of itself")
            if member in priv.memberships(txn.conn, role):
                raise InvalidStatement(f"making {member} a member of {role} would create a cycle")
            txn.conn.execute(
                "INSERT INTO _role_members VALUES (?, ?, ?) ON CONFLICT (role, member)"
                " DO UPDATE SET admin_option = MAX(admin_option, excluded.admin_option)",
                (role, member, int(s.admin_option)),
            )
    txn.db.bump_catalog()
    return Result(status="REVOKE" if s.revoke else "GRANT")


def _admin_option(conn: sqlite3.Connection, holders: Iterable[str], role: str) -> bool:
    marks = ",".join("?" * len(list(holders)))
    row = conn.execute(
        f"SELECT 1 FROM _role_members WHERE role = ? AND admin_option = 1 AND member IN ({marks})",
        (role, *holders),
    ).fetchone()
    return row is not None


# ------------------------------------------------------------------ SHOW GRANTS


@FAMILY.statement(ast.ShowGrants, write=False)
def show_grants(session: Session, txn: Transaction, s: ast.ShowGrants, ev: Params) -> Result:
    """``SHOW GRANTS ON TABLE t`` (CockroachDB's columns: database_name, schema_name,
    table_name, grantee, privilege_type, is_grantable), or every table grant, optionally only
    those of some grantees. Admins and root hold ALL on every table, as CockroachDB lists them."""
    grantees = {role_name(g) for g in s.grantees}
    tables = [session.resolve_table(txn, q) for q in s.tables] if s.tables else session.db.tables()
    rows: list[tuple[Any, ...]] = []
    for t in tables:
        db_name, _, short = t.name.rpartition(".")
        entries = {(priv.ADMIN, Privilege.ALL.value, True), (priv.ROOT, Privilege.ALL.value, True)}
        for grantee, p in txn.conn.execute(
            "SELECT grantee, privilege FROM _grants WHERE table_id = ?", (t.id,)
        ):
            entries.add((grantee, p, p == Privilege.ALL.value))
        for grantee, p, grantable in sorted(entries):
            if grantees and grantee not in grantees:
                continue
            rows.append((db_name or "defaultdb", "public", short, grantee, p, grantable))
    return Result(
        columns=["database_name", "schema_name", "table_name", "grantee", "privilege_type", "is_grantable"],
        rows=rows,
        types=[None] * 6,
        status=f"SHOW {len(rows)}",
    )
