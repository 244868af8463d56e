"""The ``changefeed`` command: ``sql``, ``run``, ``read``, ``feeds`` (DESIGN.md's contract) and ``demo``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from changefeed.cli.render import error_line
from changefeed.exceptions import ChangefeedError


def fail(exc: BaseException) -> None:
    click.echo(error_line(exc), err=True)
    raise SystemExit(1)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="changefeed")
def cli() -> None:
    """Change data capture for tables: a transactional store whose committed changes land in a
    ScyllaDB-shaped CDC journal; a Spark pipeline that delivers YDB, Debezium and CockroachDB
    changefeeds exactly once into an embedded topic log; CockroachDB core changefeeds streamed to
    the client; Apache Phoenix CDC queries; YDB asynchronous replication between databases; and
    PostgreSQL, Kafka, schema-registry, CQL and HTTP (metrics, console) endpoints, served alone
    (serve) or by a node that also runs every changefeed (start)."""


@cli.command("sql")
@click.option(
    "--db",
    "db",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Database directory (created if missing).",
)
@click.option("--user", default="root", show_default=True, help="User to run the statements as.")
@click.option("--cql", is_flag=True, help="Use the CQL (ScyllaDB) dialect instead of SQL (YDB/CockroachDB).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per result row.")
@click.argument("statements", required=False)
def sql_cmd(db: Path, user: str, cql: bool, as_json: bool, statements: str | None) -> None:
    """Run STATEMENTS (separated by ';'; read from stdin when omitted) and print their results
    as cqlsh (--cql) or psql would. Stops at the first error, printing ERROR: and exiting 1."""
    from changefeed.cli.sql_cmd import run_sql

    text = statements if statements is not None else sys.stdin.read()
    try:
        code = run_sql(db, text, user=user, dialect="cql" if cql else "sql", as_json=as_json)
    except ChangefeedError as exc:
        fail(exc)
    raise SystemExit(code)


@cli.command("demo")
@click.option(
    "--db",
    "db",
    default="demo-db",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Database directory to (re)create.",
)
@click.option("--keep", is_flag=True, help="Do not wipe the directory first.")
def demo_cmd(db: Path, keep: bool) -> None:
    """Create tables in a fresh database, write changes in both dialects, print the CDC journal."""
    from changefeed.cli.demo import run_demo

    try:
        run_demo(db, keep=keep)
    except ChangefeedError as exc:
        fail(exc)


def _register_optional() -> None:
    """Commands whose modules pull in heavier dependencies are added when importable."""
    try:
        from changefeed.cli.read_cmd import read

        cli.add_command(read, "read")
    except ImportError:  # pragma: no cover
        pass
    try:
        from changefeed.cli.run_cmd import feeds, run

        cli.add_command(run, "run")
        cli.add_command(feeds, "feeds")
    except ImportError:  # pragma: no cover
        pass
    from changefeed.cli.serve_cmd import serve_cmd

    cli.add_command(serve_cmd, "serve")
    from changefeed.cli.start_cmd import start_cmd

    cli.add_command(start_cmd, "start")
    # Apache Phoenix CDC (issue 11): the design's polling loop.
    from changefeed.cli.phoenix_cmd import cdc_poll

    cli.add_command(cdc_poll, "cdc-poll")


_register_optional()


def main() -> None:
    cli(prog_name="changefeed")


if __name__ == "__main__":
    main()
