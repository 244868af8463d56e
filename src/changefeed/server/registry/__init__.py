"""A Confluent-compatible schema registry: ``changefeed serve --db DIR --registry HOST:PORT``.

Schemas live in ``DIR/schema_registry.sqlite`` (see :mod:`.store`); the REST API is
:mod:`.api` over the small HTTP/1.1 server of :mod:`changefeed.server.http.wire`, on the shared ``serve`` event loop.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from changefeed.server import EndpointConfig
from changefeed.server.http.wire import HttpServer
from changefeed.server.registry.api import RegistryApi, error_response
from changefeed.server.registry.store import RegistryStore


class RegistryEndpoint:
    name = "registry"

    def __init__(self, config: EndpointConfig) -> None:
        self.config = config
        self.store: RegistryStore | None = None
        self._http: HttpServer | None = None

    async def start(self) -> tuple[str, int]:
        self.store = RegistryStore(self.config.db)
        self._http = HttpServer(
            RegistryApi(self.store).handle, error_response, metrics=self.config.metrics, name=self.name
        )
        return await self._http.start(self.config.host, self.config.port)

    async def stop(self) -> None:
        if self._http is not None:
            await self._http.stop()
            self._http = None
        if self.store is not None:
            self.store.close()
            self.store = None


def create(config: EndpointConfig) -> RegistryEndpoint:
    return RegistryEndpoint(config)


class BackgroundRegistry:
    """A registry on its own event loop in a daemon thread (tests, benchmarks, tools).

    ``with BackgroundRegistry(db_dir) as url: ...`` serves on a free loopback port.
    """

    def __init__(self, db: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        self.endpoint = RegistryEndpoint(EndpointConfig(db=Path(db), host=host, port=port))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="schema-registry", daemon=True)
        self.url = ""

    def start(self) -> str:
        self._thread.start()
        host, port = asyncio.run_coroutine_threadsafe(self.endpoint.start(), self._loop).result(30)
        self.url = f"http://{host}:{port}"
        return self.url

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.endpoint.stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["BackgroundRegistry", "RegistryEndpoint", "create"]
