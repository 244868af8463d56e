"""A worker process of the PostgreSQL endpoint (see :mod:`changefeed.server.pg.cluster`):
``python -m changefeed.server.pg.worker SPEC``, started by the dispatcher, never by hand.

It serves the connections its dispatcher hands it until told to stop (or until the dispatcher
is gone), then ends every session as a server shutdown does (open transactions rolled back,
clients told ``57P01``) and exits."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import mmap
import os
import signal
import socket
import sys
from pathlib import Path

from changefeed.server.pg import cluster
from changefeed.server.pg.server import PgServer
from changefeed.server.pg.sessions import Registry
from changefeed.sql.grammar import load_grammar
from changefeed.sqlite_wal import BOARD_SLOT, wal_sync


async def serve(spec: cluster.WorkerSpec) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    db = Path(spec.db)
    board = mmap.mmap(spec.board_fd, spec.board_slots * BOARD_SLOT)
    os.close(spec.board_fd)
    from changefeed.engine.database import DB_FILE, share_write_gate

    # Writers of every worker queue on one cross-process gate; commits publish their durability
    # on the board so that a reply of any worker waits for what it may show.
    bell = (spec.bell_read_fd, spec.bell_write_fd)  # non-blocking: the dispatcher's pipe2
    share_write_gate(True, bell if min(bell) >= 0 else None)
    wal_sync(db / DB_FILE).share(board, spec.index, spec.board_slots)
    registry = Registry(spec.index)
    tally = cluster.Tally()
    server = PgServer(db, Path(spec.certs_dir) if spec.certs_dir else None, registry, tally)
    server.trust_root_on_loopback = spec.trust_root_on_loopback
    tasks: set[asyncio.Task[None]] = set()

    def adopt(sock: socket.socket) -> None:
        task = loop.create_task(server.adopt(sock))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    link = cluster.WorkerLink(
        socket.socket(fileno=spec.control_fd),
        adopt=adopt,
        cancel_key=registry.cancel_by_key,
        ask_local=registry.answer,
        on_stop=stop.set,
    )
    registry.cluster = link
    server.on_closed = link.closed_one
    # What is set up by now lives as long as the worker (the modules, and the SQL grammar,
    # built here rather than at the first query): the collector's full passes, which a bulk
    # write's allocations set off, skip it from here on.
    load_grammar("sql")
    gc.collect()
    gc.freeze()
    if spec.cpu >= 0:
        # Every thread of it (affinity is a thread's), and the pool threads and the sync
        # process it starts later, which inherit it.
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):  # a thread gone, a core taken away since
                os.sched_setaffinity(int(tid), {spec.cpu})
    link.ready()
    tallies = loop.create_task(link.hand_tallies(tally))
    try:
        await stop.wait()
    finally:
        server.on_closed = None
        await server.stop()
        tallies.cancel()
        with contextlib.suppress(BaseException):
            await tallies
        link.channel.on_close = None
        link.channel.close()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    spec = cluster.WorkerSpec.from_json(sys.argv[1])
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(spec))
    else:
        uvloop.run(serve(spec))


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
