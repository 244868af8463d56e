"""Random queries, PostgreSQL 15 as the oracle: seeded generators of scalar expressions, filters
and groupings over one table, run through psycopg against a real PostgreSQL and the PostgreSQL
endpoint, each answer (rows in order, or SQLSTATE) expected alike.

The generators keep to what both define alike, as ``test_pg_oracle`` does: integers that stay in
INT4 (PostgreSQL's ``int``; CockroachDB's is INT8), divisions by ``nullif(x, 0)`` (where a
division by zero happens depends on the order a planner evaluates in), no boolean turned into
text by ``||`` or ``concat`` (CockroachDB writes ``true``, PostgreSQL ``t``), no ``round``/
``floor``/``sign`` of integers (PostgreSQL's are double precision), every ORDER BY total. A
failure prints the query; run the module with ``CHANGEFEED_RANDOM_SEED=n`` to try other seeds."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from tests.pg_server import beside_postgres

SEED = int(os.environ.get("CHANGEFEED_RANDOM_SEED", "20261128"))
QUERIES = 300

_TEXTS = ["'abc'", "'Hello World'", "''", "' pad '", "'a,b,,c'", "'ÄÖü'", "'x_y%z'", "NULL", "'O''Reilly'"]
_INTS = ["0", "1", "-1", "7", "42", "-100", "1000", "NULL"]
_NUMS = ["0", "1.5", "-2.25", "123456.789", "0.001", "99.995", "NULL", "10"]
_DATES = ["'2024-01-31'", "'2024-02-29'", "'1999-12-31'", "'2000-03-01'", "NULL"]
_STAMPS = ["'2024-01-31 23:59:59.5'", "'2024-02-29 00:00:00'", "'1999-12-31 12:34:56.789'", "NULL"]
_JSON = [
    '\'{"a": 1, "b": [1, 2]}\'',
    "'[1, \"x\", null]'",
    "'\"s\"'",
    "'3.5'",
    '\'{"a": {"c": true}}\'',
    "NULL",
]

SETUP = [
    "CREATE TABLE r (id INT PRIMARY KEY, i INT, t TEXT, n NUMERIC, d DATE, ts TIMESTAMP, b BOOL, j JSONB)"
]


def _rows(rng: random.Random) -> list[str]:
    out = []
    for k in range(1, 31):
        values = [
            str(k),
            rng.choice(_INTS),
            rng.choice(_TEXTS),
            rng.choice(_NUMS),
            rng.choice(_DATES),
            rng.choice(_STAMPS),
            rng.choice(["true", "false", "NULL"]),
            rng.choice(_JSON),
        ]
        out.append(f"INSERT INTO r VALUES ({', '.join(values)})")
    return out


class Expressions:
    """Expressions of each kind over ``r``'s columns, nested up to a depth."""

    def __init__(self, rng: random.Random) -> None:
        self.r = rng

    def pick(self, options: list[Callable[[int], str]], depth: int) -> str:
        return self.r.choice(options)(depth + 1)

    def int_(self, d: int = 0) -> str:
        if d > 2 or self.r.random() < 0.35:
            return self.r.choice(["i", "i", "id", "length(t)", "3", "-2"])
        r = self.r
        return self.pick(
            [
                lambda d: f"({self.int_(d)} {r.choice(['+', '-', '*'])} {self.int_(d)})",
                lambda d: f"({self.int_(d)} {r.choice(['/', '%'])} nullif({self.int_(d)}, 0))",
                lambda d: f"abs({self.int_(d)})",
                lambda d: f"coalesce({self.int_(d)}, {self.int_(d)})",
                lambda d: f"CASE WHEN {self.bool_(d)} THEN {self.int_(d)} ELSE {self.int_(d)} END",
                lambda d: f"{r.choice(['greatest', 'least'])}({self.int_(d)}, {self.int_(d)})",
                lambda d: f"nullif({self.int_(d)}, {self.int_(d)})",
                lambda d: f"length({self.text(d)})",
                lambda d: f"strpos({self.text(d)}, 'b')",
                lambda d: f"extract({r.choice(['year', 'month', 'day', 'dow', 'doy'])} from d)::int",
                lambda d: f"({self.num(d)})::int",
                lambda d: f"mod({self.int_(d)}, nullif({self.int_(d)}, 0))",
            ],
            d,
        )

    def num(self, d: int = 0) -> str:
        if d > 2 or self.r.random() < 0.4:
            return self.r.choice(["n", "n", "1.5", "0.1", "-3", "i::numeric"])
        r = self.r
        return self.pick(
            [
                lambda d: f"({self.num(d)} {r.choice(['+', '-', '*'])} {self.num(d)})",
                lambda d: f"({self.num(d)} / nullif({self.num(d)}, 0))",
                lambda d: f"round({self.num(d)}, {r.choice([0, 1, 2, -1])})",
                lambda d: f"trunc({self.num(d)}, {r.choice([0, 1, -1])})",
                lambda d: f"{r.choice(['ceil', 'floor', 'abs'])}({self.num(d)})",
                lambda d: f"({self.num(d)})::numeric(10, 2)",
                lambda d: f"sqrt(abs({self.num(d)})::numeric)",
                lambda d: f"scale({self.num(d)})::numeric",
            ],
            d,
        )

    def text(self, d: int = 0) -> str:
        if d > 2 or self.r.random() < 0.35:
            return self.r.choice(["t", "t", "'abc'", "''", "i::text", "n::text", "d::text", "ts::text"])
        r = self.r
        return self.pick(
            [
                lambda d: f"({self.text(d)} || {self.text(d)})",
                lambda d: f"{r.choice(['upper', 'lower', 'initcap', 'reverse', 'md5'])}({self.text(d)})",
                lambda d: f"{r.choice(['btrim', 'ltrim', 'rtrim'])}({self.text(d)}, 'a ')",
                lambda d: f"substr({self.text(d)}, {r.choice([0, 1, 2, -1])}, {r.choice([0, 2, 5])})",
                lambda d: f"replace({self.text(d)}, 'l', 'LL')",
                lambda d: f"{r.choice(['lpad', 'rpad'])}({self.text(d)}, {r.choice([0, 3, 8])}, 'xy')",
                lambda d: f"{r.choice(['left', 'right'])}({self.text(d)}, {r.choice([-2, 0, 2])})",
                lambda d: f"split_part({self.text(d)}, ',', {r.choice([1, 2, 3])})",
                lambda d: f"translate({self.text(d)}, 'abc', 'x')",
                lambda d: f"repeat({self.text(d)}, {r.choice([0, 2])})",
                lambda d: f"concat_ws('-', {self.text(d)}, i, NULL, n)",
                lambda d: f"coalesce({self.text(d)}, 'none')",
                lambda d: (
                    f"overlay({self.text(d)} placing 'ZZ' from {r.choice([1, 2])} for {r.choice([0, 1])})"
                ),
                lambda d: f"quote_literal({self.text(d)})",
                lambda d: f"to_char(ts, '{r.choice(['YYYY-MM-DD', 'HH24:MI:SS', 'DD Mon YYYY', 'Day'])}')",
                lambda d: f"date_trunc('{r.choice(['year', 'month', 'day', 'hour'])}', ts)::text",
                lambda d: f"(d + {r.choice([1, -1, 30])})::text",
                lambda d: f"(ts + interval '{r.choice(['1 day', '1 month', '-3 hours'])}')::text",
                lambda d: f"extract({r.choice(['second', 'epoch', 'julian', 'quarter'])} from ts)::text",
                lambda d: f"(j -> '{r.choice(['a', 'b'])}')::text",
                lambda d: "jsonb_typeof(j)",
                lambda d: f"(j ->> {r.choice(['0', chr(39) + 'a' + chr(39)])})",
                lambda d: f"({self.num(d)})::text",
                lambda d: f"({self.int_(d)})::text",
            ],
            d,
        )

    def bool_(self, d: int = 0) -> str:
        if d > 2 or self.r.random() < 0.2:
            return self.r.choice(["b", "true", "false", "NULL::bool"])
        r = self.r
        return self.pick(
            [
                lambda d: f"{self.int_(d)} {r.choice(['=', '<>', '<', '<=', '>', '>='])} {self.int_(d)}",
                lambda d: f"{self.num(d)} {r.choice(['=', '<', '>='])} {self.num(d)}",
                lambda d: f"{self.text(d)} {r.choice(['=', '<>', '<', '>'])} {self.text(d)}",
                lambda d: f"({self.bool_(d)} {r.choice(['AND', 'OR'])} {self.bool_(d)})",
                lambda d: f"NOT ({self.bool_(d)})",
                lambda d: f"{self.text(d)} IS {r.choice(['', 'NOT '])}NULL",
                lambda d: f"{self.int_(d)} {r.choice(['', 'NOT '])}IN (1, 7, NULL, -1)",
                lambda d: f"{self.int_(d)} {r.choice(['', 'NOT '])}BETWEEN {self.int_(d)} AND {self.int_(d)}",
                lambda d: (
                    f"{self.text(d)} {r.choice(['LIKE', 'ILIKE', 'NOT LIKE'])} '{r.choice(['a%', '%b%', '_', '%'])}'"
                ),
                lambda d: f"{self.int_(d)} IS {r.choice(['', 'NOT '])}DISTINCT FROM {self.int_(d)}",
                lambda d: f"(i, t) {r.choice(['=', '<', '>='])} ({self.int_(d)}, {self.text(d)})",
                lambda d: f"j ? '{r.choice(['a', 'b', 'x'])}'",
                lambda d: f"d {r.choice(['<', '>='])} {r.choice(_DATES[:-1])}",
            ],
            d,
        )


def queries(seed: int, count: int) -> Iterator[str]:
    rng = random.Random(seed)
    ex = Expressions(rng)
    kinds: list[Callable[[], str]] = [
        lambda: f"SELECT id, {ex.int_()} FROM r ORDER BY id",
        lambda: f"SELECT id, {ex.num()} FROM r ORDER BY id",
        lambda: f"SELECT id, {ex.text()} FROM r ORDER BY id",
        lambda: f"SELECT id, {ex.bool_()} FROM r ORDER BY id",
        lambda: f"SELECT id FROM r WHERE {ex.bool_()} ORDER BY id",
        lambda: (
            f"SELECT g, count(*), sum(x), min(x), max(x), avg(x) FROM (SELECT {ex.int_()} AS g, {ex.num()} AS x"
            f" FROM r) s GROUP BY g ORDER BY g NULLS FIRST"
        ),
        lambda: (
            f"SELECT g, string_agg(t, ',' ORDER BY id), count(DISTINCT i) FROM (SELECT {ex.text()} AS g, t, i, id"
            f" FROM r) s GROUP BY g ORDER BY g NULLS FIRST"
        ),
    ]
    for _ in range(count):
        yield rng.choice(kinds)()


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[psycopg.Connection[Any], psycopg.Connection[Any]]]:
    with beside_postgres([*SETUP, *_rows(random.Random(SEED))], "pg-random-") as pair:
        yield pair


def _value(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 9)
    if isinstance(v, Decimal):
        return str(v)  # digits and scale alike
    return v


def outcome(conn: psycopg.Connection[Any], sql: str) -> tuple[Any, ...]:
    try:
        cur = conn.execute(sql)
    except psycopg.Error as exc:
        return ("error", exc.sqlstate)
    return ("rows", [tuple(_value(v) for v in row) for row in cur.fetchall()])


def test_random_queries_answer_as_postgresql(
    both: tuple[psycopg.Connection[Any], psycopg.Connection[Any]],
) -> None:
    theirs, mine = both
    differ = []
    for sql in queries(SEED, QUERIES):
        expected = outcome(theirs, sql)
        if outcome(mine, sql) != expected:
            differ.append(sql)
    assert not differ, f"{len(differ)} of {QUERIES} differ; the first: {differ[0]}"
