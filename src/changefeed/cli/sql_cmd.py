"""``changefeed sql``: run statements and print results like cqlsh or psql.

A CockroachDB core changefeed (``EXPERIMENTAL CHANGEFEED FOR ..``, ``CREATE CHANGEFEED FOR ..``
without ``INTO``) prints CSV as it commits (:mod:`changefeed.cli.crdb_csv`) until ``end_time``,
the end of an ``initial_scan_only`` scan, or Ctrl-C/SIGTERM (exit 0).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from changefeed.cli.render import error_line, render_cql, render_json_rows, render_sql
from changefeed.connection import Connection, connect
from changefeed.exceptions import ChangefeedError
from changefeed.sql import ast
from changefeed.sql.parser import parse
from changefeed.stop_signals import stop_on_signals


def run_sql(db: Path, text: str, *, user: str, dialect: str, as_json: bool) -> int:
    """Run a script; print each result. Returns the exit code (1 after an error)."""
    from changefeed.sql.statements.crdb_feeds import is_core_changefeed

    conn = connect(db, user=user, dialect=dialect)
    first = True
    try:
        for stmt in parse(text, dialect):  # type: ignore[arg-type]
            if is_core_changefeed(stmt):
                _stream_core(conn, stmt)
                continue
            res = conn.session.execute(stmt)
            if res.columns:
                if as_json:
                    for line in render_json_rows(res):
                        click.echo(line)
                    continue
                if not first:
                    click.echo("")
                click.echo(render_cql(res) if dialect == "cql" else render_sql(res))
                first = False
            elif dialect == "sql" and res.status and not as_json:
                click.echo(res.status)
    except ChangefeedError as exc:
        click.echo(error_line(exc), err=True)
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C or SIGTERM while a core changefeed stops
        return 0
    finally:
        conn.close()
    return 0


def _stream_core(conn: Connection, stmt: ast.CreateChangefeed) -> None:
    from changefeed.cli.crdb_csv import write_csv
    from changefeed.sql.statements.crdb_feeds import start_core

    feed = start_core(conn.session, stmt)
    for notice in feed.plan.notices:
        click.echo(f"NOTICE: {notice}", err=True)
    with feed, stop_on_signals(feed.cancel):  # the feed ends at its next poll; exit 0
        write_csv(feed.batches(), sys.stdout)
