"""A CQL endpoint on its own event loop thread, and the real clients' paths, for tests (port 0, loopback)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from changefeed.server import EndpointConfig
from changefeed.server.cql import create

ROOT = Path(__file__).resolve().parents[1]
#: scylla-cdc-go's printer, built by `make setup` (tests/cdc_go, Go module proxy) into build/.
CDC_GO = ROOT / "build" / "cdcprint"


@dataclass
class RunningServer:
    host: str
    port: int
    db: Path
    loop: asyncio.AbstractEventLoop
    endpoint: object
    thread: threading.Thread

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.endpoint.stop(), self.loop).result(30)  # type: ignore[attr-defined]
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def start_server(db: Path, certs_dir: Path | None = None, metrics: Any = None) -> RunningServer:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="cql-test-loop", daemon=True)
    thread.start()
    config = EndpointConfig(db=db, certs_dir=certs_dir)
    if metrics is not None:
        config = EndpointConfig(db=db, certs_dir=certs_dir, metrics=metrics)
    endpoint = create(config)
    host, port = asyncio.run_coroutine_threadsafe(endpoint.start(), loop).result(30)
    return RunningServer(host, port, db, loop, endpoint, thread)


def cqlsh_path() -> str:
    """cqlsh from the project's .venv (scylla-cqlsh, installed by `make setup`); fails loudly."""
    found = ROOT / ".venv" / "bin" / "cqlsh"
    if found.exists():
        return str(found)
    other = shutil.which("cqlsh")
    if other is None:
        raise RuntimeError("cqlsh is not installed: run `make setup` (scylla-cqlsh from PyPI)")
    return other


def run_cqlsh(srv: RunningServer, script: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """cqlsh against ``srv`` with ``script`` on its standard input (and ``extra`` arguments:
    ``-e``, ``-f``), the driver's bundled copy off, HOME beside the database."""
    return subprocess.run(
        [cqlsh_path(), srv.host, str(srv.port), *extra],
        input=script,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "CQLSH_NO_BUNDLED": "TRUE", "HOME": str(srv.db.parent)},
    )


def cdc_go_path() -> str:
    if not CDC_GO.exists():
        raise RuntimeError(f"{CDC_GO} is missing: run `make setup` (builds tests/cdc_go with Go)")
    return str(CDC_GO)


def split_cql(script: str) -> list[str]:
    """The statements of a CQL script, one per item (a BATCH block is one statement)."""
    out: list[str] = []
    cur: list[str] = []
    in_batch = False
    for line in script.splitlines():
        s = line.strip()
        if not s or s.startswith("--"):
            continue
        cur.append(line)
        upper = s.upper()
        if upper.startswith("BEGIN") and "BATCH" in upper:
            in_batch = True
        if in_batch:
            if upper.startswith("APPLY BATCH"):
                out.append("\n".join(cur).rstrip().rstrip(";"))
                cur, in_batch = [], False
            continue
        if s.endswith(";"):
            out.append("\n".join(cur).rstrip().rstrip(";"))
            cur = []
    if cur:
        out.append("\n".join(cur))
    return out
