"""The scan path's column-wise fast paths give the same Arrow values and CSV text as the row-wise
ones they replace."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa
import pytest

from changefeed.cli.crdb_csv import csv_field, csv_lines, field_text
from changefeed.engine.catalog import ColumnSchema, Role
from changefeed.engine.changes import storage_to_arrow
from changefeed.engine.types import Kind, SqlType


def _col(t: SqlType) -> ColumnSchema:
    return ColumnSchema(id=1, name="c", type=t, role=Role.REGULAR)


@pytest.mark.parametrize(
    "values",
    [
        ["1.5", "-0.01", "12345678.99", None, "0", "1E+2", "-0", "00.10", "3"],
        [None, None],
        ["1.555"],  # more digits than the scale: refused by Arrow's cast and by the row-wise path
    ],
)
def test_decimal_column_wise_equals_row_wise(values: list[str | None]) -> None:
    t = SqlType(Kind.DECIMAL, "DECIMAL(10,2)", precision=10, scale=2)
    at = pa.decimal128(10, 2)
    try:
        slow = pa.array([None if v is None else Decimal(v) for v in values], type=at)
    except pa.ArrowInvalid:
        with pytest.raises(pa.ArrowInvalid):
            storage_to_arrow(_col(t), values)
        return
    assert storage_to_arrow(_col(t), values).equals(slow)


def test_datetime_column_wise() -> None:
    t = SqlType(Kind.DATETIME, "Datetime")
    got = storage_to_arrow(_col(t), [0, None, 1_700_000_000, -86_400])
    assert got.to_pylist() == storage_to_arrow(_col(t), [0, None, 1_700_000_000, -86_400]).to_pylist()
    assert got.cast(pa.int64()).to_pylist() == [0, None, 1_700_000_000_000_000, -86_400_000_000]


@dataclass
class _Chunk:
    table: str | None
    keys: pa.Array | None
    values: pa.Array

    def messages(self) -> list[tuple[str | None, bytes | None, bytes | None]]:
        keys = self.keys.to_pylist() if self.keys is not None else [None] * len(self.values)
        return [(self.table, k, v) for k, v in zip(keys, self.values.to_pylist(), strict=True)]


@pytest.mark.parametrize(
    "chunk",
    [
        _Chunk("t", pa.array([b"[1]", b"[2]", None]), pa.array([b'{"a": 1}', b"x,y", b"z\nw"])),
        _Chunk("cdc,test", pa.array([b"[1]"]), pa.array([b"\xc3\xa9"])),
        _Chunk(None, None, pa.array([b'{"resolved": "1.0"}'])),
        _Chunk("t", pa.array([b"[1]", b"[2]"]), pa.array([b"\x00\x01", b"ok"])),  # octal escapes
        _Chunk("t", pa.array([b"[0]", b"[1]", b"[2]"]).slice(1), pa.array([b"a", b"b", b"c"]).slice(1)),
    ],
)
def test_csv_lines_equal_row_wise(chunk: _Chunk) -> None:
    want = "".join(
        ",".join((csv_field(t or ""), csv_field(field_text(k)), csv_field(field_text(v)))) + "\n"
        for t, k, v in chunk.messages()
    )
    assert csv_lines(chunk) == want  # type: ignore[arg-type]
