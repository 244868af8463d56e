"""``changefeed sql``: run statements and print results like cqlsh or psql."""

from __future__ import annotations

from pathlib import Path

import click

from changefeed.cli.render import render_cql, render_json_rows, render_sql
from changefeed.connection import connect
from changefeed.exceptions import ChangefeedError


def run_sql(db: Path, text: str, *, user: str, dialect: str, as_json: bool) -> int:
    """Run a script; print each result. Returns the exit code (1 after an error)."""
    conn = connect(db, user=user, dialect=dialect)
    first = True
    try:
        for res in conn.execute_script(text):
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
        click.echo(f"ERROR: {exc}", err=True)
        return 1
    finally:
        conn.close()
    return 0
