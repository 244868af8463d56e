"""One node: every endpoint on one event loop and the pipeline in the same process (``changefeed start``).

As ``cockroach start-single-node`` is one process serving SQL, the DB Console and running every
changefeed job, a node serves the endpoints of :data:`changefeed.server.DEFAULT_PORTS` (each on
its conventional loopback port unless a flag moves it or turns it ``off``) and runs the pipeline
of ``changefeed run`` continuously in a thread of its own on one warm Spark session.

Start-up, in order, each step refusing with one error (:mod:`changefeed.server.startup`):
addresses parsed and resolved; the database directory checked (writable, a readable changefeed
database); the database's pipeline lock taken (:mod:`changefeed.feeds.runners`: a second node,
or a ``changefeed run``, on the same database is refused); every endpoint bound, in the order of
:data:`~changefeed.server.DEFAULT_PORTS` (a port in use stops the ones already bound). Then the
node prints one line per endpoint (``pg: 127.0.0.1:26257``) and starts the pipeline.

Shutdown (SIGTERM, Ctrl-C): the pipeline stops after the micro-batch in flight, then the
endpoints close their connections; :meth:`Node.run` returns and the command exits 0.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from changefeed.exceptions import ChangefeedError
from changefeed.feeds.runners import claim
from changefeed.observe import Metrics, Readiness, default_metrics
from changefeed.server import DEFAULT_PORTS, Endpoint, EndpointConfig, create_endpoint, endpoint_available
from changefeed.server.startup import bind_error, check_database, parse_flag

log = logging.getLogger("changefeed.node")

PIPELINE = "pipeline"


class Pipeline(Protocol):
    """The continuous pipeline a node runs in its own thread."""

    def __call__(
        self, db: Path, *, stop: threading.Event, metrics: Metrics, on_ready: Callable[[], None]
    ) -> None:
        """Deliver every feed of ``db`` until ``stop`` is set, then return after the micro-batch
        in flight; call ``on_ready`` once delivering."""
        ...


def default_pipeline(
    db: Path, *, stop: threading.Event, metrics: Metrics, on_ready: Callable[[], None]
) -> None:
    from changefeed.pipeline.runner import run_node

    run_node(db, stop=stop, metrics=metrics, on_ready=on_ready)


@dataclass(frozen=True, slots=True)
class NodeConfig:
    db: Path
    #: endpoint -> (host, port) for each endpoint that serves (``off`` ones are absent)
    addresses: dict[str, tuple[str, int]]
    certs_dir: Path | None = None
    pipeline: Pipeline | None = field(default=None, compare=False)


def node_addresses(flags: dict[str, str | None]) -> dict[str, tuple[str, int]]:
    """Every endpoint of this build at its default port, moved or turned off by ``flags``
    (endpoint -> flag text, None when not given). An endpoint this build lacks (its package is
    not installed) serves only when its flag asks for it, and then it is an error."""
    out: dict[str, tuple[str, int]] = {}
    for kind, port in DEFAULT_PORTS.items():
        text = flags.get(kind)
        if text is None and not endpoint_available(kind):
            continue
        got = parse_flag(kind, text if text is not None else f"127.0.0.1:{port}")
        if got is not None:
            out[kind] = got
    return out


class Node:
    def __init__(
        self,
        config: NodeConfig,
        *,
        metrics: Metrics | None = None,
        echo: Callable[[str], None] = print,
    ) -> None:
        self.config = config
        self.metrics = metrics or default_metrics()
        self.echo = echo
        self.readiness = Readiness((*config.addresses, PIPELINE))
        self.endpoints: list[Endpoint] = []
        self.bound: dict[str, tuple[str, int]] = {}
        self.stop_event = threading.Event()
        self.failure: BaseException | None = None

    def check(self) -> None:
        """The database directory is usable (raises a one-line error otherwise)."""
        check_database(self.config.db, create=True)

    async def run(self) -> None:
        """Serve until SIGTERM/SIGINT (or :meth:`request_stop`); raise what stopped it otherwise."""
        loop = asyncio.get_running_loop()
        stopping = asyncio.Event()

        def request_stop() -> None:
            self.stop_event.set()
            stopping.set()

        self._request_stop = request_stop
        installed = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, request_stop)
                installed.append(sig)
            except (ValueError, RuntimeError):  # not the main thread (tests run a node in one)
                pass
        with ExitStack() as stack:
            stack.enter_context(claim(self.config.db, "node"))
            try:
                await self._bind_all()
                for name, (host, port) in self.bound.items():
                    self.echo(f"{name}: {host}:{port}")
                thread = threading.Thread(target=self._pipeline, name="changefeed-pipeline", daemon=True)
                thread.start()
                await stopping.wait()
                self.stop_event.set()
                await loop.run_in_executor(None, thread.join)
            finally:
                for ep in reversed(self.endpoints):
                    try:
                        await ep.stop()
                    except Exception as exc:  # one endpoint's trouble must not keep the others open
                        log.warning("%s: stopping: %s", ep.name, exc)
                self.endpoints.clear()
                for sig in installed:
                    loop.remove_signal_handler(sig)
        if self.failure is not None:
            raise self.failure

    def request_stop(self) -> None:
        """Stop the node (thread-safe)."""
        self.stop_event.set()
        fn = getattr(self, "_request_stop", None)
        loop = getattr(self, "_loop", None)
        if fn is not None and loop is not None:
            loop.call_soon_threadsafe(fn)

    async def _bind_all(self) -> None:
        self._loop = asyncio.get_running_loop()
        for kind, (host, port) in self.config.addresses.items():
            ep = create_endpoint(
                kind,
                EndpointConfig(
                    db=self.config.db,
                    host=host,
                    port=port,
                    certs_dir=self.config.certs_dir,
                    metrics=self.metrics,
                    readiness=self.readiness,
                ),
            )
            try:
                self.bound[kind] = await ep.start()
            except OSError as exc:
                raise bind_error(kind, host, port, exc) from None
            self.endpoints.append(ep)
            self.readiness.set(kind, True, "listening")
        for ep in self.endpoints:
            if hasattr(ep, "endpoints"):
                ep.endpoints = {k: f"{h}:{p}" for k, (h, p) in self.bound.items()}

    def _pipeline(self) -> None:
        run = self.config.pipeline or default_pipeline
        try:
            run(
                self.config.db,
                stop=self.stop_event,
                metrics=self.metrics,
                on_ready=lambda: self.readiness.set(PIPELINE, True, "running"),
            )
        except ChangefeedError as exc:
            if not self.stop_event.is_set():
                self.failure = exc
        except BaseException as exc:  # never a traceback for the user: one line (in full at DEBUG)
            log.debug("the pipeline stopped", exc_info=True)
            if not self.stop_event.is_set():
                first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
                self.failure = ChangefeedError(f"the pipeline stopped: {type(exc).__name__}: {first}")
        finally:
            self.readiness.set(PIPELINE, False, "stopped")
            if not self.stop_event.is_set():
                self.request_stop()
