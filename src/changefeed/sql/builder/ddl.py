"""Rules for DDL: ``CREATE``/``DROP``/``ALTER TABLE`` (both dialects, Phoenix's forms of ``CREATE
TABLE`` included), keyspaces and databases, ``USE``, ``CREATE TYPE .. AS ENUM``."""

from __future__ import annotations

from typing import Any

from lark import Token, v_args

from changefeed.exceptions import StatementSyntaxError, UnsupportedFeature
from changefeed.sql import ast
from changefeed.sql.builder.common import Clause, Rules, clauses, first, position, unquote_single

__all__ = ["ColumnThenKey", "DdlRules", "column_def_node", "create_table_node", "flatten_column_then_key"]


class DdlRules(Rules):
    """Tables, keyspaces and databases, enums."""

    @v_args(meta=True)
    def create_table(self, meta: Any, c: list[Any]) -> ast.Statement:
        phoenix_pk = any(isinstance(x, ColumnThenKey) for x in c)
        table = create_table_node(meta, flatten_column_then_key(c))
        if phoenix_pk or phoenix_only(table):  # Apache Phoenix (issue 11): a Phoenix table
            return ast.PhoenixCreateTable(table, pos=table.pos)
        return table

    @v_args(meta=True)
    def cql_create_table(self, meta: Any, c: list[Any]) -> ast.Statement:
        return create_table_node(meta, c)

    def column_def(self, c: list[Any]) -> ast.ColumnDef:
        return column_def_node(c)

    def cq_primary_key(self, c: list[Any]) -> Clause:
        return Clause("primary_key", True)

    def cq_not_null(self, c: list[Any]) -> Clause:
        return Clause("not_null", True)

    def cq_null(self, c: list[Any]) -> Clause:
        return Clause("not_null", False)

    def cq_default(self, c: list[ast.Expr]) -> Clause:
        return Clause("default", c[0])

    def cq_computed(self, c: list[Any]) -> Clause:
        return Clause("computed", (c[0], c[1] == "VIRTUAL"))

    def computed_kind(self, c: list[Token]) -> str:
        return str(c[0]).upper()

    def unique_def(self, c: list[Any]) -> Any:
        raise UnsupportedFeature(
            "UNIQUE constraints are not supported: a table's only unique key is its primary key"
        )

    def foreign_key_def(self, c: list[Any]) -> Any:
        raise UnsupportedFeature("foreign keys are not supported")

    def check_def(self, c: list[Any]) -> Any:
        raise UnsupportedFeature("CHECK constraints are not supported")

    def create_index(self, c: list[Any]) -> Any:
        raise UnsupportedFeature(
            "secondary indexes are not supported (CREATE INDEX): a read by anything but the"
            " primary key scans the table"
        )

    def cq_family(self, c: list[ast.Ident]) -> Clause:
        return Clause("family", c[0])

    def pk_def(self, c: list[Any]) -> ast.PrimaryKey:
        return ast.PrimaryKey(partition=c[-1])

    def pk_cols(self, c: list[ast.Ident]) -> tuple[ast.Ident, ...]:
        return tuple(c)

    def pk_col(self, c: list[Any]) -> ast.Ident:
        name: ast.Ident = c[0]  # the ASC/DESC that may follow is irrelevant to the key
        return name

    def family_def(self, c: list[Any]) -> ast.FamilyDef:
        return ast.FamilyDef(c[0], c[1])

    def table_with(self, c: list[ast.Option]) -> Clause:
        return Clause("options", tuple(c))

    def cql_column_def(self, c: list[Any]) -> ast.ColumnDef:
        return ast.ColumnDef(name=c[0], type=c[1], static=c[2] is not None, primary_key=c[3] is not None)

    def static(self, c: list[Any]) -> bool:
        return True

    def inline_pk(self, c: list[Any]) -> bool:
        return True

    def cql_pk_def(self, c: list[Any]) -> ast.PrimaryKey:
        return ast.PrimaryKey(partition=c[0], clustering=tuple(c[1:]))

    def pk_partition(self, c: list[Any]) -> tuple[ast.Ident, ...]:
        return c[0] if isinstance(c[0], tuple) else (c[0],)

    def cql_table_props(self, c: list[Any]) -> list[Clause]:
        options = tuple(x for x in c if isinstance(x, tuple) and not isinstance(x, Clause))
        order: tuple[ast.ClusteringOrder, ...] = ()
        for x in c:
            if isinstance(x, Clause):
                order += x.value
        return [Clause("options", options), Clause("clustering_order", order)]

    def clustering_order(self, c: list[ast.ClusteringOrder]) -> Clause:
        return Clause("clustering_order", tuple(c))

    def clustering_item(self, c: list[Any]) -> ast.ClusteringOrder:
        return ast.ClusteringOrder(c[0], descending=c[1] == "DESC")

    @v_args(meta=True)
    def create_keyspace(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        options = tuple(x for x in c if isinstance(x, tuple) and not isinstance(x, Clause))
        return ast.CreateKeyspace(
            first(c, ast.Ident), cl.get("if_not_exists", False), options, pos=position(meta)
        )

    @v_args(meta=True)
    def create_database(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        return ast.CreateKeyspace(first(c, ast.Ident), cl.get("if_not_exists", False), pos=position(meta))

    @v_args(meta=True)
    def drop_keyspace(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.DropKeyspace(first(c, ast.Ident), clauses(c).get("if_exists", False), pos=position(meta))

    drop_database = drop_keyspace

    @v_args(meta=True)
    def drop_table(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.DropTable(first(c, ast.QName), clauses(c).get("if_exists", False), pos=position(meta))

    def drop_behavior(self, c: list[Any]) -> None:
        return None

    @v_args(meta=True)
    def use_ks(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.UseKeyspace(first(c, ast.Ident), pos=position(meta))

    use_db = use_ks

    @v_args(meta=True)
    def create_enum(self, meta: Any, c: list[Any]) -> ast.Statement:
        labels = tuple(unquote_single(str(t)) for t in c if isinstance(t, Token))
        return ast.CreateEnum(
            first(c, ast.QName), labels, clauses(c).get("if_not_exists", False), pos=position(meta)
        )

    # ALTER TABLE
    @v_args(meta=True)
    def alter_table(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.AlterTable(c[0], tuple(c[1:]), pos=position(meta))

    @v_args(meta=True)
    def cql_alter_table(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.AlterTable(c[0], tuple(c[1]), pos=position(meta))

    def add_column(self, c: list[Any]) -> ast.AlterAction:
        return ast.AddColumn(first(c, ast.ColumnDef), clauses(c).get("if_not_exists", False))

    def drop_column(self, c: list[Any]) -> ast.AlterAction:
        return ast.DropColumn(first(c, ast.Ident), clauses(c).get("if_exists", False))

    def add_changefeed(self, c: list[Any]) -> ast.AlterAction:
        return ast.AddChangefeed(c[0], tuple(c[1:]))

    def drop_changefeed(self, c: list[Any]) -> ast.AlterAction:
        return ast.DropChangefeed(c[0])

    def set_options(self, c: list[ast.Option]) -> ast.AlterAction:
        return ast.SetOptions(tuple(c))

    def cql_add(self, c: list[ast.ColumnDef]) -> list[ast.AlterAction]:
        return [ast.AddColumn(x) for x in c]

    def cql_drop(self, c: list[Any]) -> list[ast.AlterAction]:
        names = c[0] if isinstance(c[0], tuple) else (c[0],)
        return [ast.DropColumn(x) for x in names]

    def cql_set_props(self, c: list[ast.Option]) -> list[ast.AlterAction]:
        return [ast.SetOptions(tuple(c))]


def create_table_node(meta: Any, c: list[Any]) -> ast.CreateTable:
    """A ``CREATE TABLE`` from its rule's children (column definitions, key, families, clauses)."""
    cl = clauses(c)
    pks = [x for x in c if isinstance(x, ast.PrimaryKey)]
    if len(pks) > 1:
        raise StatementSyntaxError(
            "more than one PRIMARY KEY clause", line=position(meta).line, column=position(meta).column
        )
    return ast.CreateTable(
        name=first(c, ast.QName),
        columns=tuple(x for x in c if isinstance(x, ast.ColumnDef)),
        primary_key=pks[0] if pks else None,
        families=tuple(x for x in c if isinstance(x, ast.FamilyDef)),
        options=cl.get("options", ()),
        clustering_order=cl.get("clustering_order", ()),
        if_not_exists=cl.get("if_not_exists", False),
        pos=position(meta),
    )


def column_def_node(c: list[Any]) -> ast.ColumnDef:
    """A column definition: name, type, then its qualifications (``PRIMARY KEY``, ``NOT NULL``..)."""
    q = clauses(c[2:])
    computed = q.get("computed")
    return ast.ColumnDef(
        name=c[0],
        type=c[1],
        primary_key=q.get("primary_key", False),
        not_null=q.get("not_null", False),
        default=q.get("default"),
        computed=computed[0] if computed else None,
        virtual=bool(computed and computed[1]),
        family=q.get("family"),
    )


class ColumnThenKey(tuple[Any, ...]):
    """Phoenix's ``v BIGINT CONSTRAINT pk PRIMARY KEY (k)``: a column, then the key, no comma."""


def flatten_column_then_key(c: list[Any]) -> list[Any]:
    """``c`` with each :class:`ColumnThenKey` spread into its column and its key."""
    out: list[Any] = []
    for x in c:
        out.extend(x) if isinstance(x, ColumnThenKey) else out.append(x)
    return out


def phoenix_only(table: ast.CreateTable) -> bool:
    """Apache Phoenix (issue 11): whether a CREATE TABLE uses syntax only Phoenix has: a column in
    a named column family (``B.vb INTEGER``) or a Phoenix-only type (``TINYINT``, ``UNSIGNED_INT``,
    ``VARBINARY``, ``BINARY(n)``...)."""
    from changefeed.engine.phoenix_types import is_phoenix_only_type

    return any(
        isinstance(cd, ast.FamilyColumnDef) or is_phoenix_only_type(cd.type.name) for cd in table.columns
    )
