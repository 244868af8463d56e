"""Serving the PostgreSQL endpoint from several processes (workers), as PostgreSQL serves each
connection from a backend process of its own.

One Python process runs on one core at a time (the interpreter lock), while a database server's
work per statement (parse, plan, execute, encode, the socket calls) is per connection and runs in
parallel in PostgreSQL's backends. So ``changefeed serve --pg`` (and a node's pg endpoint) keeps
the listening socket in its own process and hands each accepted connection to one of
:data:`WORKERS_ENV` worker processes (default: one per core), the one with the fewest
connections, by passing the socket's file descriptor over a Unix socket (``SCM_RIGHTS``). Each
worker runs the whole protocol for its connections on its own event loop, with its own engine
connections (the engine is multi-process safe: SQLite's locking, plus a cross-process write gate
so that writers of different workers queue instead of sleeping in SQLite's busy handler, with a
doorbell pipe its releases ring for writers that wait on a loop: ``server.gate_wait``) and its
own group commit (one ``fdatasync`` covers every process's frames already in the WAL).

What spans workers goes through the process that accepts (the *dispatcher*), over one
``SOCK_SEQPACKET`` control socket per worker carrying small JSON messages:

* a ``CancelRequest`` may arrive at any worker: the backend process id of ``BackendKeyData``
  carries the worker's index in its low byte, so the worker that reads it forwards it to the
  dispatcher, which hands it to the owner (who checks the secret key);
* ``CANCEL QUERY`` and ``SHOW QUERIES`` ask every other worker through the dispatcher;
* commits are made durable before a reply shows them in every worker: each worker's group-commit
  state is published in a small shared memory board (``WalSync.share``), and a reply that may
  show another worker's commit that is not durable yet waits for a sync first.

The dispatcher starts the workers with the interpreter and ``sys.path`` of its own process (so
it composes with a node that runs its pipeline in the main process: nothing is forked from a
process that holds threads or a JVM), waits for each to report ready, restarts one that exits,
and stops them (their open transactions rolled back, clients told) when the endpoint stops. A
worker whose dispatcher is gone (``kill -9``) sees its control socket close and exits.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import itertools
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from changefeed.exceptions import EndpointError, InvalidOption
from changefeed.observe import NULL_ENDPOINT_METRICS, EndpointMetrics
from changefeed.sqlite_wal import BOARD_SLOT

log = logging.getLogger(__name__)

#: Worker processes serving the endpoint; 0 or 1 serves in the process that listens.
WORKERS_ENV = "CHANGEFEED_PG_WORKERS"
#: Whether each worker runs on a core of its own: ``auto`` (the default: when there are no more
#: workers than cores this process may use), ``on`` (core ``index % cores``) or ``off``.
PIN_ENV = "CHANGEFEED_PG_PIN"
#: Most worker processes (beyond the core count they only add memory).
MAX_WORKERS = 64
#: Seconds a worker has to start and report ready.
START_TIMEOUT = 60.0
#: Seconds the dispatcher waits for the other workers' answers (SHOW QUERIES, CANCEL QUERY).
ASK_TIMEOUT = 5.0
#: Bytes of one control message; longer answers are sent in parts.
MESSAGE_MAX = 32 * 1024


def worker_count() -> int:
    """Workers configured by :data:`WORKERS_ENV` (default: the core count)."""
    raw = os.environ.get(WORKERS_ENV, "").strip()
    if not raw:
        return max(1, min(os.cpu_count() or 1, MAX_WORKERS))
    if not raw.isdigit() or int(raw) > MAX_WORKERS:
        raise InvalidOption(
            f"{WORKERS_ENV}={raw!r}: expected a number of worker processes from 0 to {MAX_WORKERS}"
        )
    return int(raw)


def worker_cpus(workers: int) -> list[int]:
    """The core each of ``workers`` workers is pinned to (:data:`PIN_ENV`), or none (empty).

    A pinned worker keeps its caches and its sync process's on one core instead of following the
    scheduler from core to core with the other processes (pgbench on 2 cores, 8 clients: point
    SELECTs 65 against 80 us of CPU a transaction, single-row upserts about 12% more); with more
    workers than cores, ``auto`` leaves them to the scheduler."""
    raw = os.environ.get(PIN_ENV, "auto").strip().lower() or "auto"
    if raw not in ("auto", "on", "off"):
        raise InvalidOption(f"{PIN_ENV}={raw!r}: expected auto, on or off")
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        return []
    if raw == "off" or workers < 2 or (raw == "auto" and workers > len(cpus)):
        return []
    return [cpus[i % len(cpus)] for i in range(workers)]


def owner_of(pid: int) -> int:
    """The worker index a backend process id belongs to (see ``new_backend_key``)."""
    return pid & 0xFF


# ---------------------------------------------------------------------------- control channel
class Channel:
    """One end of a control socket on an event loop: JSON messages, optionally with one file
    descriptor each. Receiving is driven by the loop (``add_reader``); sending is a non-blocking
    ``sendmsg``, and what the peer is not ready to take waits in order (with a duplicate of its
    descriptor) until the socket is writable (``add_writer``): the loop never blocks on a slow
    peer."""

    def __init__(self, sock: socket.socket, on_message: Callable[[dict[str, Any], int | None], None]) -> None:
        self.sock = sock
        self.on_message = on_message
        self.closed = False
        self.on_close: Callable[[], None] | None = None
        self.backlog: list[tuple[bytes, int | None]] = []
        sock.setblocking(False)
        self.loop = asyncio.get_running_loop()
        self.loop.add_reader(sock.fileno(), self._readable)

    def send(self, msg: dict[str, Any], fd: int | None = None) -> bool:
        """Send (or queue) ``msg`` with a copy of ``fd``; the caller keeps its own ``fd``."""
        if self.closed:
            return False
        data = orjson.dumps(msg)
        if not self.backlog and self._try(data, fd):
            return True
        if self.closed:
            return False
        self.backlog.append((data, os.dup(fd) if fd is not None else None))
        if len(self.backlog) == 1:
            self.loop.add_writer(self.sock.fileno(), self._writable)
        return True

    def _try(self, data: bytes, fd: int | None) -> bool:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))] if fd is not None else []
        try:
            self.sock.sendmsg([data], anc)
            return True
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            self.close()
            return False

    def _writable(self) -> None:
        while self.backlog and not self.closed:
            data, fd = self.backlog[0]
            if not self._try(data, fd):
                return
            self.backlog.pop(0)
            if fd is not None:
                os.close(fd)
        with contextlib.suppress(Exception):
            self.loop.remove_writer(self.sock.fileno())

    def _readable(self) -> None:
        while not self.closed:
            try:
                data, anc, _flags, _ = self.sock.recvmsg(MESSAGE_MAX, socket.CMSG_SPACE(4 * 4))
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.close()
                return
            if not data:
                self.close()
                return
            fds: list[int] = []
            for level, kind, raw in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    a = array.array("i")
                    a.frombytes(raw[: len(raw) - (len(raw) % a.itemsize)])
                    fds += list(a)
            try:
                msg = orjson.loads(data)
            except orjson.JSONDecodeError:
                for f in fds:
                    os.close(f)
                continue
            for extra in fds[1:]:
                os.close(extra)
            try:
                self.on_message(msg, fds[0] if fds else None)
            except Exception:  # one bad message must not stop the channel
                log.exception("pg control message %r failed", msg.get("op"))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(Exception):
            self.loop.remove_reader(self.sock.fileno())
        with contextlib.suppress(Exception):
            self.loop.remove_writer(self.sock.fileno())
        for _, fd in self.backlog:
            if fd is not None:
                os.close(fd)
        self.backlog.clear()
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.on_close is not None:
            self.on_close()


_tasks: set[asyncio.Task[None]] = set()


def _background(coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` on the loop, keeping a reference until it ends."""
    task = asyncio.get_running_loop().create_task(coro)
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


def parts(values: list[Any]) -> list[list[Any]]:
    """``values`` cut into lists whose JSON fits a control message."""
    out: list[list[Any]] = [[]]
    size = 0
    for v in values:
        n = len(orjson.dumps(v)) + 1
        if out[-1] and size + n > MESSAGE_MAX - 256:
            out.append([])
            size = 0
        out[-1].append(v)
        size += n
    return out


class Answers:
    """Answers in parts, by request id, each completed by a part marked ``last``."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.waiting: dict[int, tuple[asyncio.Future[list[Any]], list[Any], int]] = {}

    def new(self, expected: int) -> tuple[int, asyncio.Future[list[Any]]]:
        req = next(self.ids)
        fut: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self.waiting[req] = (fut, [], expected)
        if expected == 0:
            self.finish(req)
        return req, fut

    def part(self, req: int, values: list[Any], last: bool) -> None:
        entry = self.waiting.get(req)
        if entry is None:
            return
        entry[1].extend(values)
        if last:
            fut, got, expected = entry
            if expected <= 1:
                self.finish(req)
            else:
                self.waiting[req] = (fut, got, expected - 1)

    def finish(self, req: int) -> None:
        entry = self.waiting.pop(req, None)
        if entry is not None and not entry[0].done():
            entry[0].set_result(entry[1])

    def fail_all(self) -> None:
        for req in list(self.waiting):
            self.finish(req)


def answer(channel: Channel, req: int, values: list[Any]) -> None:
    chunks = parts(values)
    for i, chunk in enumerate(chunks):
        channel.send({"op": "answer", "req": req, "values": chunk, "last": i == len(chunks) - 1})


# ---------------------------------------------------------------------------- endpoint figures
#: Seconds between a worker's hand-overs of its connection and statement counts.
TALLY_S = 0.5


class Tally:
    """A worker's ``EndpointMetrics``: counted here, handed to the listening process (whose
    metrics a node's ``/metrics`` shows) every :data:`TALLY_S` seconds."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0, 0]  # opened, closed, requests, errors

    def connection_opened(self, endpoint: str) -> None:
        self.counts[0] += 1

    def connection_closed(self, endpoint: str) -> None:
        self.counts[1] += 1

    def request(self, endpoint: str) -> None:
        self.counts[2] += 1

    def error(self, endpoint: str) -> None:
        self.counts[3] += 1

    def take(self) -> list[int]:
        out, self.counts = self.counts, [0, 0, 0, 0]
        return out


def apply_tally(metrics: EndpointMetrics, counts: list[int]) -> None:
    """A worker's counts into the listening process's metrics."""
    opened, closed, requests, errors = (int(c) for c in counts[:4])
    for _ in range(opened):
        metrics.connection_opened("pg")
    for _ in range(closed):
        metrics.connection_closed("pg")
    for _ in range(requests):
        metrics.request("pg")
    for _ in range(errors):
        metrics.error("pg")


# ---------------------------------------------------------------------------- the worker's side
class WorkerLink:
    """A worker's link to its dispatcher: connections arrive here, and cluster-wide requests
    (cancel by key or query id, the queries of every worker) go out from here."""

    def __init__(
        self,
        sock: socket.socket,
        *,
        adopt: Callable[[socket.socket], None],
        cancel_key: Callable[[int, int], None],
        ask_local: Callable[[str, Any], Awaitable[list[Any]]],
        on_stop: Callable[[], None],
    ) -> None:
        """``on_stop`` is called when the dispatcher asks the worker to stop, or is gone."""
        self.adopt = adopt
        self.on_stop = on_stop
        self.cancel_key = cancel_key
        self.ask_local = ask_local
        self.answers = Answers()
        self.channel = Channel(sock, self._on_message)
        self.channel.on_close = on_stop

    def ready(self) -> None:
        self.channel.send({"op": "ready", "pid": os.getpid()})

    def closed_one(self) -> None:
        self.channel.send({"op": "closed"})

    async def hand_tallies(self, tally: Tally) -> None:
        """Send ``tally``'s counts to the dispatcher every :data:`TALLY_S` seconds, until cancelled."""
        try:
            while not self.channel.closed:
                await asyncio.sleep(TALLY_S)
                if any(tally.counts):
                    self.channel.send({"op": "metrics", "counts": tally.take()})
        finally:
            if any(tally.counts):
                self.channel.send({"op": "metrics", "counts": tally.take()})

    def forward_cancel(self, pid: int, key: int) -> None:
        self.channel.send({"op": "cancel_key", "pid": pid, "key": key})

    async def ask(self, what: str, arg: Any = None) -> list[Any]:
        """Ask every other worker (through the dispatcher); their answers, concatenated."""
        req, fut = self.answers.new(1)
        if not self.channel.send({"op": "ask", "req": req, "what": what, "arg": arg}):
            self.answers.finish(req)
        try:
            return await asyncio.wait_for(fut, ASK_TIMEOUT + 1)
        except TimeoutError:
            self.answers.waiting.pop(req, None)
            return []

    def _on_message(self, msg: dict[str, Any], fd: int | None) -> None:
        op = msg.get("op")
        if op == "conn" and fd is not None:
            self.adopt(socket.socket(fileno=fd))
        elif fd is not None:
            os.close(fd)
        if op == "cancel_key":
            self.cancel_key(int(msg["pid"]), int(msg["key"]))
        elif op == "ask":
            _background(self._answer(int(msg["req"]), str(msg["what"]), msg.get("arg")))
        elif op == "answer":
            self.answers.part(int(msg["req"]), list(msg["values"]), bool(msg["last"]))
        elif op == "stop":
            self.on_stop()

    async def _answer(self, req: int, what: str, arg: Any) -> None:
        try:
            values = await self.ask_local(what, arg)
        except Exception:
            log.exception("pg: answering %s failed", what)
            values = []
        answer(self.channel, req, values)


# ---------------------------------------------------------------------------- the dispatcher
@dataclass
class Worker:
    index: int
    proc: subprocess.Popen[bytes] | None = None
    channel: Channel | None = None
    ready: asyncio.Future[None] | None = None
    connections: int = 0
    alive: bool = False
    pending: list[socket.socket] = field(default_factory=list)


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker needs to serve: passed to it as JSON on its command line."""

    db: str
    certs_dir: str | None
    index: int
    board_fd: int
    board_slots: int
    control_fd: int
    trust_root_on_loopback: bool = True
    #: The write gate's doorbell, a non-blocking pipe every worker shares (``WriteGate.bell``).
    bell_read_fd: int = -1
    bell_write_fd: int = -1
    #: The core the worker runs on (:func:`worker_cpus`); -1: wherever the scheduler puts it.
    cpu: int = -1

    def to_json(self) -> str:
        return orjson.dumps(self.__dict__).decode()

    @staticmethod
    def from_json(text: str) -> WorkerSpec:
        return WorkerSpec(**orjson.loads(text))


def package_root() -> str:
    """The directory holding the ``changefeed`` package this process runs."""
    import changefeed

    return str(Path(changefeed.__file__).resolve().parent.parent)


class Dispatcher:
    """The listening side of a multi-process endpoint (see the module docstring)."""

    def __init__(
        self,
        db: Path,
        certs_dir: Path | None,
        workers: int,
        *,
        trust_root_on_loopback: bool = True,
        metrics: EndpointMetrics = NULL_ENDPOINT_METRICS,
    ) -> None:
        self.db = db
        self.metrics = metrics
        self.certs_dir = certs_dir
        self.trust_root_on_loopback = trust_root_on_loopback
        self.workers = [Worker(i) for i in range(workers)]
        self.cpus = worker_cpus(workers)  # checked here: a bad setting fails the start
        self.listener: socket.socket | None = None
        self.answers = Answers()
        self.stopping = False
        self.board_fd = -1
        self.bell: tuple[int, int] = (-1, -1)
        self.loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ lifecycle
    async def start(self, host: str, port: int) -> tuple[str, int]:
        self.loop = asyncio.get_running_loop()
        self.board_fd = _board(len(self.workers))
        self.bell = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        infos = await self.loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, addr = infos[0]
        lsock = socket.socket(family, kind, proto)
        try:
            lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                with contextlib.suppress(OSError):
                    lsock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            lsock.bind(addr)
            lsock.listen(1024)
            lsock.setblocking(False)
        except BaseException:
            lsock.close()
            raise
        self.listener = lsock
        try:
            await asyncio.gather(*(self._spawn(w) for w in self.workers))
        except BaseException:
            await self.stop()
            raise
        self.loop.add_reader(lsock.fileno(), self._accept)
        bound = lsock.getsockname()
        return str(bound[0]), int(bound[1])

    async def stop(self) -> None:
        self.stopping = True
        if self.listener is not None:
            with contextlib.suppress(Exception):
                assert self.loop is not None
                self.loop.remove_reader(self.listener.fileno())
            self.listener.close()
        for w in self.workers:
            if w.channel is not None and not w.channel.closed:
                w.channel.send({"op": "stop"})
        loop = asyncio.get_running_loop()
        for w in self.workers:
            proc = w.proc
            if proc is None:
                continue
            try:
                await loop.run_in_executor(None, proc.wait, 10)
            except subprocess.TimeoutExpired:
                proc.kill()
                await loop.run_in_executor(None, proc.wait)
            if w.channel is not None:
                w.channel.on_close = None
                w.channel.close()
            for s in w.pending:
                s.close()
            w.pending.clear()
        self.answers.fail_all()
        if self.board_fd >= 0:
            os.close(self.board_fd)
            self.board_fd = -1
        for fd in self.bell:
            if fd >= 0:
                os.close(fd)
        self.bell = (-1, -1)

    async def _spawn(self, w: Worker) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        spec = WorkerSpec(
            db=str(self.db),
            certs_dir=str(self.certs_dir) if self.certs_dir is not None else None,
            index=w.index,
            board_fd=self.board_fd,
            board_slots=len(self.workers),
            control_fd=child.fileno(),
            trust_root_on_loopback=self.trust_root_on_loopback,
            bell_read_fd=self.bell[0],
            bell_write_fd=self.bell[1],
            cpu=self.cpus[w.index] if w.index < len(self.cpus) else -1,
        )
        env = dict(os.environ)
        root = package_root()
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        try:
            w.proc = subprocess.Popen(
                [sys.executable, "-m", "changefeed.server.pg.worker", spec.to_json()],
                pass_fds=(child.fileno(), self.board_fd, *self.bell),
                env=env,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's Ctrl-C reaches the dispatcher, which stops them
            )
        finally:
            child.close()
        w.ready = asyncio.get_running_loop().create_future()
        w.channel = Channel(parent, lambda msg, fd: self._on_message(w, msg, fd))
        w.channel.on_close = lambda: self._lost(w)
        try:
            await asyncio.wait_for(asyncio.shield(w.ready), START_TIMEOUT)
        except TimeoutError:
            raise EndpointError(f"pg: worker {w.index} did not start within {START_TIMEOUT:.0f} s") from None
        w.alive = True
        w.connections = 0
        for s in w.pending:
            self._hand(w, s)
        w.pending.clear()

    def _lost(self, w: Worker) -> None:
        """A worker's control socket closed: it exited. Restart it unless stopping."""
        w.alive = False
        if w.ready is not None and not w.ready.done():
            code = w.proc.poll() if w.proc is not None else None
            w.ready.set_exception(
                EndpointError(f"pg: worker {w.index} exited while starting (status {code})")
            )
            return
        if self.stopping:
            return
        log.warning("pg: worker %d exited; starting another", w.index)
        if w.proc is not None:
            with contextlib.suppress(Exception):
                w.proc.wait(5)
        assert self.loop is not None
        task = self.loop.create_task(self._spawn(w))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    # ------------------------------------------------------------------ connections
    def _accept(self) -> None:
        assert self.listener is not None
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning("pg: accept failed: %s", exc)
                return
            live = [w for w in self.workers if w.alive]
            if not live:
                # Every worker is restarting: the first one back takes it.
                self.workers[0].pending.append(conn)
                continue
            target = min(live, key=lambda w: w.connections)
            self._hand(target, conn)

    def _hand(self, w: Worker, conn: socket.socket) -> None:
        try:
            if w.channel is not None and w.channel.send({"op": "conn"}, conn.fileno()):
                w.connections += 1
        finally:
            conn.close()

    # ------------------------------------------------------------------ messages
    def _on_message(self, w: Worker, msg: dict[str, Any], fd: int | None) -> None:
        if fd is not None:
            os.close(fd)
        op = msg.get("op")
        if op == "ready":
            if w.ready is not None and not w.ready.done():
                w.ready.set_result(None)
        elif op == "closed":
            w.connections = max(0, w.connections - 1)
        elif op == "metrics":
            apply_tally(self.metrics, list(msg.get("counts", [])))
        elif op == "cancel_key":
            pid = int(msg["pid"])
            idx = owner_of(pid)
            if 0 <= idx < len(self.workers) and self.workers[idx].channel is not None:
                ch = self.workers[idx].channel
                assert ch is not None
                ch.send({"op": "cancel_key", "pid": pid, "key": int(msg["key"])})
        elif op == "ask":
            _background(self._relay(w, int(msg["req"]), str(msg["what"]), msg.get("arg")))
        elif op == "answer":
            self.answers.part(int(msg["req"]), list(msg["values"]), bool(msg["last"]))

    async def _relay(self, asker: Worker, req: int, what: str, arg: Any) -> None:
        """Ask every other live worker and answer the asker with what they said."""
        others = [w for w in self.workers if w is not asker and w.alive and w.channel is not None]
        mine, fut = self.answers.new(len(others))
        for w in others:
            assert w.channel is not None
            if not w.channel.send({"op": "ask", "req": mine, "what": what, "arg": arg}):
                self.answers.part(mine, [], True)
        try:
            values = await asyncio.wait_for(fut, ASK_TIMEOUT)
        except TimeoutError:
            entry = self.answers.waiting.pop(mine, None)
            values = entry[1] if entry is not None else []
        if asker.channel is not None:
            answer(asker.channel, req, values)


def _board(slots: int) -> int:
    """A shared memory file of ``slots`` durability slots, as a descriptor the workers inherit."""
    size = max(slots, 1) * BOARD_SLOT
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("changefeed-pg-board", 0)
    else:  # pragma: no cover - Linux has memfd_create
        import tempfile

        fd, path = tempfile.mkstemp(prefix="changefeed-pg-board")
        os.unlink(path)
    os.ftruncate(fd, size)
    os.set_inheritable(fd, False)
    return fd
