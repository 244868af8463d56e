"""Array parameters as PostgreSQL's array_in and array_recv read them (one dimension), and the
errors of malformed ones."""

from __future__ import annotations

import struct

import pytest

from changefeed.exceptions import ChangefeedError
from changefeed.server.pg import types as t
from changefeed.server.pg.types import decode_param


@pytest.mark.parametrize(
    ("text", "oid", "expected"),
    [
        ("{1,2,3}", 1016, [1, 2, 3]),
        ("{}", 1016, []),
        ("{ 1 , NULL ,3 }", 1007, [1, None, 3]),
        ('{a,"b,c","d\\"e","",NULL,"NULL"}', 1009, ["a", "b,c", 'd"e', "", None, "NULL"]),
        ("[1:2]={t,f}", 1000, [True, False]),
        ("{1.5,-2}", 1022, [1.5, -2.0]),
    ],
)
def test_text_arrays(text: str, oid: int, expected: list[object]) -> None:
    assert decode_param(text.encode(), oid, False) == expected


def _binary(oid: int, items: list[bytes | None]) -> bytes:
    out = struct.pack("!iiiii", 1, int(None in items), oid, len(items), 1)
    for item in items:
        out += struct.pack("!i", -1) if item is None else struct.pack("!i", len(item)) + item
    return out


def test_binary_arrays() -> None:
    data = _binary(t.INT8, [struct.pack("!q", 5), None, struct.pack("!q", -7)])
    assert decode_param(data, 1016, True) == [5, None, -7]
    assert decode_param(_binary(t.TEXT, [b"x", b""]), 1009, True) == ["x", ""]
    assert decode_param(struct.pack("!iii", 0, 0, t.INT8), 1016, True) == []


@pytest.mark.parametrize(
    ("data", "binary"),
    [
        (b"{{1,2},{3,4}}", False),
        (b"1,2", False),
        (b'{"open', False),
        (b"{1,,2}", False),
        (b"{1,x}", False),
        (struct.pack("!iiiiiii", 2, 0, 20, 1, 1, 1, 1), True),
        (_binary(t.INT8, [struct.pack("!q", 5)]) + b"extra", True),
    ],
)
def test_malformed_arrays_are_one_clear_error(data: bytes, binary: bool) -> None:
    with pytest.raises(ChangefeedError) as err:
        decode_param(data, 1016, binary)
    assert err.value.code in ("22P02", "22P03")
    assert "int8[]" in str(err.value)
