"""Core CockroachDB changefeeds through ``Connection.stream`` and ``changefeed sql``: initial scan,
changes in commit order, options, resolved messages, end conditions, cancellation, errors."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import changefeed
from changefeed.cli.crdb_csv import field_text
from changefeed.connection import Connection
from changefeed.engine.clock import CommitTs
from changefeed.exceptions import (
    ChangefeedFailed,
    InvalidOption,
    InvalidStatement,
    PermissionDenied,
    UndefinedTable,
)
from changefeed.pipeline.sinkless import CoreChangefeed

SRC = str(Path(__file__).resolve().parents[1] / "src")


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Connection]:
    conn = changefeed.connect(tmp_path / "db")
    yield conn
    conn.close()


def take(feed: CoreChangefeed, n: int) -> list[tuple[str | None, bytes | None, bytes]]:
    return [next(feed) for _ in range(n)]


def updated(value: bytes) -> CommitTs:
    return CommitTs.parse_crdb(json.loads(value)["updated"])


def test_scan_then_changes(db: Connection, tmp_path: Path) -> None:
    db.execute("CREATE TABLE cdc_test (a INT PRIMARY KEY)")
    db.execute("INSERT INTO cdc_test VALUES (0)")
    writer = changefeed.connect(tmp_path / "db")
    with db.stream("EXPERIMENTAL CHANGEFEED FOR cdc_test") as feed:
        assert next(feed) == ("cdc_test", b"[0]", b'{"after": {"a": 0}}')
        writer.execute("INSERT INTO cdc_test VALUES (1)")
        writer.execute("DELETE FROM cdc_test WHERE a = 0")
        assert take(feed, 2) == [
            ("cdc_test", b"[1]", b'{"after": {"a": 1}}'),
            ("cdc_test", b"[0]", b'{"after": null}'),
        ]
    writer.close()


def test_updated_ordering_and_one_message_per_transaction(db: Connection, tmp_path: Path) -> None:
    db.execute("CREATE TABLE foo (id INT PRIMARY KEY, name STRING)")
    w = changefeed.connect(tmp_path / "db")
    with db.stream("CREATE CHANGEFEED FOR TABLE foo WITH updated, envelope = 'row'") as feed:
        w.execute("INSERT INTO foo VALUES (1, 'Carl')")
        w.execute("UPDATE foo SET name = 'Petee' WHERE id = 1")
        with w.transaction():  # several writes to one row in one transaction: one message
            w.execute("INSERT INTO foo VALUES (2, 'x')")
            w.execute("UPDATE foo SET name = 'Ernie' WHERE id = 2")
        msgs = take(feed, 3)
    w.close()
    values = [json.loads(v) for _, _, v in msgs]
    assert [(m["id"], m["name"]) for m in values] == [(1, "Carl"), (1, "Petee"), (2, "Ernie")]
    stamps = [updated(json.dumps(m["__crdb__"]).encode()) for m in values]
    assert stamps == sorted(stamps) and len(set(stamps)) == 3
    assert msgs[0][2].startswith(b'{"__crdb__": {"updated": "')


def test_diff_and_cursor(db: Connection, tmp_path: Path) -> None:
    db.execute("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    with db.stream("EXPERIMENTAL CHANGEFEED FOR t WITH diff, updated") as feed:
        w = changefeed.connect(tmp_path / "db")
        w.execute("INSERT INTO t VALUES (1, 'a')")
        w.execute("UPDATE t SET v = 'b' WHERE k = 1")
        first, second = take(feed, 2)
    assert json.loads(first[2])["before"] is None
    assert json.loads(second[2])["before"] == {"k": 1, "v": "a"}
    # cursor: only changes after it, no initial scan
    cursor = updated(first[2]).crdb()
    with db.stream(f"EXPERIMENTAL CHANGEFEED FOR t WITH cursor = '{cursor}'") as feed:
        assert next(feed) == ("t", b"[1]", b'{"after": {"k": 1, "v": "b"}}')
        w.execute("DELETE FROM t WHERE k = 1")
        assert next(feed) == ("t", b"[1]", b'{"after": null}')
    # initial_scan='yes' with a cursor: the table as it was at the cursor
    with db.stream(f"EXPERIMENTAL CHANGEFEED FOR t WITH cursor = '{cursor}', initial_scan = 'yes'") as feed:
        assert take(feed, 3) == [
            ("t", b"[1]", b'{"after": {"k": 1, "v": "a"}}'),
            ("t", b"[1]", b'{"after": {"k": 1, "v": "b"}}'),
            ("t", b"[1]", b'{"after": null}'),
        ]
    w.close()


def test_initial_scan_only_and_end_time_end_the_feed(db: Connection, tmp_path: Path) -> None:
    db.execute("CREATE TABLE t (k INT PRIMARY KEY)")
    db.execute("INSERT INTO t VALUES (1), (2)")
    assert list(db.stream("EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan_only")) == [
        ("t", b"[1]", b'{"after": {"k": 1}}'),
        ("t", b"[2]", b'{"after": {"k": 2}}'),
    ]
    res = db.execute("EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan = 'only'")
    assert res.columns == ["table", "key", "value"] and len(res.rows) == 2
    end = time.time_ns() + 700_000_000
    t0 = time.monotonic()
    msgs = list(
        db.stream(f"EXPERIMENTAL CHANGEFEED FOR t WITH end_time = '{end}', no_initial_scan, resolved")
    )
    assert 0.5 < time.monotonic() - t0 < 5
    assert all(t is None for t, _, _ in msgs)  # only resolved messages, none past end_time
    assert all(CommitTs.parse_crdb(json.loads(v)["resolved"]).wall <= end for _, _, v in msgs)
    with pytest.raises(InvalidStatement, match="streams its rows until it is cancelled"):
        db.execute("EXPERIMENTAL CHANGEFEED FOR t")


def test_resolved_follows_all_data_below_it(db: Connection, tmp_path: Path) -> None:
    db.execute("CREATE TABLE a (k INT PRIMARY KEY)")
    db.execute("CREATE TABLE b (k INT PRIMARY KEY)")
    w = changefeed.connect(tmp_path / "db")
    seen: list[tuple[str | None, CommitTs]] = []
    with db.stream("EXPERIMENTAL CHANGEFEED FOR a, b WITH updated, resolved = '200ms'") as feed:
        for i in range(6):
            with w.transaction():
                w.execute(f"INSERT INTO a VALUES ({i})")
                w.execute(f"INSERT INTO b VALUES ({i})")
        deadline = time.monotonic() + 10
        while len([s for s in seen if s[0] is None]) < 2 and time.monotonic() < deadline:
            table, _key, value = next(feed)
            doc = json.loads(value)
            seen.append((table, CommitTs.parse_crdb(doc["resolved"] if table is None else doc["updated"])))
    w.close()
    rows = [ts for t, ts in seen if t is not None]
    assert len(rows) == 12 and rows == sorted(rows)  # both tables, in commit order
    last_resolved = CommitTs(0)
    for t, ts in seen:
        if t is None:
            assert ts > last_resolved
            last_resolved = ts
        else:
            assert ts > last_resolved  # nothing at or below a resolved timestamp after it
    assert [t for t, _ in seen[:2]] in (["a", "b"], ["b", "a"])


def test_close_releases_and_cancels(db: Connection, tmp_path: Path) -> None:
    db.execute("CREATE TABLE t (k INT PRIMARY KEY)")
    db.execute("INSERT INTO t VALUES (1)")
    feed = db.stream("EXPERIMENTAL CHANGEFEED FOR t")
    assert next(feed)[1] == b"[1]"
    feed.close()
    with pytest.raises(StopIteration):
        next(feed)
    db.execute("INSERT INTO t VALUES (2)")  # the connection stays usable


def test_cancel_from_another_thread_ends_an_idle_feed(db: Connection) -> None:
    """``cancel()`` (a server's CANCEL QUERY, a client disconnect) ends a feed blocked waiting for
    changes on an idle table within a poll interval, and the iterating thread sees the end."""
    import threading

    db.execute("CREATE TABLE t (k INT PRIMARY KEY)")
    db.execute("INSERT INTO t VALUES (1)")
    feed = db.stream("EXPERIMENTAL CHANGEFEED FOR t")
    seen: list[object] = []

    def consume() -> None:
        seen.extend(feed)  # blocks on the idle table after the scan's one message
        feed.close()

    thread = threading.Thread(target=consume)
    thread.start()
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    feed.cancel()
    thread.join(5)
    assert not thread.is_alive()
    assert feed.cancelled and [m[1] for m in seen] == [b"[1]"]  # type: ignore[index]


def test_statement_errors(db: Connection) -> None:
    db.execute("CREATE TABLE t (k INT PRIMARY KEY)")
    with pytest.raises(InvalidOption, match='invalid option "foo"'):
        db.stream("EXPERIMENTAL CHANGEFEED FOR t WITH foo")
    with pytest.raises(InvalidOption, match="cannot specify both initial_scan and no_initial_scan"):
        db.stream("EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan, no_initial_scan")
    with pytest.raises(InvalidOption, match="unknown envelope: nope"):
        db.stream("EXPERIMENTAL CHANGEFEED FOR t WITH envelope = nope")
    with pytest.raises(UndefinedTable, match='table "nope" does not exist'):
        db.stream("EXPERIMENTAL CHANGEFEED FOR nope")
    with pytest.raises(InvalidStatement, match="are duplicates"):
        db.stream("EXPERIMENTAL CHANGEFEED FOR t, t")
    with pytest.raises(InvalidStatement, match="one core changefeed statement"):
        db.stream("SELECT 1")
    with pytest.raises(InvalidOption, match="is in the future"):
        db.stream(f"EXPERIMENTAL CHANGEFEED FOR t WITH cursor = '{time.time_ns() + 10**12}'")


def test_field_text() -> None:
    assert field_text(b'{"after": {"a": 0}}') == '{"after": {"a": 0}}'
    assert field_text(b"\x00\x00\x00\x00\x01\x02\x00") == "\\000\\000\\000\\000\\001\\002\\000"
    assert field_text(b"\xff") == "\\377"
    assert field_text(None) == ""
    assert field_text("désolée".encode()) == "désolée"


# ============================================================================ changefeed sql


def cli(db: Path, *args: str, **kw: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.Popen(
        [sys.executable, "-m", "changefeed.cli.main", "sql", "--db", str(db), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kw,  # type: ignore[call-overload]
    )


def test_cli_streams_csv_until_sigterm(tmp_path: Path) -> None:
    db = tmp_path / "db"
    conn = changefeed.connect(db)
    conn.execute("CREATE TABLE cdc_test (a INT PRIMARY KEY)")
    conn.execute("INSERT INTO cdc_test VALUES (0)")
    proc = cli(db, "EXPERIMENTAL CHANGEFEED FOR cdc_test")
    assert proc.stdout is not None
    assert proc.stdout.readline() == "table,key,value\n"
    assert proc.stdout.readline() == 'cdc_test,[0],"{""after"": {""a"": 0}}"\n'
    conn.execute("INSERT INTO cdc_test VALUES (1)")
    assert proc.stdout.readline() == 'cdc_test,[1],"{""after"": {""a"": 1}}"\n'
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    conn.close()


def test_cli_error_exit(tmp_path: Path) -> None:
    proc = cli(tmp_path / "db", "CREATE TABLE t (a INT PRIMARY KEY); EXPERIMENTAL CHANGEFEED FOR t WITH foo")
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert err.strip() == 'ERROR: invalid option "foo"'


def test_privileges(db: Connection, tmp_path: Path) -> None:
    db.execute("CREATE TABLE t (k INT PRIMARY KEY)")
    db.execute("CREATE USER user1")
    user = changefeed.connect(tmp_path / "db", user="user1")
    with pytest.raises(PermissionDenied) as e:
        user.stream("EXPERIMENTAL CHANGEFEED FOR t")
    assert str(e.value) == (
        "user user1 requires the SELECT privilege on all target tables to be able to run a core changefeed"
    )
    user.close()
    db.execute("GRANT SELECT ON TABLE t TO user1")
    user = changefeed.connect(tmp_path / "db", user="user1")
    assert list(user.stream("EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan_only")) == []
    user.close()


def test_schema_change_policies(db: Connection, tmp_path: Path) -> None:
    db.execute("CREATE TABLE t (k INT PRIMARY KEY, v STRING)")
    db.execute("INSERT INTO t VALUES (1, 'a')")
    w = changefeed.connect(tmp_path / "db")
    # stop: everything before the change, then CockroachDB's error naming the change's timestamp
    with db.stream("EXPERIMENTAL CHANGEFEED FOR t WITH schema_change_policy = 'stop'") as feed:
        assert next(feed)[1] == b"[1]"
        w.execute("ALTER TABLE t ADD COLUMN d INT DEFAULT 7")
        with pytest.raises(ChangefeedFailed) as e:
            next(feed)
    assert re.fullmatch(
        r'shut down due to schema change and schema_change_policy="stop": '
        r"schema change occurred at [0-9]+\.[0-9]{10}",
        str(e.value),
    )
    # a nullable column without a default needs no backfill under the default events...
    with db.stream("EXPERIMENTAL CHANGEFEED FOR t WITH no_initial_scan") as feed:
        w.execute("ALTER TABLE t ADD COLUMN n INT")
        w.execute("UPDATE t SET v = 'b' WHERE k = 1")
        assert next(feed)[2] == b'{"after": {"d": 7, "k": 1, "n": null, "v": "b"}}'
    # ...but is a change under schema_change_events = 'column_changes'
    with db.stream(
        "EXPERIMENTAL CHANGEFEED FOR t WITH no_initial_scan, schema_change_events = 'column_changes'"
    ) as feed:
        w.execute("ALTER TABLE t ADD COLUMN m INT")
        assert take(feed, 2) == [
            ("t", b"[1]", b'{"after": {"d": 7, "k": 1, "n": null, "v": "b"}}'),
            ("t", b"[1]", b'{"after": {"d": 7, "k": 1, "m": null, "n": null, "v": "b"}}'),
        ]
    w.close()


def test_jsonb_numbers_keep_every_digit(db: Connection) -> None:
    """JSONB numbers are decimals (CockroachDB's apd, PostgreSQL's numeric): a feed carries the
    digits written, not a binary float's rounding of them; an exponent is read into the digits."""
    db.execute("CREATE TABLE jdoc (id INT PRIMARY KEY, doc JSONB)")
    db.execute(
        """INSERT INTO jdoc VALUES (1, '{"x": 0.1234567890123456789, "big": 123456789012345678901234567890, "e": 1.5e2, "t": 1.10}')"""
    )
    with db.stream("EXPERIMENTAL CHANGEFEED FOR jdoc") as feed:
        assert next(feed) == (
            "jdoc",
            b"[1]",
            b'{"after": {"doc": {"big": 123456789012345678901234567890, "e": 150, "t": 1.10,'
            b' "x": 0.1234567890123456789}, "id": 1}}',
        )
    assert db.execute("SELECT doc ->> 'x', doc -> 'big' FROM jdoc").rows == [
        ("0.1234567890123456789", "123456789012345678901234567890")
    ]
