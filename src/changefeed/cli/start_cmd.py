"""``changefeed start``: one node (every endpoint and the continuous pipeline in one process)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

from changefeed.exceptions import ChangefeedError
from changefeed.server import DEFAULT_PORTS

_HELP = {
    "pg": "the PostgreSQL wire protocol (psql, psycopg, JDBC)",
    "kafka": "the Kafka protocol over the embedded topics",
    "registry": "the Confluent-compatible schema registry",
    "cql": "the CQL native protocol (cqlsh, the ScyllaDB drivers)",
    "http": "metrics (/metrics), health (/health?ready=1) and the console (/)",
}


def _fail(exc: BaseException) -> None:
    click.echo(f"ERROR: {exc}", err=True)
    raise SystemExit(1)


def setup_logging() -> None:
    """One line per event on stderr, with the time (feed start/stop/retry/caught up, errors)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("changefeed")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False


def _start(db: Path, certs_dir: Path | None, **flags: Any) -> None:
    """Serve every endpoint on its conventional loopback port (a flag moves it, HOST:PORT, or turns
    it off, `off`) and run every changefeed continuously, until SIGTERM or Ctrl-C (exit 0)."""
    from changefeed.cli.serve_cmd import run_loop
    from changefeed.server.node import Node, NodeConfig, node_addresses

    try:
        addresses = node_addresses({k: flags.get(k) for k in DEFAULT_PORTS})
        node = Node(NodeConfig(db=db, addresses=addresses, certs_dir=certs_dir), echo=click.echo)
        node.check()
        setup_logging()
        run_loop(node.run())
    except ChangefeedError as exc:
        _fail(exc)
    raise SystemExit(0)


def _command() -> click.Command:
    params: list[click.Parameter] = [
        click.Option(
            ["--db", "db"],
            required=True,
            type=click.Path(file_okay=False, path_type=Path),
            help="Database directory (created if missing).",
        )
    ]
    for kind, port in DEFAULT_PORTS.items():
        params.append(
            click.Option(
                [f"--{kind}", kind],
                metavar="HOST:PORT|off",
                help=f"Serve {_HELP.get(kind, kind)} here (default 127.0.0.1:{port}), or not (off).",
            )
        )
    params.append(
        click.Option(
            ["--certs-dir"],
            type=click.Path(file_okay=False, exists=True, path_type=Path),
            help="TLS certificates in CockroachDB's layout (ca.crt, node.crt, node.key) for the pg and CQL endpoints.",
        )
    )
    return click.Command("start", callback=_start, params=params, help=_start.__doc__)


start_cmd = _command()
