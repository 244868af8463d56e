"""Rules for Apache Phoenix (issue 11): column families, Phoenix table properties, ``CREATE``/``DROP
CDC``, ``UPSERT INTO .. SELECT`` and hinted ``SELECT``."""

from __future__ import annotations

from typing import Any

from lark import v_args

from changefeed.sql import ast
from changefeed.sql.builder.common import Clause, Rules, clauses, first, position
from changefeed.sql.builder.ddl import (
    ColumnThenKey,
    column_def_node,
    create_table_node,
    flatten_column_then_key,
)
from changefeed.sql.builder.dml import select_node

__all__ = ["PhoenixRules"]


class PhoenixRules(Rules):
    """Apache Phoenix's own statement forms."""

    def phoenix_family_column(self, c: list[Any]) -> ast.ColumnDef:
        col = column_def_node(c[1:])
        return ast.FamilyColumnDef(
            name=col.name,
            type=col.type,
            primary_key=col.primary_key,
            not_null=col.not_null,
            default=col.default,
            family=c[0],
        )

    def phoenix_immutable(self, c: list[Any]) -> Clause:
        return Clause("immutable", True)

    def phoenix_props(self, c: list[ast.PhoenixProperty]) -> Clause:
        return Clause("phoenix_props", tuple(c))

    def phoenix_prop(self, c: list[Any]) -> ast.PhoenixProperty:
        if c[1] is None:
            return ast.PhoenixProperty(c[0], c[2])
        return ast.PhoenixProperty(c[1], c[2], family=c[0])

    def phoenix_column_pk(self, c: list[Any]) -> ColumnThenKey:
        return ColumnThenKey((c[0], ast.PrimaryKey(partition=c[-1])))

    @v_args(meta=True)
    def phoenix_create_table(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        table = create_table_node(meta, flatten_column_then_key(c))
        return ast.PhoenixCreateTable(
            table, cl.get("phoenix_props", ()), bool(cl.get("immutable")), pos=position(meta)
        )

    def phoenix_set(self, c: list[ast.PhoenixProperty]) -> ast.AlterAction:
        return ast.PhoenixSetProperties(tuple(c))

    def cdc_include(self, c: list[ast.Ident]) -> Clause:
        return Clause("include", tuple(c))

    @v_args(meta=True)
    def create_cdc(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        idents = [x for x in c if isinstance(x, ast.Ident)]
        return ast.CreateCdc(
            name=idents[0],
            table=first(c, ast.QName),
            include=cl.get("include"),
            properties=cl.get("phoenix_props", ()),
            if_not_exists=cl.get("if_not_exists", False),
            pos=position(meta),
        )

    @v_args(meta=True)
    def drop_cdc(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        return ast.DropCdc(
            first(c, ast.Ident), first(c, ast.QName), cl.get("if_exists", False), pos=position(meta)
        )

    @v_args(meta=True)
    def upsert_select(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        return ast.UpsertSelect(
            c[1],
            cl.get("columns", ()),
            next(x for x in c if isinstance(x, ast.Select | ast.SetOperation)),
            pos=position(meta),
            mode=c[0],
            on_conflict_do_nothing="on_conflict" in cl,
            returning=cl.get("returning", ()),
            on_conflict_update=cl.get("on_conflict_update"),
        )

    @v_args(meta=True)
    def hinted_select(self, meta: Any, c: list[Any]) -> ast.Statement:
        hint = str(c[0])[3:-2].strip()
        return ast.HintedSelect(select_node(meta, c[1:]), hint, pos=position(meta))
