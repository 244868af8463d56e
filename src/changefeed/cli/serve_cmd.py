"""``changefeed serve``: the network endpoints (PostgreSQL wire, Kafka, schema registry, CQL) on one loop."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import click

from changefeed.exceptions import ChangefeedError
from changefeed.server import Endpoint, EndpointConfig, create_endpoint
from changefeed.server.startup import bind_error, check_database, parse_flag


async def serve(db: Path, addresses: dict[str, tuple[str, int]], certs_dir: Path | None) -> None:
    """Start every endpoint of ``addresses`` and run until SIGTERM or SIGINT; a port that cannot
    be bound stops the ones already started and is one error naming it."""
    endpoints: list[Endpoint] = []
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        for kind, (host, port) in addresses.items():
            ep = create_endpoint(kind, EndpointConfig(db=db, host=host, port=port, certs_dir=certs_dir))
            try:
                bound = await ep.start()
            except OSError as exc:
                raise bind_error(kind, host, port, exc) from None
            endpoints.append(ep)
            click.echo(f"{kind}: listening on {bound[0]}:{bound[1]}", err=True)
        await stop.wait()
    finally:
        for ep in reversed(endpoints):
            await ep.stop()


def run_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run the endpoints on uvloop (libuv's event loop: about twice asyncio's own speed per
    message) where it is installed, else on asyncio's default loop."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
        return
    uvloop.run(main)


@click.command("serve")
@click.option(
    "--db", "db", required=True, type=click.Path(file_okay=False, path_type=Path), help="Database directory."
)
@click.option(
    "--pg", "pg", metavar="HOST:PORT", help="Serve the PostgreSQL wire protocol (psql, psycopg, JDBC)."
)
@click.option(
    "--kafka", "kafka", metavar="HOST:PORT", help="Serve the Kafka protocol over the embedded topics."
)
@click.option(
    "--registry", "registry", metavar="HOST:PORT", help="Serve a Confluent-compatible schema registry (REST)."
)
@click.option(
    "--cql",
    "cql",
    metavar="HOST:PORT",
    help="Serve the CQL native protocol (cqlsh, ScyllaDB/Cassandra drivers, ScyllaDB CDC libraries).",
)
@click.option(
    "--certs-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="TLS certificates in CockroachDB's layout (ca.crt, node.crt, node.key) for the pg and CQL endpoints.",
)
def serve_cmd(
    db: Path,
    pg: str | None,
    kafka: str | None,
    registry: str | None,
    cql: str | None,
    certs_dir: Path | None,
) -> None:
    """Serve the network endpoints named by the flags until SIGTERM or Ctrl-C (exit 0).

    Addresses bind to loopback unless a host is given: --pg :26257, --kafka 127.0.0.1:9092,
    --cql :9042.
    """
    flags = {
        k: v for k, v in (("pg", pg), ("kafka", kafka), ("registry", registry), ("cql", cql)) if v is not None
    }
    if not flags:
        raise click.UsageError("name at least one endpoint: --pg, --kafka, --registry or --cql")
    try:
        addresses = {k: a for k, v in flags.items() if (a := parse_flag(k, v)) is not None}
        check_database(db, create=True)
        run_loop(serve(db, addresses, certs_dir))
    except ChangefeedError as exc:
        click.echo(f"ERROR: {exc}", err=True)
        raise SystemExit(1) from None
