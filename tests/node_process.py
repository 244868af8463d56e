"""A node (``changefeed start``) in its own process on explicit free loopback ports, for tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx

PY = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def node_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = PY
    env["PYSPARK_DRIVER_PYTHON"] = PY
    env["CHANGEFEED_GC_MIN_AGE_S"] = str(10**9)  # validators compare topics with the whole journal
    env["PYTHONPATH"] = str(Path(__file__).parents[1] / "src")
    return env


class NodeProcess:
    """``changefeed start --db DB`` with every endpoint on a port of its own (cql off)."""

    def __init__(self, db: Path, log: Path) -> None:
        self.db = db
        self.log_path = log
        self.ports = {k: free_port() for k in ("pg", "kafka", "registry", "http")}
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.ports['http']}"

    @property
    def kafka(self) -> str:
        return f"127.0.0.1:{self.ports['kafka']}"

    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.ports['pg']} user=root dbname=defaultdb sslmode=disable"

    def start(self, timeout: float = 120.0) -> None:
        args = [PY, "-m", "changefeed.cli.main", "start", "--db", str(self.db), "--cql", "off"]
        for k, p in self.ports.items():
            args += [f"--{k}", f"127.0.0.1:{p}"]
        self._log = open(self.log_path, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, env=node_env(), start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the node exited {self.proc.returncode}: {self.tail()}")
            try:
                if httpx.get(self.http + "/health?ready=1", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"the node was not ready in {timeout} s: {self.tail()}")

    def tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def kill9(self) -> None:
        """``kill -9`` of the node and everything it started (its JVM)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._close_log()

    def stop(self, timeout: float = 120.0) -> int:
        """SIGTERM to the node process alone; its exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            else:
                # nothing of the node (its JVM included) outlives it
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
            self._close_log()
        return code

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
