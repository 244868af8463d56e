"""``INSERT .. ON CONFLICT (key) DO UPDATE SET .. [WHERE ..]`` in the engine: what it writes and
returns, that its changes reach the change stream exactly as the UPDATE and INSERT it stands for
would, and the privileges it needs. (tests/test_pg_oracle.py holds it to PostgreSQL itself.)"""

from __future__ import annotations

from pathlib import Path

import pytest

import changefeed
from changefeed.exceptions import ChangefeedError
from tests.change_stream import change_rows

DDL = "CREATE TABLE t (id INT PRIMARY KEY, v STRING, n INT DEFAULT 5, hits INT NOT NULL DEFAULT 0)"


def test_inserts_new_keys_and_updates_existing_ones(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute(DDL)
        conn.execute("INSERT INTO t (id, v, n) VALUES (1, 'a', 1), (2, 'b', 2)")
        res = conn.execute(
            "INSERT INTO t (id, v) VALUES (1, 'a2'), (3, 'c') ON CONFLICT (id) DO UPDATE"
            " SET v = excluded.v, hits = t.hits + 1 RETURNING id, v, n, hits"
        )
        assert (res.status, res.rows) == ("INSERT 2", [(1, "a2", 1, 1), (3, "c", 5, 0)])
        # the WHERE decides, per row; a row it refuses is not written and not counted
        res = conn.execute(
            "INSERT INTO t (id, v) VALUES (1, 'x'), (2, 'y') ON CONFLICT (id) DO UPDATE"
            " SET v = excluded.v WHERE t.n > 1"
        )
        assert res.rowcount == 1
        # excluded holds the proposed row, its DEFAULTs included; parameters and subqueries too
        conn.execute(
            "INSERT INTO t (id, v) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE"
            " SET n = excluded.n + (SELECT count(*) FROM t), v = excluded.v || $2",
            (2, "z"),
        )
        assert conn.execute("SELECT id, v, n, hits FROM t ORDER BY id").rows == [
            (1, "a2", 1, 1),
            (2, "zz", 8, 0),
            (3, "c", 5, 0),
        ]


@pytest.mark.parametrize(
    ("sql", "code", "text"),
    [
        (
            "INSERT INTO t (id, v) VALUES (1, 'p'), (1, 'q') ON CONFLICT (id) DO UPDATE SET v = excluded.v",
            "21000",
            "a second time",
        ),
        (
            "INSERT INTO t (id, v) VALUES (1, 'p') ON CONFLICT (v) DO UPDATE SET v = excluded.v",
            "42P10",
            "no unique",
        ),
        (
            "INSERT INTO t (id, v) VALUES (1, 'p') ON CONFLICT DO UPDATE SET v = excluded.v",
            "42601",
            "inference",
        ),
        ("INSERT INTO t (id, v) VALUES (1, 'p') ON CONFLICT (id) DO UPDATE SET v = v", "42702", "ambiguous"),
        (
            "INSERT INTO t (id, v) VALUES (1, 'p') ON CONFLICT (id) DO UPDATE SET id = 9",
            "42000",
            "primary key",
        ),
        ("INSERT INTO t (id, v) VALUES (1, 'p') ON CONFLICT (id) DO UPDATE SET hits = NULL", "23502", "hits"),
    ],
)
def test_refused_and_nothing_written(tmp_path: Path, sql: str, code: str, text: str) -> None:
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute(DDL)
        conn.execute("INSERT INTO t (id, v) VALUES (1, 'a')")
        with pytest.raises(ChangefeedError, match=text) as err:
            conn.execute(sql)
        assert err.value.code == code
        assert conn.execute("SELECT id, v, hits FROM t").rows == [(1, "a", 0)]


def test_change_stream_as_the_update_and_insert_it_stands_for(tmp_path: Path) -> None:
    """Changefeeds see an update of the existing row (its old image) and an insert of the new
    one, exactly as an UPDATE and an INSERT would write them."""
    one, two = tmp_path / "one", tmp_path / "two"
    for db in (one, two):
        with changefeed.connect(db) as conn:
            conn.execute(DDL + " WITH (changes = true)")
            conn.execute("INSERT INTO t (id, v, n) VALUES (1, 'a', 1), (2, 'b', 2)")
    with changefeed.connect(one) as conn:
        conn.execute(
            "INSERT INTO t (id, v) VALUES (1, 'a2'), (3, 'c') ON CONFLICT (id) DO UPDATE"
            " SET v = excluded.v, hits = t.hits + 1"
        )
    with changefeed.connect(two) as conn:
        conn.execute("BEGIN")
        conn.execute("UPDATE t SET v = 'a2', hits = hits + 1 WHERE id = 1")
        conn.execute("INSERT INTO t (id, v) VALUES (3, 'c')")
        conn.execute("COMMIT")
    assert change_rows(one, "t", in_order=True) == change_rows(two, "t", in_order=True)
    assert len(change_rows(one, "t", in_order=True)) == 4


def test_needs_the_update_privilege(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        conn.execute(DDL)
        conn.execute("CREATE USER ins")
        conn.execute("GRANT INSERT, SELECT ON t TO ins")
    with changefeed.connect(db, user="ins") as conn:
        conn.execute("INSERT INTO t (id, v) VALUES (1, 'a') ON CONFLICT (id) DO NOTHING")
        with pytest.raises(ChangefeedError) as err:
            conn.execute(
                "INSERT INTO t (id, v) VALUES (1, 'b') ON CONFLICT (id) DO UPDATE SET v = excluded.v"
            )
        assert err.value.code == "42501"
