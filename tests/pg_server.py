"""A PostgreSQL endpoint on its own event loop thread, for tests (port 0, loopback)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from pathlib import Path

from changefeed.server import EndpointConfig
from changefeed.server.pg import create


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
