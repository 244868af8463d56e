"""Rules for DML: ``INSERT``/``UPSERT``/``REPLACE``, ``UPDATE``, ``DELETE``, ``SELECT`` and CQL's
``BATCH``, in both dialects."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal, cast

from lark import Token, v_args

from changefeed.exceptions import StatementSyntaxError, UnsupportedFeature
from changefeed.sql import ast
from changefeed.sql.builder import with_queries
from changefeed.sql.builder.common import Clause, Rules, clauses, first, position
from changefeed.sql.builder.windows import named_windows, names_window, resolve_windows

__all__ = ["DmlRules", "select_node"]


class DmlRules(Rules):
    """Writes and reads of rows."""

    @v_args(meta=True)
    def insert(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        return ast.Insert(
            table=c[1],
            columns=cl.get("columns", ()),
            rows=cl["rows"],
            mode=c[0],
            on_conflict_do_nothing="on_conflict" in cl,
            returning=cl.get("returning", ()),
            pos=position(meta),
            on_conflict_update=cl.get("on_conflict_update"),
        )

    def insert_verb(self, c: list[Token]) -> str:
        return str(c[0]).lower()

    def insert_rows(self, c: list[tuple[ast.Expr, ...]]) -> Clause:
        return Clause("rows", tuple(c))

    def row(self, c: list[ast.Expr]) -> tuple[ast.Expr, ...]:
        return tuple(c)

    def default_values(self, c: list[Any]) -> Clause:
        return Clause("rows", ((),))  # no values: every column its default

    def default_value(self, c: list[Any]) -> ast.Expr:
        return ast.DefaultValue()

    def on_conflict(self, c: list[Any]) -> Clause:
        return Clause("on_conflict", True)

    def on_conflict_update(self, c: list[Any]) -> Clause:
        cl = clauses(c)
        return Clause(
            "on_conflict_update",
            ast.OnConflictUpdate(cl.get("columns", ()), cl["assignments"], cl.get("where")),
        )

    @v_args(meta=True)
    def cql_insert(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        using = cl.get("using", {})
        return ast.Insert(
            table=c[0],
            columns=cl["columns"],
            rows=cl["rows"],
            if_not_exists=cl.get("if_not_exists", False),
            ttl=using.get("ttl"),
            timestamp=using.get("timestamp"),
            pos=position(meta),
        )

    def cql_values(self, c: list[tuple[ast.Expr, ...]]) -> Clause:
        return Clause("rows", (c[0],))

    def using_clause(self, c: list[tuple[str, ast.Expr]]) -> Clause:
        return Clause("using", dict(c))

    def using_ttl(self, c: list[ast.Expr]) -> tuple[str, ast.Expr]:
        return ("ttl", c[0])

    def using_timestamp(self, c: list[ast.Expr]) -> tuple[str, ast.Expr]:
        return ("timestamp", c[0])

    def using_timeout(self, c: list[Any]) -> tuple[str, Any]:
        # ScyllaDB's per-statement timeout: accepted; statements here are not cut short by time
        return ("timeout", None)

    @v_args(meta=True)
    def update(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        return ast.Update(
            table=c[0],
            assignments=cl["assignments"],
            where=cl.get("where"),
            returning=cl.get("returning", ()),
            pos=position(meta),
            alias=cl.get("alias"),
            source=cl.get("other_tables"),
        )

    @staticmethod
    def _other_tables(c: list[Any], *, query: bool = False) -> Clause:
        """``UPDATE .. FROM`` / ``DELETE .. USING``: the tables as ``SELECT * FROM ..``."""
        cl = clauses([x for x in c[1:] if isinstance(x, Clause) and x.key != "join"])
        joins = tuple(x.value for x in c[1:] if isinstance(x, Clause) and x.key == "join")
        alias = cl.get("alias")
        star = (ast.SelectItem(ast.Star()),)
        if query:  # ``FROM (SELECT ..) AS x``: the query's rows, named by its alias
            name = ast.QName((alias if alias is not None else ast.Ident("?subquery?", True),))
            return Clause(
                "other_tables", ast.Select(items=star, table=name, alias=alias, joins=joins, source=c[0])
            )
        return Clause("other_tables", ast.Select(items=star, table=c[0], alias=alias, joins=joins))

    def update_from(self, c: list[Any]) -> Clause:
        return self._other_tables(c)

    def update_from_subquery(self, c: list[Any]) -> Clause:
        return self._other_tables(c, query=True)

    def delete_using(self, c: list[Any]) -> Clause:
        return self._other_tables(c)

    def delete_using_subquery(self, c: list[Any]) -> Clause:
        return self._other_tables(c, query=True)

    @v_args(meta=True)
    def cql_update(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        using = cl.get("using", {})
        return ast.Update(
            table=c[0],
            assignments=cl["assignments"],
            where=cl.get("where"),
            if_exists=cl.get("if_exists", False),
            ttl=using.get("ttl"),
            timestamp=using.get("timestamp"),
            pos=position(meta),
        )

    @v_args(meta=True)
    def truncate_tables(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.Truncate(tuple(x for x in c if isinstance(x, ast.QName)), pos=position(meta))

    def truncate_target(self, c: list[Any]) -> ast.QName:
        return cast(ast.QName, first(c, ast.QName))

    def truncate_identity(self, c: list[Any]) -> None:
        return None

    @v_args(meta=True)
    def delete(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        return ast.Delete(
            table=c[0],
            where=cl.get("where"),
            returning=cl.get("returning", ()),
            pos=position(meta),
            alias=cl.get("alias"),
            source=cl.get("other_tables"),
        )

    @v_args(meta=True)
    def cql_delete(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        using = cl.get("using", {})
        if "ttl" in using:
            raise StatementSyntaxError(
                "DELETE does not accept USING TTL", line=position(meta).line, column=position(meta).column
            )
        return ast.Delete(
            table=c[1],
            columns=c[0] or (),
            where=cl.get("where"),
            if_exists=cl.get("if_exists", False),
            timestamp=using.get("timestamp"),
            pos=position(meta),
        )

    @v_args(meta=True)
    def select(self, meta: Any, c: list[Any]) -> ast.Statement:
        return select_node(meta, c)

    def from_clause(self, c: list[Any]) -> list[Clause]:
        out = [Clause("table", c[0])]
        out.extend(x for x in c[1:] if isinstance(x, Clause) and x.key != "join")
        joins = tuple(x.value for x in c[1:] if isinstance(x, Clause) and x.key == "join")
        if joins:
            out.append(Clause("joins", joins))
        return out

    def scalar_subquery(self, c: list[Any]) -> ast.Expr:
        return ast.Subquery(c[0])

    def exists_subquery(self, c: list[Any]) -> ast.Expr:
        return ast.Subquery(c[0], "exists")

    def in_subquery(self, c: list[Any]) -> ast.Expr:
        return ast.Subquery(c[1], "in", c[0])

    def not_in_subquery(self, c: list[Any]) -> ast.Expr:
        return ast.Subquery(c[1], "in", c[0], negated=True)

    @v_args(meta=True)
    def from_index_view(self, meta: Any, c: list[Any]) -> Clause:
        """YQL's ``FROM t VIEW index``: there are no secondary indexes to read through."""
        raise StatementSyntaxError(
            "unexpected 'VIEW': secondary index views (YQL's FROM t VIEW index) are not supported",
            line=position(meta).line,
            column=position(meta).column,
        )

    def table_alias(self, c: list[Any]) -> Clause:
        return Clause("alias", first(c, ast.Ident))

    def _join(self, kind: str, c: list[Any], *, natural: bool = False) -> Clause:
        clauses = [x for x in c if isinstance(x, Clause)]
        alias = next((x.value for x in clauses if x.key == "alias"), None)
        names = next((x.value for x in clauses if x.key == "alias_columns"), None)
        target = next(x for x in c if x is not None and not isinstance(x, Clause))
        on = c[-1] if kind != "cross" and not natural else None
        using = on.value if isinstance(on, Clause) else None
        if using is not None:
            on = None
        if isinstance(target, ast.TableFunction):
            # a set-returning function: its arguments may name the columns joined before it
            source = _named_function(target, alias, names)
            name = ast.QName((alias if alias is not None else ast.Ident(source.call.name.lower(), True),))
            join = ast.Join(
                cast(ast.JoinKind, kind), name, alias, on, source=source, using=using, natural=natural
            )
            return Clause("join", join)
        if any(x.key == "lateral" for x in clauses):
            raise UnsupportedFeature("LATERAL subqueries are not supported (set-returning functions are)")
        if names is not None:
            raise UnsupportedFeature("column alias lists are supported for functions and VALUES only")
        c = [target, *(x for x in c if x is not target)]
        if isinstance(target, ast.QName):
            return Clause("join", ast.Join(kind, target, alias, on, using=using, natural=natural))  # type: ignore[arg-type]
        # ``JOIN (SELECT ..) AS x``: the query's rows, as a statement source named by its alias
        name = ast.QName((alias if alias is not None else ast.Ident("?subquery?", True),))
        join = ast.Join(kind, name, alias, on, source=c[0], using=using, natural=natural)  # type: ignore[arg-type]
        return Clause("join", join)

    def join_using(self, c: list[ast.Ident]) -> Clause:
        return Clause("using", tuple(c))

    def natural_kind(self, c: list[Token]) -> str:
        return str(c[0]).lower()

    def natural_join(self, c: list[Any]) -> Clause:
        kind = c[0] if isinstance(c[0], str) else "inner"
        return self._join(kind, [x for x in c if not isinstance(x, str) and x is not None], natural=True)

    def inner_join(self, c: list[Any]) -> Clause:
        return self._join("inner", c)

    def left_join(self, c: list[Any]) -> Clause:
        return self._join("left", c)

    def right_join(self, c: list[Any]) -> Clause:
        return self._join("right", c)

    def full_join(self, c: list[Any]) -> Clause:
        return self._join("full", c)

    def cross_join(self, c: list[Any]) -> Clause:
        return self._join("cross", c)

    def locking(self, c: list[Any]) -> None:
        return None

    @v_args(meta=True)
    def values_query(self, meta: Any, c: list[tuple[ast.Expr, ...]]) -> ast.Statement:
        return ast.Values(tuple(c), pos=position(meta))

    def alias_columns(self, c: list[ast.Ident]) -> Clause:
        return Clause("alias_columns", tuple(c))

    def from_values(self, c: list[Any]) -> list[Clause]:
        """``FROM (VALUES ..) [AS] v [(x, y)] [JOIN ..]``: the rows, named by the alias."""
        values, alias = c[0], c[1]
        names = next((x.value for x in c[2:] if isinstance(x, Clause) and x.key == "alias_columns"), ())
        joins = tuple(x.value for x in c[2:] if isinstance(x, Clause) and x.key == "join")
        out = [Clause("source", replace(values, names=names)), Clause("alias", alias)]
        if joins:
            out.append(Clause("joins", joins))
        return out

    def from_statement(self, c: list[Any]) -> Clause:
        """CockroachDB's ``FROM [<statement>]``: the statement's rows are the relation."""
        return Clause("source", c[0])

    def from_function(self, c: list[Any]) -> list[Clause]:
        """``FROM generate_series(..) [WITH ORDINALITY] [AS] x [(a, b)] [JOIN ..]``: a
        set-returning function's rows, as a statement source (``sql.statements.table_functions``)."""
        target = self.function_target(c[:2])
        clauses = [x for x in c[2:] if isinstance(x, Clause)]
        alias = next((x.value for x in clauses if x.key == "alias"), None)
        names = next((x.value for x in clauses if x.key == "alias_columns"), None)
        source = _named_function(target, alias, names)
        out = [Clause("source", source), Clause("alias", alias or ast.Ident(source.call.name.lower()))]
        joins = tuple(x.value for x in clauses if x.key == "join")
        if joins:
            out.append(Clause("joins", joins))
        return out

    def function_target(self, c: list[Any]) -> ast.TableFunction:
        call = c[0]
        if not isinstance(call, ast.FuncCall):
            raise StatementSyntaxError("a function call in FROM must be a set-returning function")
        return ast.TableFunction(call, call.name.lower(), ordinality=len(c) > 1 and c[1] is not None)

    def ordinality(self, c: list[Any]) -> Clause:
        return Clause("ordinality", True)

    def lateral(self, c: list[Any]) -> Clause:
        return Clause("lateral", True)

    def from_subquery(self, c: list[Any]) -> list[Clause]:
        """``FROM (SELECT ..) [AS] x [JOIN ..]``: the query's rows are the relation, as a statement
        source."""
        out = [Clause("source", c[0]), *(x for x in c[1:] if isinstance(x, Clause) and x.key != "join")]
        joins = tuple(x.value for x in c[1:] if isinstance(x, Clause) and x.key == "join")
        if joins:
            out.append(Clause("joins", joins))
        return out

    def set_op(self, c: list[Any]) -> tuple[str, bool]:
        words = [str(t).lower() for t in c if t is not None]
        return words[0], len(words) > 1

    @v_args(meta=True)
    def compound_select(self, meta: Any, c: list[Any]) -> ast.Statement:
        """Queries and operators, folded as PostgreSQL reads them: INTERSECT first, then UNION
        and EXCEPT from the left; the last query's ORDER BY, LIMIT and OFFSET are the whole
        result's (a query of a set operation has none of its own without parentheses)."""
        last: ast.Select = c[-1]
        queries: list[ast.Select | ast.SetOperation] = [
            *c[0::2][:-1],
            replace(last, order_by=(), limit=None, offset=None),
        ]
        ops: list[tuple[str, bool]] = list(c[1::2])
        for q in queries[:-1]:
            if isinstance(q, ast.Select) and (q.order_by or q.limit is not None or q.offset is not None):
                where = position(meta)
                raise StatementSyntaxError(
                    "ORDER BY, LIMIT or OFFSET inside a set operation needs parentheses",
                    line=where.line,
                    column=where.column,
                )
        # INTERSECT binds tighter
        folded: list[ast.Select | ast.SetOperation] = [queries[0]]
        rest: list[tuple[str, bool]] = []
        for (op, all_), q in zip(ops, queries[1:], strict=True):
            if op == "intersect":
                folded[-1] = ast.SetOperation(folded[-1], "intersect", all_, q, pos=position(meta))
            else:
                folded.append(q)
                rest.append((op, all_))
        out = folded[0]
        for (op, all_), q in zip(rest, folded[1:], strict=True):
            out = ast.SetOperation(out, op, all_, q, pos=position(meta))  # type: ignore[arg-type]
        if isinstance(out, ast.Select):  # cannot happen: there is at least one operator
            return out
        return replace(out, order_by=last.order_by, limit=last.limit, offset=last.offset)

    def with_select(self, c: list[Any]) -> ast.Statement:
        return with_queries.inline(c[1:-1], c[-1], recursive=c[0] is not None)

    def with_recursive(self, c: list[Any]) -> bool:
        return True

    def with_query(self, c: list[Any]) -> with_queries.WithQuery:
        return with_queries.WithQuery(c[0], tuple(c[1] or ()), c[2])

    def with_columns(self, c: list[ast.Ident]) -> tuple[ast.Ident, ...]:
        return tuple(c)

    def as_of(self, c: list[ast.Expr]) -> Clause:
        return Clause("as_of", c[0])

    @v_args(meta=True)
    def batch(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        using = cl.get("using", {})
        if "ttl" in using:
            raise StatementSyntaxError(
                "BATCH does not accept USING TTL", line=position(meta).line, column=position(meta).column
            )
        kind: Literal["logged", "unlogged", "counter"] = c[0] or "logged"
        return ast.Batch(cl["statements"], kind, using.get("timestamp"), pos=position(meta))

    def batch_kind(self, c: list[Token]) -> str:
        return str(c[0]).lower()

    def batch_body(self, c: list[Any]) -> Clause:
        return Clause("statements", tuple(c))


def select_node(meta: Any, c: list[Any]) -> ast.Select:
    """A ``SELECT`` from its rule's children (select list, then clauses); ``OVER w`` written out
    from its WINDOW clause."""
    cl = clauses(c)
    items = first(c, tuple)
    windows = named_windows(cl.get("windows", ()))
    if windows or names_window(items) or names_window(cl.get("order_by", ())):
        items = resolve_windows(items, windows)
        cl["order_by"] = resolve_windows(cl.get("order_by", ()), windows)
    return ast.Select(
        items=items,
        table=cl.get("table"),
        where=cl.get("where"),
        order_by=cl.get("order_by", ()),
        limit=cl.get("limit"),
        distinct=cl.get("distinct", False),
        distinct_on=cl.get("distinct_on", ()),
        allow_filtering=cl.get("allow_filtering", False),
        group_by=cl.get("group_by", ()),
        grouping_sets=cl.get("grouping_sets", ()),
        having=cl.get("having"),
        offset=cl.get("offset"),
        alias=cl.get("alias"),
        joins=cl.get("joins", ()),
        as_of=cl.get("as_of"),
        pos=position(meta),
        source=cl.get("source"),
    )


def _named_function(
    target: ast.TableFunction, alias: ast.Ident | None, names: tuple[ast.Ident, ...] | None
) -> ast.TableFunction:
    """A function in FROM with its names: a one-column function's column is the alias, else the
    function's name (``jsonb_array_elements``' is ``value``, its OUT parameter's, whatever the
    alias), and ``AS a (x, y)`` renames the first columns."""
    lower = target.call.name.lower()
    column = alias.name if alias is not None else lower
    if lower.endswith(("array_elements", "array_elements_text")):
        column = "value"
    return replace(target, column=column, names=tuple(n.name for n in names or ()))
