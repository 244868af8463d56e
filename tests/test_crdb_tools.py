"""Issue 21 item 5: what CockroachDB's tools send first, through psql and psycopg against the
PostgreSQL endpoint and through ``changefeed sql``: ``SELECT version()``, bracketed statement
sources (``FROM [SHOW CHANGEFEED JOBS]``), ``SHOW JOB(S) [WHEN COMPLETE]``, ``crdb_internal.jobs``,
``cluster_logical_timestamp()``, every unreserved keyword of PostgreSQL's and CockroachDB's
grammars as a name, and dollar-quoted string constants. One server per module (port 0)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

import changefeed
from changefeed.exceptions import StatementSyntaxError
from changefeed.sql.parser import parse
from tests.pg_server import RunningServer, start_server

KEYWORDS_FILE = Path(__file__).parent / "golden" / "unreserved_keywords.txt"
KEYWORDS = [line.split()[0] for line in KEYWORDS_FILE.read_text().splitlines() if not line.startswith("#")]
#: CockroachDB's build string as tools parse it (SQLAlchemy/Django adapters, Flyway, Liquibase).
VERSION = re.compile(r"^CockroachDB CCL v(\d+)\.(\d+)\.(\d+) \(.+\)$")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    db = tmp_path_factory.mktemp("crdbtools") / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE office_dogs (id INT PRIMARY KEY, name STRING)")
    srv = start_server(db)
    yield srv
    srv.stop()


def _psql(server: RunningServer, *commands: str) -> str:
    psql = shutil.which("psql")
    assert psql is not None, "psql is not installed (make setup installs postgresql-client)"
    args = [psql, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", server.host, "-p", str(server.port)]
    args += ["-U", "root", "-d", "defaultdb"]
    for c in commands:
        args += ["-c", c]
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10", "LC_ALL": "C.UTF-8", "PGCLIENTENCODING": "UTF8"}
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "changefeed.cli.main", "sql", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _job(server: RunningServer, conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("CREATE CHANGEFEED FOR TABLE office_dogs INTO 'topics://'").fetchone()
    assert row is not None
    return int(row[0])


# ----------------------------------------------------------------------------------- version()
def test_version_is_cockroachdbs_build_string(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        cur = conn.execute("SELECT version()")
        assert [d.name for d in cur.description or []] == ["version"]
        (version,) = cur.fetchone() or ("",)
        assert VERSION.match(version), version
        # the same string as the startup ParameterStatus and SHOW crdb_version; server_version is
        # the PostgreSQL release CockroachDB reports
        assert conn.info.parameter_status("crdb_version") == version
        assert conn.execute("SHOW crdb_version").fetchone() == (version,)
        assert conn.info.parameter_status("server_version") == "13.0.0"
        assert conn.execute("SELECT version(), current_database()").fetchone() == (version, "defaultdb")
    assert _psql(server, "SELECT version()").strip() == version
    out = _cli(server.db, "--json", "SELECT version()")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"version": version}


def test_cluster_logical_timestamp(server: RunningServer) -> None:
    before = time.time_ns()
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        cur = conn.execute("SELECT cluster_logical_timestamp()")
        assert [d.name for d in cur.description or []] == ["cluster_logical_timestamp"]
        (ts,) = cur.fetchone() or (None,)
    assert isinstance(ts, Decimal)
    assert re.fullmatch(r"\d{19}\.\d{10}", str(ts)), ts
    assert before - 10**9 < int(ts) < time.time_ns() + 10**9


# ------------------------------------------------------------------------ jobs and [statements]
def test_statement_sources_show_job_and_crdb_internal_jobs(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        job = _job(server, conn)
        rows = conn.execute("SELECT job_id, status FROM [SHOW CHANGEFEED JOBS]").fetchall()
        assert (job, "running") in rows
        rows = conn.execute(
            "SELECT job_id, job_type FROM [SHOW JOBS] WHERE status = 'running' AND job_id = %s", (job,)
        ).fetchall()
        assert rows == [(job, "CHANGEFEED")]
        cur = conn.execute(f"SHOW JOB {job}")
        assert [d.name for d in cur.description or []][:6] == [
            "job_id", "job_type", "description", "statement", "user_name", "status",
        ]  # fmt: skip
        assert [(r[0], r[5]) for r in cur.fetchall()] == [(job, "running")]
        assert conn.execute("SHOW JOB 1").fetchall() == []
        shown = conn.execute("SHOW JOBS SELECT job_id FROM [SHOW CHANGEFEED JOBS]").fetchall()
        assert job in [r[0] for r in shown]
        cur = conn.execute(f"SHOW CHANGEFEED JOBS (SELECT {job})")
        assert [(r[0], r[3]) for r in cur.fetchall()] == [(job, "running")]
        cur = conn.execute(
            "SELECT job_id, job_type, descriptor_ids, status, created FROM crdb_internal.jobs WHERE job_id = %s",
            (job,),
        )
        assert [d.name for d in cur.description or []] == [
            "job_id", "job_type", "descriptor_ids", "status", "created",
        ]  # fmt: skip
        ((jid, jtype, _ids, status, created),) = cur.fetchall()
        assert (jid, jtype, status) == (job, "CHANGEFEED", "running")
        assert created.tzinfo is not None
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            conn.execute("SELECT * FROM [INSERT INTO office_dogs VALUES (7, 'x')]")
        assert conn.execute("SELECT count(*) FROM office_dogs").fetchone() == (0,)
        conn.execute(f"CANCEL JOB {job}")
    lines = _psql(server, f"SELECT job_id, status FROM [SHOW JOBS] WHERE job_id = {job}").split()
    assert lines == [f"{job}|canceled"]


def test_show_jobs_when_complete_waits_for_a_terminal_state(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        job = _job(server, conn)
        got: list[Any] = []

        def wait() -> None:
            with psycopg.connect(server.dsn(), autocommit=True) as waiter:
                got.append(waiter.execute(f"SHOW JOBS WHEN COMPLETE (SELECT {job})").fetchall())

        t = threading.Thread(target=wait)
        t.start()
        time.sleep(1.0)
        assert t.is_alive() and not got, "SHOW JOBS WHEN COMPLETE returned while the job was running"
        conn.execute(f"CANCEL JOB {job}")
        t.join(10)
        assert not t.is_alive()
        assert [(r[0], r[5]) for r in got[0]] == [(job, "canceled")]
        # finished jobs return at once, through the single-job form too
        assert [r[5] for r in conn.execute(f"SHOW JOB WHEN COMPLETE {job}").fetchall()] == ["canceled"]
        # an explicit transaction's snapshot never sees a job finish: refused, not a hang
        with pytest.raises(psycopg.errors.ActiveSqlTransaction), conn.transaction():
            conn.execute(f"SHOW JOB WHEN COMPLETE {job}")


def test_show_job_when_complete_ends_on_cancel_request(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        job = _job(server, conn)
        timer = threading.Timer(0.8, conn.cancel_safe)  # cancel() would hold the GIL
        timer.start()
        started = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute(f"SHOW JOB WHEN COMPLETE {job}")
        assert time.monotonic() - started < 5
        conn.execute(f"CANCEL JOB {job}")


# ------------------------------------------------------------------ unreserved keywords as names
def test_the_keyword_list_is_postgresqls_and_cockroachdbs() -> None:
    assert len(KEYWORDS) == len(set(KEYWORDS)) > 570
    for word in ["by", "family", "if", "key", "insert", "update", "delete", "drop", "alter", "revoke", "set"]:
        assert word in KEYWORDS
    for reserved in ["select", "from", "where", "table", "primary", "order", "limit", "null"]:
        assert reserved not in KEYWORDS


TEMPLATES = [
    "CREATE TABLE IF NOT EXISTS {w} ({w} INT PRIMARY KEY, v INT, FAMILY f ({w}, v))",
    "CREATE TABLE t (id INT, {w} BYTES NOT NULL DEFAULT b'x', PRIMARY KEY ({w}))",
    "INSERT INTO {w} ({w}, v) VALUES (1, 2) RETURNING {w}",
    "SELECT {w}, {w}.{w}, v AS {w} FROM {w} WHERE {w} IN (1, 2) ORDER BY {w} DESC",
    "SELECT count({w}) FROM [SHOW JOBS] WHERE {w} IS NOT NULL",
    "UPDATE {w} SET {w} = {w} + 1 WHERE {w} = 1",
    "DELETE FROM {w} WHERE {w} = 3",
    "ALTER TABLE {w} ADD {w} INT, DROP COLUMN IF EXISTS {w}",
    "DROP TABLE IF EXISTS {w}",
    "CREATE CHANGEFEED FOR TABLE {w} INTO 'topics://' WITH {w}",
    "ALTER TABLE {w} ADD CHANGEFEED {w} WITH (FORMAT = 'JSON')",
    "GRANT SELECT ON TABLE {w} TO {w}",
]


def test_every_unreserved_keyword_is_a_name() -> None:
    """PostgreSQL's and CockroachDB's unreserved keywords parse as table, column, alias, option,
    changefeed and user names wherever a name may stand."""
    failures = []
    for word in KEYWORDS:
        for template in TEMPLATES:
            text = template.format(w=word)
            try:
                parse(text, "sql")
            except StatementSyntaxError as e:
                failures.append(f"{text}: {e}")
    assert failures == []


def test_every_unreserved_keyword_is_a_column(tmp_path: Path) -> None:
    """All of them as the columns of one table, written, updated, filtered and read back."""
    cols = ", ".join(f"{w} INT" for w in KEYWORDS)
    names = ", ".join(KEYWORDS)
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute(f"CREATE TABLE kw (id INT PRIMARY KEY, {cols})")
        values = ", ".join(str(i) for i in range(len(KEYWORDS)))
        conn.execute(f"INSERT INTO kw (id, {names}) VALUES (1, {values})")
        conn.execute("UPDATE kw SET " + ", ".join(f"{w} = {w} + 1" for w in KEYWORDS) + " WHERE id = 1")
        where = " AND ".join(f"{w} = {i + 1}" for i, w in enumerate(KEYWORDS) if i % 8 == 0)
        res = conn.execute(f"SELECT {names} FROM kw WHERE {where}")
        assert res.columns == KEYWORDS
        assert res.rows == [tuple(range(1, len(KEYWORDS) + 1))]


def test_keyword_names_over_the_wire(server: RunningServer) -> None:
    _psql(server, "CREATE TABLE t (id INT PRIMARY KEY, by BYTES, family STRING, if INT)")
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute("INSERT INTO t (id, by, family, if) VALUES (1, %s, 'f', 2)", (b"\x00by",))
        cur = conn.execute("SELECT by, family, if FROM t WHERE if = 2 ORDER BY by")
        assert [d.name for d in cur.description or []] == ["by", "family", "if"]
        assert cur.fetchall() == [(b"\x00by", "f", 2)]


# ----------------------------------------------------------------------- dollar-quoted strings
def test_dollar_quoted_strings(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        row = conn.execute("SELECT $$it's$$, $tag$a $$ b; c$tag$, $_1$$_1$").fetchone()
        assert row == ("it's", "a $$ b; c", "")
        conn.execute("INSERT INTO office_dogs (id, name) VALUES (%s, $$Petee's \\ bone$$)", (41,))
        assert conn.execute("SELECT name FROM office_dogs WHERE id = 41").fetchone() == ("Petee's \\ bone",)
        with pytest.raises(psycopg.errors.SyntaxError, match="unterminated dollar-quoted string"):
            conn.execute("SELECT $x$never closed")
    out = _psql(server, "SELECT $q$one; two$q$ AS s", "SELECT name FROM office_dogs WHERE id = 41")
    assert out.splitlines() == ["one; two", "Petee's \\ bone"]
    cli = _cli(server.db, "--json", "SELECT $$x$$ AS a, $t$y$t$ AS b")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout) == {"a": "x", "b": "y"}
