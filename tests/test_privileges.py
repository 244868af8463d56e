"""Privileges, enforced by every statement family: the CockroachDB rules of the spec
(``cockroachdb-experimental-changefeed-for.txt``, "Required privileges") and CockroachDB's error
texts, through ``changefeed.connect(db, user=...)``, the ``changefeed sql --user`` command and
``changefeed read --user``. A denied statement raises PermissionDenied (SQLSTATE 42501) and
changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import changefeed
from changefeed.cli.main import cli
from changefeed.engine import privileges as P
from changefeed.engine.catalog import TableSchema
from changefeed.exceptions import InvalidAuthorization, PermissionDenied

FEED = "ALTER TABLE {t} ADD CHANGEFEED {f} WITH (FORMAT = 'JSON', MODE = 'UPDATES')"

SETUP = [
    "CREATE TABLE t (a INT PRIMARY KEY, b STRING)",
    "INSERT INTO t VALUES (1, 'one')",
    "CREATE TABLE other (a INT PRIMARY KEY)",
    "CREATE USER nopriv",
    "CREATE USER reader",
    "GRANT SELECT ON TABLE t TO reader",
    "CREATE USER writer",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE t TO writer",
    "CREATE USER inserter",
    "GRANT INSERT ON TABLE t TO inserter",
    "CREATE USER feeder",
    "GRANT CHANGEFEED ON TABLE t TO feeder",
    "CREATE USER controller WITH CONTROLCHANGEFEED",
    "GRANT CHANGEFEED ON TABLE t TO controller",
    "CREATE USER controller_sel WITH CONTROLCHANGEFEED",
    "GRANT SELECT ON TABLE t TO controller_sel",
    "CREATE ROLE analysts",
    "GRANT SELECT ON TABLE t TO analysts",
    "CREATE USER analyst",
    "GRANT analysts TO analyst",
    "CREATE USER boss",
    "GRANT admin TO boss",
    "CREATE USER rolemaker WITH CREATEROLE",
    "CREATE USER ddl",
    "GRANT CREATE, DROP ON TABLE t TO ddl",
    "CREATE USER owner",
    FEED.format(t="t", f="updates"),
    FEED.format(t="t", f="spare"),
]


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("privileges") / "db"
    with changefeed.connect(path) as root:
        for s in SETUP:
            root.execute(s)
    with changefeed.connect(path, user="owner") as owner:
        owner.execute("CREATE TABLE owned (a INT PRIMARY KEY)")
    return path


@pytest.fixture(scope="module")
def root(db: Path) -> Iterator[changefeed.Connection]:
    with changefeed.connect(db) as conn:
        yield conn


def snapshot(root: changefeed.Connection) -> dict[str, Any]:
    """Everything a statement could change."""
    c = root.db.conn
    return {
        "t": root.execute("SELECT * FROM t ORDER BY a").rows,
        "columns": root.execute("SHOW COLUMNS FROM t").rows,
        "tables": root.execute("SHOW TABLES").rows,
        "grants": root.execute("SHOW GRANTS").rows,
        "users": c.execute("SELECT * FROM _users ORDER BY name").fetchall(),
        "members": c.execute("SELECT * FROM _role_members ORDER BY role, member").fetchall(),
        "feeds": c.execute("SELECT id, name FROM _feeds ORDER BY id").fetchall(),
    }


def table(root: changefeed.Connection, name: str) -> TableSchema:
    root.db.refresh_catalog()
    schema = root.db.find_table(name)
    assert schema is not None
    return schema


# (user, statement, CockroachDB's error text or None when allowed)
CASES: list[tuple[str, str, str | None]] = [
    # SELECT
    ("nopriv", "SELECT * FROM t", "user nopriv does not have SELECT privilege on relation t"),
    ("reader", "SELECT * FROM t", None),
    ("analyst", "SELECT * FROM t", None),  # through role analysts
    ("boss", "SELECT * FROM t", None),  # admin
    ("feeder", "SELECT * FROM t", "user feeder does not have SELECT privilege on relation t"),
    ("reader", "SELECT * FROM other", "user reader does not have SELECT privilege on relation other"),
    ("reader", "SHOW COLUMNS FROM t", None),
    ("nopriv", "SHOW CREATE TABLE t", "user nopriv has no privileges on relation t"),
    # writes
    ("reader", "INSERT INTO t VALUES (2, 'two')", "user reader does not have INSERT privilege on relation t"),
    ("inserter", "INSERT INTO t VALUES (2, 'two')", None),
    (
        "inserter",
        "UPSERT INTO t VALUES (2, 'two')",
        "user inserter does not have SELECT privilege on relation t",
    ),
    ("writer", "UPSERT INTO t VALUES (1, 'uno')", None),
    (
        "inserter",
        "INSERT INTO t VALUES (1, 'x') ON CONFLICT DO NOTHING",
        "user inserter does not have SELECT privilege on relation t",
    ),
    ("reader", "UPDATE t SET b = 'x'", "user reader does not have UPDATE privilege on relation t"),
    ("inserter", "UPDATE t SET b = 'x'", "user inserter does not have UPDATE privilege on relation t"),
    ("writer", "UPDATE t SET b = 'x' WHERE a = 1", None),
    ("reader", "DELETE FROM t", "user reader does not have DELETE privilege on relation t"),
    ("writer", "DELETE FROM t WHERE a = 1", None),
    # DDL
    ("writer", "DROP TABLE t", "user writer does not have DROP privilege on relation t"),
    ("ddl", "DROP TABLE t", None),
    ("writer", "ALTER TABLE t ADD COLUMN c INT", "user writer does not have CREATE privilege on relation t"),
    ("ddl", "ALTER TABLE t ADD COLUMN c INT", None),
    ("nopriv", "CREATE TABLE mine (a INT PRIMARY KEY)", None),  # the public schema: anyone creates
    ("nopriv", "CREATE DATABASE d", "user nopriv does not have CREATEDB privilege"),
    ("owner", "DROP TABLE owned", None),  # a table's creator holds ALL on it
    ("owner", "SELECT * FROM t", "user owner does not have SELECT privilege on relation t"),
    # YDB changefeeds
    ("reader", FEED.format(t="t", f="f2"), "user reader does not have CHANGEFEED privilege on relation t"),
    ("feeder", FEED.format(t="t", f="f2"), None),
    (
        "ddl",
        "ALTER TABLE t DROP CHANGEFEED spare",
        "user ddl does not have CHANGEFEED privilege on relation t",
    ),
    # (a dropped feed's topic goes at once, even when the statement rolls back: drop a spare)
    ("feeder", "ALTER TABLE t DROP CHANGEFEED spare", None),
    # users, roles, grants
    ("nopriv", "CREATE USER x", "user nopriv does not have CREATEROLE privilege"),
    ("rolemaker", "CREATE USER x", None),
    ("rolemaker", "ALTER USER reader WITH CONTROLCHANGEFEED", None),
    ("rolemaker", "DROP USER reader", None),
    ("rolemaker", "DROP USER boss", "user rolemaker must be an admin to alter or drop the admin role boss"),
    ("nopriv", "DROP USER reader", "user nopriv does not have CREATEROLE privilege"),
    ("nopriv", "ALTER USER nopriv WITH PASSWORD 'secret'", None),  # one's own password
    ("nopriv", "ALTER USER reader WITH PASSWORD 'secret'", "user nopriv does not have CREATEROLE privilege"),
    ("nopriv", "ALTER USER nopriv WITH CREATEROLE", "user nopriv does not have CREATEROLE privilege"),
    (
        "reader",
        "GRANT SELECT ON TABLE t TO nopriv",
        "user reader missing WITH GRANT OPTION privilege on SELECT",
    ),
    (
        "reader",
        "GRANT INSERT ON TABLE t TO nopriv",
        "user reader does not have INSERT privilege on relation t",
    ),
    ("owner", "GRANT SELECT ON TABLE owned TO nopriv", None),
    ("boss", "GRANT SELECT ON TABLE t TO nopriv", None),
    (
        "reader",
        "ALTER DEFAULT PRIVILEGES GRANT CHANGEFEED ON TABLES TO nopriv",
        "only users with the admin role are allowed to ALTER DEFAULT PRIVILEGES FOR ALL ROLES",
    ),
    ("rolemaker", "GRANT admin TO nopriv", 'rolemaker must have admin option on role "admin"'),
    ("boss", "GRANT admin TO nopriv", None),
    ("nopriv", "SHOW GRANTS ON TABLE t", None),
]


@pytest.mark.parametrize(("user", "statement", "error"), CASES, ids=[f"{u}: {s}" for u, s, _ in CASES])
def test_statement_privileges(
    db: Path, root: changefeed.Connection, user: str, statement: str, error: str | None
) -> None:
    with changefeed.connect(db, user=user) as conn:
        if error is None:
            conn.execute("BEGIN")
            try:
                conn.execute(statement)
            finally:
                conn.execute("ROLLBACK")
            return
        before = snapshot(root)
        with pytest.raises(PermissionDenied) as exc:
            conn.execute(statement)
        assert str(exc.value) == error
        assert exc.value.code == "42501"
        assert snapshot(root) == before


def test_cql_writes_need_only_the_write_privilege(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path, dialect="cql") as root:
        root.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text) WITH cdc = {'enabled': true}")
    with changefeed.connect(tmp_path, dialect="sql") as root:
        root.execute("CREATE USER w")
        root.execute("GRANT INSERT, UPDATE, DELETE ON TABLE ks.t TO w")
    with changefeed.connect(tmp_path, user="w", dialect="cql") as w:
        w.execute("INSERT INTO ks.t (k, v) VALUES (1, 'a')")
        w.execute("UPDATE ks.t SET v = 'b' WHERE k = 1")
        w.execute("DELETE FROM ks.t WHERE k = 1")
        with pytest.raises(PermissionDenied, match=r"does not have SELECT privilege on relation ks\.t"):
            w.execute("INSERT INTO ks.t (k, v) VALUES (2, 'a') IF NOT EXISTS")
        with pytest.raises(PermissionDenied, match=r"does not have SELECT privilege on relation ks\.t"):
            w.execute("SELECT * FROM ks.t_scylla_cdc_log")


def test_batches_and_bulk_writes_are_checked(db: Path) -> None:
    with (
        changefeed.connect(db, user="reader") as conn,
        pytest.raises(PermissionDenied, match="user reader does not have INSERT privilege on relation t"),
    ):
        conn.executemany("INSERT INTO t (a, b) VALUES (?, ?)", [(10, "a"), (11, "b")])
    with changefeed.connect(db, user="inserter") as conn:
        conn.execute("BEGIN")
        try:
            assert (
                conn.executemany("INSERT INTO t (a, b) VALUES (?, ?)", [(10, "a"), (11, "b")]).rowcount == 2
            )
        finally:
            conn.execute("ROLLBACK")


# ----------------------------------------------------------------------------- changefeed creation
# The spec's rule: CHANGEFEED on every target suffices (core changefeeds too); CONTROLCHANGEFEED
# needs SELECT on every target, even with CHANGEFEED; admins always.
CHANGEFEED_RULES: list[tuple[str, bool, str | None]] = [
    ("root", False, None),
    ("boss", True, None),
    ("feeder", False, None),
    ("feeder", True, None),
    ("reader", True, None),
    (
        "reader",
        False,
        "user reader requires the CHANGEFEED privilege on all target tables to be able to run an enterprise changefeed",
    ),
    (
        "nopriv",
        True,
        "user nopriv requires the SELECT privilege on all target tables to be able to run a core changefeed",
    ),
    (
        "controller",
        False,
        "user controller with CONTROLCHANGEFEED role option requires the SELECT privilege on all target tables"
        " to be able to run an enterprise changefeed",
    ),
    ("controller_sel", False, None),
]


@pytest.mark.parametrize(("user", "core", "error"), CHANGEFEED_RULES)
def test_changefeed_creation_rule(
    root: changefeed.Connection, user: str, core: bool, error: str | None
) -> None:
    targets = [table(root, "t")]
    if error is None:
        P.check_changefeed_privileges(root.db.conn, user, targets, core=core)
        return
    with pytest.raises(PermissionDenied) as exc:
        P.check_changefeed_privileges(root.db.conn, user, targets, core=core)
    assert str(exc.value) == error


def test_changefeed_on_several_tables_needs_every_one(root: changefeed.Connection) -> None:
    with pytest.raises(PermissionDenied, match="requires the CHANGEFEED privilege on all target tables"):
        P.check_changefeed_privileges(root.db.conn, "feeder", [table(root, "t"), table(root, "other")])


def test_interface(root: changefeed.Connection) -> None:
    c, t = root.db.conn, table(root, "t")
    assert P.is_admin(c, "root") and P.is_admin(c, "boss") and not P.is_admin(c, "reader")
    assert P.has_role_option(c, "controller", "CONTROLCHANGEFEED")
    assert not P.has_role_option(c, "feeder", "controlchangefeed")
    assert P.has_table_privilege(c, "analyst", P.Privilege.SELECT, t)
    assert not P.has_table_privilege(c, "analyst", P.Privilege.INSERT, t)
    P.check_table_privilege(c, "writer", P.Privilege.DELETE, t)
    with pytest.raises(PermissionDenied, match=r"^user feeder does not have DELETE privilege on relation t$"):
        P.check_table_privilege(c, "feeder", P.Privilege.DELETE, t)


def test_role_options_inherited_through_roles(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path) as root:
        root.execute("CREATE ROLE ops WITH CONTROLCHANGEFEED; CREATE USER u; GRANT ops TO u")
        assert P.has_role_option(root.db.conn, "u", "CONTROLCHANGEFEED")
        root.execute("ALTER ROLE ops WITH NOCONTROLCHANGEFEED")
        assert not P.has_role_option(root.db.conn, "u", "CONTROLCHANGEFEED")
        root.execute("CREATE ROLE a; CREATE ROLE b; GRANT a TO b")
        with pytest.raises(Exception, match="making a a member of b would create a cycle"):
            root.execute("GRANT b TO a")


def test_job_control(root: changefeed.Connection) -> None:
    c = root.db.conn
    P.check_job_control(c, "reader", "reader", 1)  # the owner
    P.check_job_control(c, "boss", "reader", 1)  # an admin
    with pytest.raises(PermissionDenied, match=r"^only admins can control jobs owned by other admins$"):
        P.check_job_control(c, "reader", "boss", 1)
    with pytest.raises(PermissionDenied, match=r"^user nopriv does not have privileges for job 7$"):
        P.check_job_control(c, "nopriv", "reader", 7)


def test_grants_take_effect_at_once_in_other_sessions(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path) as root:
        root.execute("CREATE TABLE t (a INT PRIMARY KEY); CREATE USER u")
        with changefeed.connect(tmp_path, user="u") as u:
            with pytest.raises(PermissionDenied):
                u.execute("SELECT * FROM t")
            root.execute("GRANT SELECT ON TABLE t TO u")
            assert u.execute("SELECT * FROM t").rows == []
            root.execute("REVOKE SELECT ON TABLE t FROM u")
            with pytest.raises(PermissionDenied):
                u.execute("SELECT * FROM t")
            root.execute("GRANT ALL ON TABLE t TO u")
            u.execute("INSERT INTO t VALUES (1)")
            root.execute("REVOKE INSERT ON TABLE t FROM u")  # ALL less INSERT keeps the rest
            assert u.execute("SELECT a FROM t").rows == [(1,)]
            with pytest.raises(PermissionDenied, match="does not have INSERT privilege"):
                u.execute("INSERT INTO t VALUES (2)")


def test_a_rolled_back_grant_leaves_no_cached_privilege(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path) as root, changefeed.connect(tmp_path) as other:
        root.execute("CREATE TABLE t (a INT PRIMARY KEY); CREATE USER u; CREATE USER v")
        t = table(root, "t")
        root.execute("BEGIN")
        root.execute("GRANT SELECT ON TABLE t TO u")
        assert P.has_table_privilege(root.db.conn, "u", P.Privilege.SELECT, t)
        root.execute("ROLLBACK")
        other.execute("GRANT SELECT ON TABLE t TO v")  # commits the catalog version the rollback took back
        root.execute("SELECT 1")
        assert not P.has_table_privilege(root.db.conn, "u", P.Privilege.SELECT, t)


def test_default_privileges_apply_to_later_tables(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path) as root:
        root.execute("CREATE USER u; CREATE TABLE before (a INT PRIMARY KEY)")
        root.execute("ALTER DEFAULT PRIVILEGES GRANT CHANGEFEED ON TABLES TO u")
        root.execute("CREATE TABLE after (a INT PRIMARY KEY)")
        c = root.db.conn
        P.check_changefeed_privileges(c, "u", [table(root, "after")])
        with pytest.raises(PermissionDenied):
            P.check_changefeed_privileges(c, "u", [table(root, "before")])


def test_users_and_passwords(tmp_path: Path) -> None:
    from changefeed.engine.auth import scram_secret

    with changefeed.connect(tmp_path) as root:
        root.execute("CREATE USER u WITH PASSWORD 'one'")
        first = scram_secret(root.db.conn, "u")
        root.execute("ALTER USER u WITH PASSWORD 'two'")
        second = scram_secret(root.db.conn, "u")
        assert first is not None and second is not None and first != second
        assert "two" not in root.db.conn.execute("SELECT options FROM _users WHERE name = 'u'").fetchone()[0]
        root.execute("ALTER USER u WITH PASSWORD NULL")
        assert scram_secret(root.db.conn, "u") is None
        root.execute(
            "CREATE TABLE t (a INT PRIMARY KEY); GRANT SELECT ON t TO u; CREATE ROLE r; GRANT r TO u"
        )
        root.execute("DROP USER u")
        assert root.db.conn.execute("SELECT count(*) FROM _grants WHERE grantee = 'u'").fetchone() == (0,)
        assert root.db.conn.execute("SELECT count(*) FROM _role_members WHERE member = 'u'").fetchone() == (
            0,
        )
        root.execute("DROP USER IF EXISTS u")
        with pytest.raises(Exception, match="role/user u does not exist"):
            root.execute("DROP USER u")
        with pytest.raises(Exception, match="cannot drop special role root"):
            root.execute("DROP USER root")
        with pytest.raises(Exception, match="a role/user named r already exists"):
            root.execute("CREATE ROLE r")
        root.execute("CREATE USER n WITH NOLOGIN")
    with pytest.raises(InvalidAuthorization, match='role "u" does not exist'):
        changefeed.connect(tmp_path, user="u")
    with pytest.raises(InvalidAuthorization, match="n does not have login privilege"):
        changefeed.connect(tmp_path, user="n")


def test_show_grants(root: changefeed.Connection) -> None:
    rows = root.execute("SHOW GRANTS ON TABLE t FOR analysts, writer").rows
    assert rows == [
        ("defaultdb", "public", "t", "analysts", "SELECT", False),
        ("defaultdb", "public", "t", "writer", "DELETE", False),
        ("defaultdb", "public", "t", "writer", "INSERT", False),
        ("defaultdb", "public", "t", "writer", "SELECT", False),
        ("defaultdb", "public", "t", "writer", "UPDATE", False),
    ]
    assert root.execute("SHOW GRANTS FOR owner").rows == [
        ("defaultdb", "public", "owned", "owner", "ALL", True)
    ]


# ----------------------------------------------------------------------------- command line


def test_cli_sql_user(db: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(cli, ["sql", "--db", str(db), "--user", "reader", "--json", "SELECT a FROM t"])
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.strip() == '{"a":1}'
    denied = runner.invoke(cli, ["sql", "--db", str(db), "--user", "nopriv", "SELECT a FROM t"])
    assert denied.exit_code == 1
    assert denied.stderr.strip() == "ERROR: user nopriv does not have SELECT privilege on relation t"


@pytest.mark.parametrize(
    ("user", "error"),
    [
        ("root", None),
        ("reader", None),
        ("feeder", None),
        (
            "nopriv",
            "ERROR: user nopriv does not have SELECT or CHANGEFEED privilege on relation t (needed to read topic t/updates)",
        ),
    ],
)
def test_cli_read_checks_the_topic(db: Path, user: str, error: str | None) -> None:
    res = CliRunner().invoke(cli, ["read", "--db", str(db), "t/updates", "--from-beginning", "--user", user])
    if error is None:
        assert res.exit_code == 0, res.output
    else:
        assert res.exit_code == 1
        assert res.stderr.strip() == error


def test_a_topic_of_no_feed_is_for_admins(db: Path) -> None:
    res = CliRunner().invoke(cli, ["read", "--db", str(db), "nosuch/topic", "--user", "reader"])
    assert res.exit_code == 1
    assert "no changefeed writes it" in res.stderr
