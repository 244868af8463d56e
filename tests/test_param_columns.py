"""Parameter rows handed to the bulk write as columns (``sql.param_columns``), as the PostgreSQL
endpoint's pipelined-run scan hands them: the table, its changes and every error (its row, its
code) are what the same rows give as tuples; a column whose facts show it fits its table column
is stored as it is, any other is checked value by value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed.engine.types import MAX_VALUE_BYTES
from changefeed.exceptions import ChangefeedError
from changefeed.sql.param_columns import INTS, STRS, ColumnFacts, ParamColumns, stored_as_given
from changefeed.sql.parser import parse

SQL = "INSERT INTO q (id, v, n) VALUES ($1, $2, $3)"


def _columns(rows: list[tuple[Any, ...]]) -> ParamColumns:
    return ParamColumns.of_rows(rows)


def _write(path: Path, rows: Any) -> tuple[list[tuple[Any, ...]], str | None, int | None]:
    """Rows into a fresh ``q`` through ``execute_many``: the table after it, and the error's
    SQLSTATE and row if it failed."""
    conn = changefeed.connect(path)
    try:
        conn.execute("CREATE TABLE q (id INT PRIMARY KEY, v STRING(3), n INT4)")
        stmt = parse(SQL, "sql")[0]
        session = conn.session
        session.begin()
        err: tuple[str | None, int | None] = (None, None)
        try:
            session.execute_many(stmt, rows)
            session.commit()
        except ChangefeedError as e:
            session.rollback()
            err = (e.code, e.row)
        return conn.execute("SELECT id, v, n FROM q ORDER BY id").rows, *err
    finally:
        conn.close()


CASES = [
    # clean: ints in range, short text, NULLs
    [(i, "abc"[: i % 4] if i % 5 else None, None if i % 7 == 0 else -i) for i in range(300)],
    # an int8 past INT4 at row 200
    [(i, "ab", 2**40 if i == 200 else i) for i in range(300)],
    # text past STRING(3) at row 150
    [(i, "abcd" if i == 150 else "abc", i) for i in range(300)],
    # a NULL key at row 10
    [(None if i == 10 else i, "a", i) for i in range(50)],
    # the same key twice (row by row, in statement order)
    [(i % 40, "a", i) for i in range(50)],
    # a value of another type at row 3
    [(i, "a", "x" if i == 3 else i) for i in range(20)],
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_columns_write_what_rows_write(tmp_path: Path, case: int) -> None:
    rows = CASES[case]
    as_rows = _write(tmp_path / "rows", rows)
    as_columns = _write(tmp_path / "cols", _columns(rows))
    assert as_columns == as_rows
    # Parts of a run and runs joined: the same.
    joined = ParamColumns.concat([_columns(rows[:7]), _columns(rows[7:])[0:]])
    assert list(joined) == [tuple(r) for r in rows]
    assert _write(tmp_path / "joined", joined) == as_rows


def test_facts_decide_what_is_stored_unchecked() -> None:
    from changefeed.engine.types import Kind, SqlType

    int8 = SqlType(Kind.INT, "INT8", bits=64)
    int4 = SqlType(Kind.INT, "INT4", bits=32)
    text = SqlType(Kind.TEXT, "STRING")
    short = SqlType(Kind.TEXT, "STRING(3)", length=3)
    assert stored_as_given(int8, ColumnFacts(INTS, -(2**63), 2**63 - 1))
    assert stored_as_given(int4, ColumnFacts(INTS, -(2**31), 2**31 - 1))
    assert not stored_as_given(int4, ColumnFacts(INTS, 0, 2**31))
    assert not stored_as_given(int4, ColumnFacts(INTS, -(2**31) - 1, 0))
    assert stored_as_given(text, ColumnFacts(STRS, 0, MAX_VALUE_BYTES // 4))
    assert not stored_as_given(text, ColumnFacts(STRS, 0, MAX_VALUE_BYTES // 4 + 1))
    assert not stored_as_given(short, ColumnFacts(STRS, 0, 1))  # a bounded length: each checked
    assert not stored_as_given(text, ColumnFacts(INTS, 0, 1))
    assert not stored_as_given(int8, None)
    # Facts are found only where every value is of the kind: a bool, a NULL or a float is not.
    assert ColumnFacts.of([1, 2, -3]) == ColumnFacts(INTS, -3, 2)
    assert ColumnFacts.of([1, True]) is None
    assert ColumnFacts.of([1, None]) is None
    assert ColumnFacts.of(["ab", "c"]) == ColumnFacts(STRS, 0, 2)
    assert ColumnFacts(INTS, 0, 5).join(ColumnFacts(INTS, -2, 3)) == ColumnFacts(INTS, -2, 5)
    assert ColumnFacts(INTS, 0, 5).join(ColumnFacts(STRS, 0, 3)) is None
    cols = ParamColumns.of_rows([(1, "a"), (2, "b"), (3, "c")])
    assert cols[-1] == (3, "c") and list(cols[1:]) == [(2, "b"), (3, "c")]
    with pytest.raises(IndexError):
        cols[3]
