"""Rules for changefeeds: CockroachDB's ``CREATE CHANGEFEED`` (table targets or ``AS SELECT``),
``EXPERIMENTAL CHANGEFEED FOR``, and its changefeed jobs, external connections and zone
configurations."""

from __future__ import annotations

from typing import Any

from lark import Token, v_args

from changefeed.sql import ast
from changefeed.sql.builder.common import (
    Clause,
    Rules,
    clauses,
    first,
    option_value,
    position,
    unquote_single,
)

__all__ = ["ChangefeedRules"]


class ChangefeedRules(Rules):
    """CockroachDB changefeeds and their jobs."""

    @v_args(meta=True)
    def create_changefeed(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        return ast.CreateChangefeed(c[0], cl.get("sink"), cl.get("options", ()), pos=position(meta))

    @v_args(meta=True)
    def create_changefeed_query(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = clauses(c)
        tok = c[-1]
        return ast.CreateChangefeed(
            (),
            cl.get("sink"),
            cl.get("options", ()),
            pos=position(meta),
            query=str(tok).rstrip(),
            query_pos=ast.Pos(tok.line or 0, tok.column or 0),
        )

    @v_args(meta=True)
    def experimental_changefeed(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.CreateChangefeed(c[0], None, clauses(c).get("options", ()), core=True, pos=position(meta))

    def cf_targets(self, c: list[ast.ChangefeedTarget]) -> tuple[ast.ChangefeedTarget, ...]:
        return tuple(c)

    def cf_target(self, c: list[Any]) -> ast.ChangefeedTarget:
        return ast.ChangefeedTarget(first(c, ast.QName), first(c, ast.Ident))

    def cf_into(self, c: list[ast.Expr]) -> Clause:
        return Clause("sink", option_value(c[0]))

    def cf_with(self, c: list[ast.Option]) -> Clause:
        return Clause("options", tuple(c))

    def cf_option(self, c: list[Any]) -> ast.Option:
        return (c[0].name.lower(), option_value(c[1]))

    # ---- CockroachDB changefeed jobs and zone configurations (jobs) ----------------------------
    def string_label(self, c: list[Token]) -> ast.Ident:
        return ast.Ident(unquote_single(str(c[0])), quoted=True)

    @v_args(meta=True)
    def create_external_connection(self, meta: Any, c: list[Any]) -> ast.Statement:
        label = first(c, ast.Ident)
        return ast.CreateExternalConnection(
            label.name if label.quoted else label.name.lower(),
            c[-1],
            clauses(c).get("if_not_exists", False),
            pos=position(meta),
        )

    @v_args(meta=True)
    def drop_external_connection(self, meta: Any, c: list[Any]) -> ast.Statement:
        label = first(c, ast.Ident)
        return ast.DropExternalConnection(
            label.name if label.quoted else label.name.lower(),
            clauses(c).get("if_exists", False),
            pos=position(meta),
        )

    @v_args(meta=True)
    def pause_job(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.JobControl("pause", c[0], pos=position(meta))

    @v_args(meta=True)
    def resume_job(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.JobControl("resume", c[0], pos=position(meta))

    @v_args(meta=True)
    def cancel_job(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.JobControl("cancel", c[0], pos=position(meta))

    @v_args(meta=True)
    def show_changefeed_job(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.ShowChangefeedJob(c[0], pos=position(meta))

    def when_complete(self, c: list[Any]) -> Clause:
        return Clause("block", True)

    @v_args(meta=True)
    def show_job(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.ShowJobsOf(job_id=c[-1], block=c[0] is not None, pos=position(meta))

    @v_args(meta=True)
    def show_jobs_of(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.ShowJobsOf(query=c[-1], block=c[0] is not None, pos=position(meta))

    @v_args(meta=True)
    def show_changefeed_jobs_of(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.ShowJobsOf(query=c[0], changefeed=True, pos=position(meta))

    @v_args(meta=True)
    def alter_changefeed(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.AlterChangefeed(c[0], tuple(c[1:]), pos=position(meta))

    def alter_cf_add(self, c: list[Any]) -> ast.AlterChangefeedCmd:
        targets = tuple(x for x in c if isinstance(x, ast.ChangefeedTarget))
        return ast.AlterChangefeedCmd("add", targets, clauses(c).get("options", ()))

    def alter_cf_drop(self, c: list[Any]) -> ast.AlterChangefeedCmd:
        return ast.AlterChangefeedCmd("drop", tuple(c))

    def alter_cf_set(self, c: list[ast.Option]) -> ast.AlterChangefeedCmd:
        return ast.AlterChangefeedCmd("set", options=tuple(c))

    def alter_cf_unset(self, c: list[ast.Ident]) -> ast.AlterChangefeedCmd:
        return ast.AlterChangefeedCmd("unset", names=tuple(i.name.lower() for i in c))

    def configure_zone(self, c: list[ast.Option]) -> ast.AlterAction:
        return ast.ConfigureZone(tuple(c))

    def zone_kv(self, c: list[Any]) -> ast.Option:
        return (".".join(i.name.lower() for i in c[:-1]), c[-1])
