"""``changefeed start`` and ``serve`` refuse what cannot work with one ``ERROR:`` line (issue 21
item 4, issue 16's bad input): a port in use, an address that is not one, a garbage
``changefeed.db``, a read-only directory, a second node (or ``run``) on a database a node
delivers. Nothing is changed and no traceback is printed."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import changefeed
from changefeed.feeds.runners import claim

PY = sys.executable


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[1] / "src"))
    return subprocess.run(
        [PY, "-m", "changefeed.cli.main", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def _one_error(out: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert out.returncode == 1, (out.stdout, out.stderr)
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), out.stderr
    assert "Traceback" not in out.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def _db(tmp: Path) -> Path:
    db = tmp / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
        conn.execute("INSERT INTO t (id, v) VALUES (1, 'kept')")
    return db


def _rows(db: Path) -> list[tuple[object, ...]]:
    with changefeed.connect(db) as conn:
        return conn.execute("SELECT id, v FROM t").rows


FREE = ("--pg", ":0", "--kafka", ":0", "--registry", ":0", "--cql", "off", "--http", ":0")


@pytest.fixture
def busy_port() -> Iterator[int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    try:
        yield int(s.getsockname()[1])
    finally:
        s.close()


@pytest.mark.parametrize("command", ["start", "serve"])
def test_a_port_in_use_is_one_error_naming_it(tmp_path: Path, busy_port: int, command: str) -> None:
    db = _db(tmp_path)
    args = ["--pg", f"127.0.0.1:{busy_port}"]
    if command == "start":
        args = [*FREE[2:], *args]
    line = _one_error(
        _cli(command, "--db", str(db), *args), f"127.0.0.1:{busy_port}", "address already in use"
    )
    assert line.startswith("ERROR: pg: ")
    assert _rows(db) == [(1, "kept")]


@pytest.mark.parametrize("command", ["start", "serve"])
@pytest.mark.parametrize("address", ["26357x", "127.0.0.1:99999", "[::1"])
def test_a_bad_address_is_one_error(tmp_path: Path, command: str, address: str) -> None:
    _one_error(_cli(command, "--db", str(tmp_path / "db"), "--pg", address), f"--pg {address}")


@pytest.mark.parametrize("command", ["start", "serve"])
def test_a_garbage_database_file_is_refused_at_start(tmp_path: Path, command: str) -> None:
    db = tmp_path / "db"
    db.mkdir()
    (db / "changefeed.db").write_bytes(b"this is not SQLite at all\n" * 100)
    args = FREE if command == "start" else ("--pg", ":0")
    _one_error(_cli(command, "--db", str(db), *args), str(db / "changefeed.db"), "not a readable")
    assert (db / "changefeed.db").read_bytes().startswith(b"this is not SQLite")


@contextlib.contextmanager
def _immutable(path: Path) -> Iterator[None]:
    """A directory nobody (root included) can create files in: chattr +i."""
    got = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    assert got.returncode == 0, f"chattr +i is needed to make a read-only directory: {got.stderr}"
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.parametrize("command", ["start", "serve", "sql"])
def test_a_read_only_directory_is_named(tmp_path: Path, command: str) -> None:
    db = _db(tmp_path)
    for f in db.glob("changefeed.db-*"):  # a clean close leaves no WAL: the next open makes one
        f.unlink()
    with _immutable(db):
        if command == "sql":
            out = _cli("sql", "--db", str(db), "SELECT * FROM t")
        else:
            out = _cli(command, "--db", str(db), *(FREE if command == "start" else ("--pg", ":0")))
        _one_error(out, f"database directory {db}", "read-only")
    assert _rows(db) == [(1, "kept")]


def test_a_second_pipeline_on_a_database_is_refused(tmp_path: Path) -> None:
    db = _db(tmp_path)
    with claim(db, "node"):
        _one_error(_cli("start", "--db", str(db), *FREE), f"pid {os.getpid()}", "already delivering")
        _one_error(_cli("run", "--db", str(db), "--until-idle"), f"pid {os.getpid()}", "already delivering")
    assert _rows(db) == [(1, "kept")]
