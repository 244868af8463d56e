"""PostgreSQL's and CockroachDB's scalar functions (``sql/builtins.py``), with their NULL rules
and their errors."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal

import pytest

import changefeed
from changefeed.connection import Connection
from changefeed.exceptions import ChangefeedError


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Connection]:
    with changefeed.connect(tmp_path_factory.mktemp("builtins") / "db") as c:
        yield c


CASES = [
    ("substring('hello', 2, 3)", "ell"),
    ("substr('hello', 2)", "ello"),
    ("substr('hello', 0, 3)", "he"),  # the characters before 1 count
    ("position('l' IN 'hello')", 3),
    ("strpos('hello', 'z')", 0),
    ("trim('  x ')", "x"),
    ("btrim('xxaxx', 'x')", "a"),
    ("ltrim('  a ')", "a "),
    ("rtrim('  a ')", "  a"),
    ("split_part('a,b,c', ',', 2)", "b"),
    ("split_part('a,b,c', ',', -1)", "c"),
    ("split_part('a,b,c', ',', 5)", ""),
    ("concat_ws('-', 'a', NULL, 'b')", "a-b"),
    ("concat_ws(NULL, 'a')", None),
    ("replace('aaa', 'a', 'bc')", "bcbcbc"),
    ("left('hello', 2)", "he"),
    ("left('hello', -2)", "hel"),
    ("right('hello', 2)", "lo"),
    ("right('hello', -2)", "llo"),
    ("lpad('7', 3, '0')", "007"),
    ("lpad('hello', 2)", "he"),
    ("rpad('ab', 5, 'xy')", "abxyx"),
    ("repeat('ab', 2)", "abab"),
    ("reverse('abc')", "cba"),
    ("initcap('hello wORLD')", "Hello World"),
    ("starts_with('abc', 'a')", True),
    ("char_length('héllo')", 5),
    ("octet_length('héllo')", 6),
    ("md5('x')", "9dd4e461268c8034f5c8564e155c67a6"),
    ("to_hex(255)", "ff"),
    ("chr(65) || ascii('A')", "A65"),
    ("upper(NULL)", None),
    ("substr(NULL, 1)", None),
    ("round(2.565, 2)", Decimal("2.57")),
    ("round(2.5)", Decimal("3")),
    ("round(-2.5)", Decimal("-3")),
    ("round(7)", 7.0),  # of an integer a double, as PostgreSQL's round(double precision)
    ("round(7, 1)", Decimal("7.0")),  # and with places a numeric
    ("round(15, -1)", Decimal("20")),
    ("ceil(7)", 7.0),
    ("sign(-7)", -1.0),
    ("round(CAST(2.5 AS FLOAT))", 2.0),  # floats round to even
    ("trunc(1.99, 1)", Decimal("1.9")),
    ("trunc(-1.9)", Decimal("-1")),
    ("ceil(1.2)", Decimal("2")),
    ("floor(-1.8)", Decimal("-2")),
    ("ceil(CAST(1.2 AS FLOAT))", 2.0),
    ("mod(-7, 3)", -1),
    ("mod(7.5, 2)", Decimal("1.5")),
    ("div(-7, 2)", -3),
    ("power(2, 10)", 1024),
    ("sqrt(16.0)", Decimal("4.0")),
    ("sign(-2.5)", Decimal("-1")),
    ("log(100)", 2.0),
    ("ln(1)", 0.0),
    ("exp(0)", 1.0),
    ("greatest(1, NULL, 3)", 3),
    ("least('b', 'a')", "a"),
    ("greatest(NULL, NULL)", None),
    ("nullif(1, 1)", None),
    ("nullif(1, 2)", 1),
    ("array_length(ARRAY[1, 2, 3], 1)", 3),
    ("date_trunc('day', TIMESTAMPTZ '2024-05-03 10:11:12+00')", dt.datetime(2024, 5, 3, tzinfo=dt.UTC)),
    ("date_trunc('month', TIMESTAMPTZ '2024-05-03 10:11:12+00')", dt.datetime(2024, 5, 1, tzinfo=dt.UTC)),
    ("date_trunc('week', TIMESTAMPTZ '2024-05-03 10:11:12+00')", dt.datetime(2024, 4, 29, tzinfo=dt.UTC)),
    ("date_trunc('hour', TIMESTAMPTZ '2024-05-03 10:11:12+00')", dt.datetime(2024, 5, 3, 10, tzinfo=dt.UTC)),
    # extract is a numeric (PostgreSQL 14+), date_part a double
    ("extract(year FROM TIMESTAMPTZ '2024-05-03 10:11:12+00')", Decimal(2024)),
    ("EXTRACT(quarter FROM DATE '2024-05-05')", Decimal(2)),
    ("extract(dow FROM DATE '2024-05-05')", Decimal(0)),
    ("date_part('hour', TIMESTAMPTZ '2024-05-03 10:11:12+00')", 10.0),
    ("extract(epoch FROM TIMESTAMPTZ '1970-01-02 00:00:00+00')", Decimal("86400.0")),
    ("current_date = now()::DATE", True),
    ("current_timestamp > now() - INTERVAL '1 minute'", True),
]


@pytest.mark.parametrize(("expr", "expected"), CASES, ids=[c[0] for c in CASES])
def test_function(conn: Connection, expr: str, expected: object) -> None:
    got = conn.execute(f"SELECT {expr}").rows[0][0]
    assert got == expected and type(got) is type(expected)


ERRORS = [
    ("sqrt(-1)", "2201F", "cannot take square root of a negative number"),
    ("ln(0)", "2201E", "cannot take logarithm of zero"),
    ("substr('x', 1, -1)", "22011", "negative substring length not allowed"),
    ("substr(1, 2)", "42883", "unknown signature: substr(int, int)"),
    ("split_part('a', ',', 0)", "22023", "field position must not be zero"),
    ("mod(1, 0)", "22012", "division by zero"),
    ("repeat('a')", "42883", "unknown signature: repeat(string)"),
    ("date_trunc('fortnight', now())", "42000", 'unsupported timestamp unit "fortnight"'),
]


@pytest.mark.parametrize(("expr", "code", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_function_errors(conn: Connection, expr: str, code: str, message: str) -> None:
    with pytest.raises(ChangefeedError) as err:
        conn.execute(f"SELECT {expr}")
    assert (err.value.code, str(err.value)) == (code, message)
