"""A real PostgreSQL server (Debian's packages, installed by ``make setup``) for tests and
benchmarks: the oracle that the PostgreSQL endpoint's answers are held to, and the baseline of
``benchmarks/pgbench_bench.py``.

:class:`PostgresServer` runs ``initdb`` in a directory of its own (as the unprivileged user
``nobody`` when run as root: PostgreSQL refuses to run as root), starts ``postgres`` on a
loopback port with durable commits (``fsync`` and ``synchronous_commit`` on) and stops it.
Nothing is fetched here: a machine without the packages gets :class:`PostgresError` naming
them.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["PG_USER", "PostgresError", "PostgresServer", "pg_bin"]

#: The account PostgreSQL runs as when started by root.
PG_USER = "nobody"


class PostgresError(RuntimeError):
    """PostgreSQL could not be found or started."""


def pg_bin() -> Path:
    """The newest installed PostgreSQL's ``bin`` directory."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise PostgresError("PostgreSQL is not installed (apt-get install postgresql; `make setup` does it)")
    return Path(found[-1]).parent


def _as_pg_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    group = "nogroup" if PG_USER == "nobody" else PG_USER
    return ["setpriv", f"--reuid={PG_USER}", f"--regid={group}", "--clear-groups", "--", *cmd]


class PostgresServer:
    """A throwaway PostgreSQL cluster in ``root`` (which must not exist yet or be empty; its
    parents must be readable by :data:`PG_USER`), listening on ``127.0.0.1:port``; user
    ``postgres``, trust authentication, database ``postgres``."""

    def __init__(self, root: Path, port: int, *, start_timeout_s: float = 60.0) -> None:
        self.bin = pg_bin()
        self.root = root
        self.data = root / "pgdata"
        self.port = port
        root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(root, PG_USER)
        os.chmod(root, 0o755)
        init = [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync"]
        done = subprocess.run(_as_pg_user([*init, "-E", "UTF8"]), capture_output=True, text=True)
        if done.returncode != 0:
            raise PostgresError(f"initdb failed: {done.stderr.strip()[-2000:]}")
        settings = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(root),
            "fsync": "on",
            "synchronous_commit": "on",
            "full_page_writes": "on",
            "max_connections": "100",
            "shared_buffers": "128MB",
        }
        args = [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(port)]
        for k, v in settings.items():
            args += ["-c", f"{k}={v}"]
        self.proc = subprocess.Popen(_as_pg_user(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + start_timeout_s
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise PostgresError(f"postgres did not start on port {port} (exit status {self.proc.poll()})")
            time.sleep(0.1)

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname} sslmode=disable"

    def psql(self, sql: str) -> str:
        """Run ``sql`` with ``psql`` and return its unaligned, tuples-only output."""
        cmd = ["psql", "-X", "-q", "-At", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"]
        out = subprocess.run([*cmd, "-d", "postgres", "-c", sql], check=True, capture_output=True, text=True)
        return out.stdout.strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
