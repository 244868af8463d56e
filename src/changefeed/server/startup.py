"""Start-up checks of ``changefeed serve`` and ``changefeed start``: refuse to serve what cannot work.

Everything a server needs is checked before it listens, and each problem is one
:class:`~changefeed.exceptions.ChangefeedError` naming the flag, address, file or directory and
saying why (the command prints it as one ``ERROR:`` line and exits 1):

* an address that is not ``HOST:PORT``, ``:PORT``, ``PORT`` or ``HOST``, or a host that does not
  resolve (``--pg 26357x``);
* a database directory that is a file, cannot be created, or cannot be written (a read-only
  directory or file system: found by writing, since root ignores permission bits);
* a ``changefeed.db`` that is not a changefeed database (garbage, another SQLite file, another
  format version), found by opening it as every connection would;
* a port in use or an address this machine does not have, found by binding
  (:func:`bind_error`).
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path

from changefeed.engine.database import Database
from changefeed.exceptions import ChangefeedError, DatabaseError, EndpointError, InvalidOption
from changefeed.server import DEFAULT_PORTS, parse_address

OFF = "off"


def parse_flag(kind: str, text: str) -> tuple[str, int] | None:
    """The (host, port) of ``--kind TEXT``; None for ``off``. The host must resolve."""
    if text.strip().lower() == OFF:
        return None
    try:
        host, port = parse_address(text, DEFAULT_PORTS.get(kind, 0))
    except InvalidOption as exc:
        raise InvalidOption(f"--{kind} {text}: {exc}") from None
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise InvalidOption(
            f"--{kind} {text}: invalid address: {host!r} is neither a port number nor a host name "
            "this machine resolves (expected HOST:PORT, :PORT, PORT or off)"
        ) from None
    return host, port


def check_database(db: Path, *, create: bool = True) -> None:
    """The directory exists (or is created), is writable, and holds a readable changefeed database."""
    p = Path(db).absolute()
    if p.exists() and not p.is_dir():
        raise DatabaseError(f"{p} is not a directory, so it cannot be a changefeed database")
    if not p.exists():
        if not create:
            raise DatabaseError(f"database directory {p} does not exist")
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DatabaseError(f"cannot create database directory {p}: {exc.strerror}") from None
    probe = p / f".changefeed-write-check-{os.getpid()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        why = "read-only" if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) else exc.strerror
        raise DatabaseError(
            f"database directory {p} is {why}: the server writes its database, topics and checkpoints there"
        ) from None
    try:
        Database(p, create=True).close()
    except ChangefeedError:
        raise
    except OSError as exc:
        raise DatabaseError(f"database directory {p}: {exc.strerror}") from None


def bind_error(kind: str, host: str, port: int, exc: OSError) -> EndpointError:
    """One line for a failed bind: which endpoint, which address, and why."""
    where = f"{kind}: cannot listen on {host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return EndpointError(
            f"{where}: address already in use (another server, or another changefeed node, listens "
            f"there; move this endpoint with --{kind} HOST:PORT or turn it off with --{kind} off)"
        )
    if exc.errno in (errno.EACCES, errno.EPERM):
        return EndpointError(f"{where}: permission denied (ports below 1024 need privileges)")
    if exc.errno == errno.EADDRNOTAVAIL:
        return EndpointError(f"{where}: this machine has no such address")
    return EndpointError(f"{where}: {exc.strerror or exc}")
