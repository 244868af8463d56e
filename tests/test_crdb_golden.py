"""The CockroachDB documents' changefeed examples, run verbatim through ``changefeed sql`` and
through ``Connection.stream``, printing what the documents show (tests/golden/crdb/*.sql).

File format (lines starting ``--`` are comments unless they are one of these markers):

* statements before ``-- changefeed`` set the database up;
* ``-- changefeed``: the changefeed statement, streamed while the ``-- expect`` block runs;
* ``-- expect``: the exact CSV lines ``changefeed sql`` prints; a line ``> STATEMENTS`` runs those
  statements (from another connection) once every line above it has been read. HLC timestamps
  print as ``<ts1>``, ``<ts2>``... numbered in order of first appearance, and the numbering must
  follow the real order (``<ts1>`` < ``<ts2>``). Resolved messages are compared only where the
  block expects one (how many arrive depends on timing): others, and repeats, are skipped;
* ``-- end``: the changefeed ends by itself after the last line (exit 0);
* ``-- error``: the next statement fails, printing the ``ERROR: ...`` line that follows it;
* ``-- serve ARGS``: ``changefeed serve --db DB ARGS`` runs during the test (e.g. the schema
  registry the document names, ``--registry 127.0.0.1:8081``); skipped when its port is taken.
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

import pytest

import changefeed
from changefeed.cli.crdb_csv import field_text
from changefeed.exceptions import ChangefeedError

GOLDEN = Path(__file__).parent / "golden" / "crdb"
SRC = str(Path(__file__).resolve().parents[1] / "src")
TIMEOUT_S = 20.0
CLI_ERRORS = 3
HLC = re.compile(r"\d{10,}\.\d{10}")
# the enriched envelope's processing time, job id and cluster id (raw or CSV-quoted JSON)
IDS = (
    (re.compile(r'("{1,2})ts_ns\1: \d+'), r"\1ts_ns\1: <ns>"),
    (re.compile(r'("{1,2})job_id\1: \1\d+\1'), r"\1job_id\1: \1<job>\1"),
    (re.compile(r'("{1,2})cluster_id\1: \1[0-9a-f-]{36}\1'), r"\1cluster_id\1: \1<cluster>\1"),
)


@dataclass
class Golden:
    setup: list[str] = field(default_factory=list)
    feed: str = ""
    expect: list[str] = field(default_factory=list)  # output lines and "> statements" lines
    ends: bool = False
    errors: list[tuple[str, str]] = field(default_factory=list)
    serve: list[str] = field(default_factory=list)


def load(path: Path) -> Golden:
    g = Golden()
    section = "setup"
    pending: list[str] = []
    for line in path.read_text().splitlines():
        marker = line.strip()
        if marker in ("-- changefeed", "-- expect", "-- end", "-- error"):
            if section == "changefeed":
                g.feed = " ".join(pending).strip().rstrip(";")
                pending = []
            section = marker[3:]
            if section == "end":
                g.ends = True
            continue
        if marker.startswith("-- serve "):
            g.serve = marker[len("-- serve ") :].split()
            continue
        if section == "expect":
            g.expect.append(line)
        elif section == "error" and line.startswith("ERROR: "):
            g.errors.append((" ".join(pending).strip().rstrip(";"), line))
            pending = []
        elif line.startswith("--") or not line.strip():
            continue
        elif section == "setup":
            g.setup.append(line)
        else:
            pending.append(line)
    return g


def cases() -> list[Path]:
    return sorted(GOLDEN.glob("*.sql"))


def cli(db: Path, *statements: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.Popen(
        [sys.executable, "-m", "changefeed.cli.main", "sql", "--db", str(db), *statements],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


@contextlib.contextmanager
def serving(db: Path, args: list[str]) -> Iterator[None]:
    """``changefeed serve --db DB ARGS`` until the block ends (each address must be free)."""
    if not args:
        yield
        return
    addresses = [a for a in args if ":" in a]
    for address in addresses:
        host, port = address.rsplit(":", 1)
        with socket.socket() as s:
            if s.connect_ex((host, int(port))) == 0:
                pytest.fail(f"{address} is in use: cannot serve the document's endpoint there")
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen(
        [sys.executable, "-m", "changefeed.cli.main", "serve", "--db", str(db), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        for address in addresses:
            host, port = address.rsplit(":", 1)
            while True:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else "serve exited"
                with socket.socket() as s:
                    if s.connect_ex((host, int(port))) == 0:
                        break
                assert time.monotonic() < deadline, f"changefeed serve did not listen on {address}"
                time.sleep(0.1)
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def csv_line(table: str | None, key: bytes | None, value: bytes) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow((table or "", field_text(key), field_text(value)))
    return buf.getvalue()


class Masker:
    """Replaces HLC timestamps by ``<tsN>`` in order of first appearance (checks their order) and
    the enriched envelope's ``ts_ns``, ``job_id`` and ``cluster_id`` by ``<ns>``, ``<job>``,
    ``<cluster>``."""

    def __init__(self) -> None:
        self.labels: dict[str, str] = {}

    def __call__(self, line: str) -> str:
        def label(m: re.Match[str]) -> str:
            return self.labels.setdefault(m.group(0), f"<ts{len(self.labels) + 1}>")

        for pattern, repl in IDS:
            line = pattern.sub(repl, line)
        return HLC.sub(label, line)

    def check_order(self) -> None:
        stamps = [Decimal(s) for s in self.labels]
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps), self.labels


def match(g: Golden, next_line: Callable[[], str | None], run: Callable[[str], None]) -> list[str]:
    """Walk the expect block against the output; returns the lines as compared (masked)."""
    mask = Masker()
    got: list[str] = []
    for want in g.expect:
        if want.startswith("> "):
            run(want[2:])
            got.append(want)
            continue
        resolved_wanted = want.startswith(",,")
        while True:
            line = next_line()
            assert line is not None, "the changefeed ended early; got so far:\n" + "\n".join(got)
            is_resolved = line.startswith(",,")
            if is_resolved and not resolved_wanted:
                continue  # a resolved message where none is compared
            if resolved_wanted and not is_resolved:
                raise AssertionError(f"expected a resolved message, got {line!r}; so far:\n" + "\n".join(got))
            break
        got.append(mask(line))
    mask.check_order()
    return got


@pytest.mark.parametrize("path", cases(), ids=lambda p: p.stem)
def test_golden_cli(tmp_path: Path, path: Path) -> None:
    g = load(path)
    db = tmp_path / "db"
    writer = changefeed.connect(db)
    try:
        for _ in writer.execute_script("\n".join(g.setup)):
            pass
    finally:
        writer.close()
    # Failing statements, each in its own `changefeed sql`, started at once. A process start costs
    # ~1.5 s of CPU, so the command line checks the first few; the stream test checks them all.
    procs = [(stmt, error, cli(db, stmt)) for stmt, error in g.errors[:CLI_ERRORS]]
    for stmt, error, proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert (proc.returncode, err.strip()) == (1, error), stmt
    if not g.feed:
        return
    with serving(db, g.serve):
        got = cli_feed(g, db)
    assert got == g.expect


def cli_feed(g: Golden, db: Path) -> list[str]:
    """Stream ``g.feed`` through ``changefeed sql`` along the expect block."""
    writer = changefeed.connect(db)
    proc = cli(db, g.feed)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            lines.put(raw.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()

    def next_line() -> str | None:
        try:
            return lines.get(timeout=TIMEOUT_S)
        except queue.Empty:
            return None

    def run(statements: str) -> None:
        for _ in writer.execute_script(statements):
            pass

    try:
        got = match(g, next_line, run)
        if g.ends:
            assert proc.wait(timeout=TIMEOUT_S) == 0
            assert next_line() is None
        else:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=TIMEOUT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        writer.close()
    return got


@pytest.mark.parametrize("path", cases(), ids=lambda p: p.stem)
def test_golden_stream(tmp_path: Path, path: Path) -> None:
    g = load(path)
    conn = changefeed.connect(tmp_path / "db")
    writer = changefeed.connect(tmp_path / "db")
    try:
        for _ in conn.execute_script("\n".join(g.setup)):
            pass
        for stmt, error in g.errors:
            with pytest.raises(ChangefeedError) as e:
                conn.stream(stmt)
            assert f"ERROR: {e.value}" == error
        if not g.feed:
            return
        with serving(tmp_path / "db", g.serve):
            got = stream_feed(g, conn, writer)
        assert got == g.expect
    finally:
        writer.close()
        conn.close()


def stream_feed(g: Golden, conn: changefeed.Connection, writer: changefeed.Connection) -> list[str]:
    """Stream ``g.feed`` through ``Connection.stream`` along the expect block."""
    feed = conn.stream(g.feed)
    it: Iterator[str] = itertools.chain(["table,key,value"], (csv_line(*m) for m in feed))

    def next_line() -> str | None:
        return next(it, None)

    def run(statements: str) -> None:
        for _ in writer.execute_script(statements):
            pass

    with feed:
        got = match(g, next_line, run)
        if g.ends:
            assert next_line() is None
    return got
