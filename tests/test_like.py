"""``LIKE``, ``ILIKE`` and their ``NOT`` forms in the SQL dialects (PostgreSQL's and CockroachDB's
semantics: the whole value matches, ``%`` any run, ``_`` one character, a backslash escapes,
NULL gives NULL, a number is not text)."""

from __future__ import annotations

from pathlib import Path

import pytest

import changefeed
from changefeed.engine.patterns import like
from changefeed.exceptions import InvalidEscape, UndefinedFunction


@pytest.mark.parametrize(
    ("value", "pattern", "insensitive", "expected"),
    [
        ("ada@x.com", "%@x.com", False, True),
        ("ada@x.com", "%@X.COM", False, False),
        ("ada@x.com", "%@X.COM", True, True),
        ("abc", "a_c", False, True),
        ("abbc", "a_c", False, False),
        ("50%_off", r"50\%\_off", False, True),
        ("50x_off", r"50\%\_off", False, False),
        ("a.c", "a.c", False, True),
        ("abc", "a.c", False, False),  # not a regular expression
        ("line\nbreak", "line%", False, True),
        ("", "%", False, True),
        ("x", "", False, False),
        ("back\\slash", "back\\\\slash", False, True),
    ],
)
def test_patterns(value: str, pattern: str, insensitive: bool, expected: bool) -> None:
    assert like(value, pattern, insensitive=insensitive) is expected


def test_like_in_statements(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute("CREATE TABLE u (id INT PRIMARY KEY, email STRING)")
        conn.execute("INSERT INTO u VALUES (1, 'Ada@x.com'), (2, 'bob@y.org'), (3, NULL), (4, '50%_off')")

        def ids(where: str, *params: object) -> list[int]:
            return [r[0] for r in conn.execute(f"SELECT id FROM u WHERE {where} ORDER BY id", params).rows]

        assert ids("email LIKE '%@x.com'") == [1]
        assert ids("email ILIKE 'ADA%'") == [1]
        assert ids("email NOT LIKE '%@%'") == [4]  # NULL is neither
        assert ids("email NOT ILIKE '%X.COM'") == [2, 4]
        assert ids("email LIKE $1", "b_b@%") == [2]
        assert ids("NOT email LIKE 'b%' AND id < 3") == [1]
        res = conn.execute("SELECT id, email LIKE '%.org' AS org FROM u ORDER BY id")
        assert res.rows == [(1, False), (2, True), (3, None), (4, False)]
        assert conn.execute("UPDATE u SET email = upper(email) WHERE email LIKE '%.org'").rowcount == 1
        assert conn.execute("DELETE FROM u WHERE email ILIKE '%@Y.ORG'").rowcount == 1
        assert ids("email LIKE '50!%!_off' ESCAPE '!'") == [4]
        assert ids("email LIKE '50%' ESCAPE ''") == [4]  # no escape character at all
        with pytest.raises(InvalidEscape) as bad:
            conn.execute("SELECT id FROM u WHERE email LIKE 'a' ESCAPE 'ab'")
        assert bad.value.code == "22025"
        with pytest.raises(UndefinedFunction) as err:
            conn.execute("SELECT id FROM u WHERE id LIKE '1'")
        assert err.value.code == "42883"
        assert str(err.value) == "unsupported comparison operator: <int> LIKE <string>"
