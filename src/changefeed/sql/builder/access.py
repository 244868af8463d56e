"""Rules for access control: users and roles, ``GRANT``/``REVOKE`` (privileges, roles, default
privileges), ``SHOW GRANTS``."""

from __future__ import annotations

from typing import Any

from lark import Token, v_args

from changefeed.exceptions import StatementSyntaxError
from changefeed.sql import ast
from changefeed.sql.builder.common import Clause, Rules, clauses, first, position

__all__ = ["AccessRules"]


class AccessRules(Rules):
    """Users and roles, privileges, role membership."""

    @v_args(meta=True)
    def create_user(self, meta: Any, c: list[Any]) -> ast.Statement:
        options = tuple(x for x in c if isinstance(x, tuple) and not isinstance(x, Clause))
        return ast.CreateUser(
            first(c, ast.Ident), clauses(c).get("if_not_exists", False), options, pos=position(meta)
        )

    def role_opt(self, c: list[Any]) -> ast.Option:
        return (str(c[0]).lower(), c[1])

    def privileges(self, c: list[str]) -> tuple[str, ...]:
        return tuple(c)

    def privilege(self, c: list[Token]) -> str:
        word = str(c[0]).upper()
        return word

    def _grant(self, meta: Any, c: list[Any], revoke: bool, default: bool) -> ast.Grant:
        privileges: tuple[str, ...] = c[0]
        grantees: tuple[ast.Ident, ...] = c[-1]
        tables = () if default else tuple(x for x in c if isinstance(x, ast.QName))
        return ast.Grant(privileges, tables, grantees, revoke=revoke, pos=position(meta))

    @v_args(meta=True)
    def grant(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._grant(meta, c, revoke=False, default=False)

    @v_args(meta=True)
    def revoke(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._grant(meta, c, revoke=True, default=False)

    @v_args(meta=True)
    def default_grant(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._grant(meta, c, revoke=False, default=True)

    @v_args(meta=True)
    def default_revoke(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._grant(meta, c, revoke=True, default=True)

    # -- DROP/ALTER USER, role membership, SHOW GRANTS ----------------------------------------
    @v_args(meta=True)
    def drop_user(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.DropUser(first(c, tuple), clauses(c).get("if_exists", False), pos=position(meta))

    @v_args(meta=True)
    def alter_user(self, meta: Any, c: list[Any]) -> ast.Statement:
        options = tuple(x for x in c if isinstance(x, tuple) and not isinstance(x, Clause))
        return ast.AlterUser(
            first(c, ast.Ident), options, clauses(c).get("if_exists", False), pos=position(meta)
        )

    def with_admin_option(self, c: list[Any]) -> Clause:
        return Clause("admin_option", True)

    def _grant_role(self, meta: Any, c: list[Any], revoke: bool) -> ast.GrantRole:
        roles = tuple(ast.Ident(p.lower(), False) for p in next(x for x in c if isinstance(x, tuple)))
        members: tuple[ast.Ident, ...] = [x for x in c if isinstance(x, tuple)][-1]
        admin = clauses(c).get("admin_option", False)
        return ast.GrantRole(roles, members, revoke=revoke, admin_option=admin, pos=position(meta))

    @v_args(meta=True)
    def revoke_admin_option(self, meta: Any, c: list[Any]) -> ast.Statement:
        if c[0] != "ADMIN":
            raise StatementSyntaxError(
                f"expected ADMIN OPTION FOR, found {c[0]} OPTION FOR", line=meta.line, column=meta.column
            )
        g = self._grant_role(meta, c[1:], revoke=True)
        return ast.GrantRole(g.roles, g.members, revoke=True, admin_option=True, pos=g.pos)

    @v_args(meta=True)
    def grant_role(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._grant_role(meta, c, revoke=False)

    @v_args(meta=True)
    def revoke_role(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._grant_role(meta, c, revoke=True)

    def grants_on(self, c: list[Any]) -> Clause:
        return Clause("tables", tuple(c))

    def grants_for(self, c: list[Any]) -> Clause:
        return Clause("grantees", c[0])

    @v_args(meta=True)
    def show_grants(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        return ast.ShowGrants(cl.get("tables", ()), cl.get("grantees", ()), pos=position(meta))
