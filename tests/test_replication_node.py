"""Asynchronous replication from a source on another "host" (issue 20): the source node runs in a
network namespace of its own (``ip netns`` + a veth pair, iproute2; the tests run as root) and
the destination reaches it only over the network: DDL and schemas through its PostgreSQL
endpoint, the changefeeds' records through its Kafka endpoint, as a user with a password (the
node does not trust ``root`` from another host), the password in a destination secret.

The source node is ``changefeed start`` (issue 16) when the installed CLI has it, else
``changefeed serve --pg .. --kafka ..`` plus ``changefeed run`` for its pipeline, both inside the
namespace. The destination runs its pipeline in this process (``run_forever`` on the test
session's Spark). A random multi-table workload runs on the source; every sampled snapshot of the
GLOBAL replicas equals the source as of its barrier; afterwards the ROW replicas equal the
source, and the GLOBAL ones after ``STATE = "DONE"``; DROP removes the source's changefeeds
through the network.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed.testing.replication import (
    BankWorkload,
    Check,
    check_at_barrier,
    check_equal,
    setup_bank,
    wait_caught_up,
)

PY = sys.executable
PG_PORT, KAFKA_PORT = 36257, 39092  # inside the namespace: nothing else listens there
CLI = [PY, "-m", "changefeed.cli.main"]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def netns() -> Iterator[tuple[str, str]]:
    """A network namespace with a veth link to this one: (namespace, its address)."""
    if shutil.which("ip") is None:
        pytest.fail("iproute2's ip is needed (make setup installs it)")
    if os.geteuid() != 0:
        pytest.fail("network namespaces need root")
    n = random.Random(os.getpid() ^ time.time_ns()).randrange(1, 250)
    ns, host_if, ns_if = f"cfrepl{os.getpid()}", f"cfh{os.getpid() % 100000}", f"cfn{os.getpid() % 100000}"
    host_ip, ns_ip = f"10.78.{n}.1", f"10.78.{n}.2"
    _ip("netns", "add", ns)
    try:
        _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        _ip("link", "set", ns_if, "netns", ns)
        _ip("addr", "add", f"{host_ip}/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("netns", "exec", ns, "ip", "addr", "add", f"{ns_ip}/30", "dev", ns_if)
        _ip("netns", "exec", ns, "ip", "link", "set", ns_if, "up")
        _ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
        yield ns, ns_ip
    finally:
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        subprocess.run(["ip", "link", "delete", host_if], capture_output=True)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PYSPARK_PYTHON"] = PY
    env["PYSPARK_DRIVER_PYTHON"] = PY
    env["CHANGEFEED_GC_MIN_AGE_S"] = str(10**9)  # the checks undo changes through the change stream
    env["PYTHONPATH"] = str(Path(__file__).parents[1] / "src")
    return env


def _has_start() -> bool:
    out = subprocess.run([*CLI, "start", "--help"], capture_output=True, env=_env())
    return out.returncode == 0


def _start_source(ns: str, ip: str, src: Path, log: Any) -> list[subprocess.Popen[bytes]]:
    """The source node inside the namespace (process groups of its own, to kill -TERM)."""
    run = ["ip", "netns", "exec", ns]
    pg, kafka = f"{ip}:{PG_PORT}", f"{ip}:{KAFKA_PORT}"
    kw: dict[str, Any] = {
        "stdout": log,
        "stderr": subprocess.STDOUT,
        "env": _env(),
        "start_new_session": True,
    }
    if _has_start():
        flags = ["--pg", pg, "--kafka", kafka, "--registry", "off", "--cql", "off", "--http", "off"]
        return [subprocess.Popen([*run, *CLI, "start", "--db", str(src), *flags], **kw)]
    return [
        subprocess.Popen([*run, *CLI, "serve", "--db", str(src), "--pg", pg, "--kafka", kafka], **kw),
        subprocess.Popen([*run, *CLI, "run", "--db", str(src)], **kw),
    ]


def _wait_listening(ip: str, port: int, timeout: float = 120.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((ip, port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.spark
def test_replication_from_a_node_in_another_network_namespace(
    spark: Any, tmp_path: Path, netns: tuple[str, str]
) -> None:
    from changefeed.pipeline.runner import run_forever

    ns, ip = netns
    src, dst = tmp_path / "src", tmp_path / "dst"
    setup_bank(src, accounts=30)
    s = changefeed.connect(src)
    s.execute("CREATE USER replicator WITH PASSWORD 'rep-secret-1'")
    s.execute("GRANT SELECT, CHANGEFEED ON TABLE accounts, moves TO replicator")
    s.close()
    log = open(tmp_path / "source.log", "wb")  # noqa: SIM115
    procs = _start_source(ns, ip, src, log)
    stop = threading.Event()
    samples: list[Check] = []
    runner: threading.Thread | None = None
    try:
        _wait_listening(ip, PG_PORT)
        _wait_listening(ip, KAFKA_PORT)
        d = changefeed.connect(dst)
        d.execute("CREATE SECRET replicator_password WITH (value = 'rep-secret-1')")
        conn = f"changefeed://{ip}:{PG_PORT}/?kafka={ip}:{KAFKA_PORT}"
        auth = "USER = 'replicator', PASSWORD_SECRET_NAME = 'replicator_password'"
        d.execute(
            f"CREATE ASYNC REPLICATION g FOR accounts AS accounts_g, moves AS moves_g WITH (CONNECTION_STRING = '{conn}',"
            f" {auth}, CONSISTENCY_LEVEL = 'GLOBAL', COMMIT_INTERVAL = Interval('PT0.5S'))"
        )
        d.execute(
            f"CREATE ASYNC REPLICATION r FOR accounts AS accounts_r WITH (CONNECTION_STRING = '{conn}', {auth})"
        )
        rows = d.execute(
            "SELECT name, endpoint, user FROM `.sys/async_replications` ORDER BY name, item"
        ).rows
        assert rows == [("g", f"{ip}:{PG_PORT}", "replicator")] * 2 + [("r", f"{ip}:{PG_PORT}", "replicator")]
        runner = threading.Thread(
            target=run_forever,
            kwargs={"db": dst, "spark": spark, "stop": stop, "install_signals": False},
            daemon=True,
        )
        runner.start()
        bg = BankWorkload(src, seeds=[31, 32], duration=20, sleep=0.01, keys=40)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            samples.append(check_at_barrier(src, dst, "g"))
            if len({c.barrier for c in samples if c.barrier}) >= 5 and bg._result.ready():
                break
            time.sleep(0.5)
        assert bg.join(timeout=300) > 50
        wait_caught_up(src, dst, "g", timeout_s=300)
        wait_caught_up(src, dst, "r", timeout_s=300)
        samples.append(check_at_barrier(src, dst, "g"))
        bad = [c for c in samples if not c.ok]
        assert not bad, str(bad[0])
        assert len({c.barrier for c in samples if c.barrier}) >= 3
        assert check_equal(src, dst, "r").ok, str(check_equal(src, dst, "r"))
        stop.set()
        runner.join(timeout=300)
        d.execute("ALTER ASYNC REPLICATION g SET (STATE = 'DONE')")
        assert check_equal(src, dst, "g").ok
        d.execute("UPSERT INTO accounts_g (id, owner) VALUES (1000, 'after failover')")  # writable now
        d.execute("DROP ASYNC REPLICATION g")
        d.execute("DROP ASYNC REPLICATION r CASCADE")
        s = changefeed.connect(src)
        assert (
            s.db.conn.execute("SELECT COUNT(*) FROM _feeds").fetchone()[0] == 0
        )  # dropped through the network
        s.close()
        d.close()
    finally:
        stop.set()
        if runner is not None:
            runner.join(timeout=300)
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        log.close()
