"""``changefeed cdc-poll`` (the design's polling loop) and Phoenix statements through ``changefeed sql``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import changefeed
from changefeed.cli.phoenix_cmd import poll
from changefeed.engine.database import Database

PY = sys.executable


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    return subprocess.run(
        [PY, "-m", "changefeed.cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_sql_then_cdc_poll_prints_each_change_once(tmp_path: Path) -> None:
    db = tmp_path / "db"
    ddl = "CREATE TABLE T (k INTEGER PRIMARY KEY, v1 INTEGER) COLUMN_ENCODED_BYTES=0; CREATE CDC C ON T INCLUDE (PRE, POST)"
    assert _cli("sql", "--db", str(db), ddl).returncode == 0
    res = _cli(
        "sql",
        "--db",
        str(db),
        "UPSERT INTO T VALUES (1, 10); UPSERT INTO T VALUES (1, 11); DELETE FROM T WHERE k = 1",
    )
    assert res.returncode == 0, res.stderr
    until = int(time.time() * 1000) + 300
    res = _cli(
        "cdc-poll",
        "--db",
        str(db),
        "c",
        "--until",
        str(until),
        "--safety-ms",
        "100",
        "--interval-ms",
        "50",
        "--json",
    )
    assert res.returncode == 0, res.stderr
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(x["K"], x["CDC JSON"]) for x in lines] == [
        (1, {"post_image": {"V1": 10}, "event_type": "upsert", "pre_image": {}}),
        (1, {"post_image": {"V1": 11}, "event_type": "upsert", "pre_image": {"V1": 10}}),
        (1, {"event_type": "delete", "pre_image": {"V1": 11}}),
    ]
    assert all(len(x["PHOENIX_ROW_TIMESTAMP()"]) == len("2024-05-28 09:55:30.123") for x in lines)
    # Tab-separated by default, and the include option replaces the DDL's scopes.
    res = _cli(
        "cdc-poll", "--db", str(db), "C", "--until", str(until), "--safety-ms", "0", "--include", "CHANGE"
    )
    assert [line.split("\t")[1:] for line in res.stdout.splitlines()] == [
        ["1", '{"change_image":{"V1":10},"event_type":"upsert"}'],
        ["1", '{"change_image":{"V1":11},"event_type":"upsert"}'],
        ["1", '{"event_type":"delete"}'],
    ]
    bad = _cli("cdc-poll", "--db", str(db), "C", "--from", "2024-05-29", "--until", "2024-05-28")
    assert bad.returncode == 1 and "reversed" in bad.stderr
    missing = _cli("cdc-poll", "--db", str(db), "NOPE", "--until", "0")
    assert missing.returncode == 1 and "ERROR 1012 (42M03)" in missing.stderr


def test_poll_waits_for_the_safety_margin(tmp_path: Path) -> None:
    c = changefeed.connect(tmp_path / "db")
    c.execute("CREATE TABLE T (k INTEGER PRIMARY KEY, v1 INTEGER) SALT_BUCKETS=2")
    c.execute("CREATE CDC C ON T SALT_BUCKETS=2")
    c.execute("UPSERT INTO T VALUES (1, 1)")
    db = Database(tmp_path / "db", create=False)
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        if len(sleeps) == 2:
            c.execute("UPSERT INTO T VALUES (2, 2)")  # committed while the loop waits
        time.sleep(s)

    until = int(time.time() * 1000) + 800
    rows = list(poll(db, "C", start_ms=None, until_ms=until, safety_ms=200, interval_ms=100, sleep=sleep))
    assert [r[1] for r in rows] == [1, 2]
    assert sleeps  # it waited for ranges to become safe
    db.close()
    c.close()
