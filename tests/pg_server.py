"""A PostgreSQL endpoint on its own event loop thread, for tests (port 0, loopback); psql
against it; and the endpoint beside a real PostgreSQL, for the tests that hold it to PostgreSQL's
answers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from changefeed.server import EndpointConfig
from changefeed.server.pg import create
from changefeed.testing.kafka_broker import free_port
from changefeed.testing.postgres import PostgresServer


@dataclass
class RunningServer:
    host: str
    port: int
    db: Path
    loop: asyncio.AbstractEventLoop
    endpoint: object
    thread: threading.Thread

    def dsn(self, user: str = "root", password: str | None = None, **extra: str) -> str:
        parts = [
            f"host={self.host}",
            f"port={self.port}",
            f"user={user}",
            "dbname=defaultdb",
            "sslmode=disable",
        ]
        if password is not None:
            parts.append(f"password={password}")
        parts += [f"{k}={v}" for k, v in extra.items()]
        return " ".join(parts)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.endpoint.stop(), self.loop).result(30)  # type: ignore[attr-defined]
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def start_server(db: Path, certs_dir: Path | None = None) -> RunningServer:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="pg-test-loop", daemon=True)
    thread.start()
    endpoint = create(EndpointConfig(db=db, certs_dir=certs_dir))
    host, port = asyncio.run_coroutine_threadsafe(endpoint.start(), loop).result(30)
    return RunningServer(host, port, db, loop, endpoint, thread)


def run_psql(server: RunningServer, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``psql -X`` as root on ``server``'s defaultdb with ``args`` (output and errors together,
    UTC, UTF-8); psql is ``make setup``'s."""
    psql = shutil.which("psql")
    assert psql is not None, "psql is not installed: make setup installs postgresql-client"
    env = {
        **os.environ,
        "PGCONNECT_TIMEOUT": "10",
        "PGTZ": "UTC",
        "LC_ALL": "C.UTF-8",
        "PGCLIENTENCODING": "UTF8",
    }
    env.pop("PGPASSWORD", None)
    connect = ["-X", "-h", server.host, "-p", str(server.port), "-U", "root", "-d", "defaultdb"]
    return subprocess.run(
        [psql, *connect, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        timeout=timeout,
    )


@contextlib.contextmanager
def beside_postgres(
    setup: Iterable[str], prefix: str
) -> Iterator[tuple[psycopg.Connection[Any], psycopg.Connection[Any]]]:
    """A real PostgreSQL (Debian's, ``make setup``'s) and the endpoint, each with ``setup`` run:
    psycopg connections to both, in autocommit, theirs first."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(root, 0o755)  # PostgreSQL runs as nobody: its directory must be reachable
    pg = PostgresServer(root / "pg", free_port())
    ours = start_server(root / "db")
    try:
        with (
            psycopg.connect(pg.dsn(), autocommit=True) as theirs,
            psycopg.connect(ours.dsn(), autocommit=True) as mine,
        ):
            for sql in setup:
                theirs.execute(sql)
                mine.execute(sql)
            yield theirs, mine
    finally:
        ours.stop()
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)
