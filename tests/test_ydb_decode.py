"""The consumer side of YDB JSON changefeeds (issue 20): decoding a record gives back exactly the
storage values the journal holds, for every type of both sql dialects, and barriers decode."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import pytest

from changefeed.engine.changes import CHANGE_SNAPSHOT, rows_to_batch
from changefeed.engine.storage import CHANGE_ERASE
from changefeed.engine.types import Kind
from changefeed.exceptions import TypeMismatch
from changefeed.feeds.spec import Mode
from changefeed.formats import get_encoder
from changefeed.formats.ydb_decode import BARRIER, ERASE, UPDATE, Barrier, Change, RecordDecoder
from tests.test_formats import CRDB_TYPES, YDB_TYPES, feed_of, make_table, random_rows


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return (bool(a == b) and type(a) is type(b)) or (a == b and {type(a), type(b)} <= {int, float})


@pytest.mark.parametrize("create", [YDB_TYPES, CRDB_TYPES], ids=["ydb_types", "crdb_types"])
def test_decode_inverts_the_encoder(tmp_path: Path, create: str) -> None:
    table = make_table(tmp_path, create)
    rows = random_rows(table, 600, seed=7 + len(create))
    batch = rows_to_batch(table, rows)
    records = get_encoder("ydb-json").encode_python(
        batch, table, feed_of(table, "ydb-json", Mode.UPDATES, virtual=True)
    )
    dec = RecordDecoder(table)
    cols = table.stored
    vals = [c for c in cols if not c.is_key]
    nk = len(table.key)
    meta = 7
    for row, (_, _, value, _) in zip(rows, records, strict=True):
        got = dec.decode(value)
        assert isinstance(got, Change)
        # the apply's form: same key and cells, kind and step
        kind, pkey, pcells, step = dec.parse(orjson.loads(value))
        assert kind == (ERASE if got.erase else UPDATE) and step == (got.ts[0] if got.ts else None)
        assert len(pkey) == len(got.key) and all(_same(a, b) for a, b in zip(pkey, got.key, strict=True))
        assert set(pcells) == set(got.cells)
        assert all(_same(pcells[i], got.cells[i]) or (pcells[i] == got.cells[i]) for i in pcells)
        key = tuple(row[meta + i] for i, c in enumerate(cols) if c.is_key)
        assert len(got.key) == nk and all(_same(a, b) for a, b in zip(got.key, key, strict=True)), (
            got.key,
            key,
        )
        op = row[4]
        assert got.erase == (op == CHANGE_ERASE)
        assert got.ts is not None and got.ts[1] == row[3]
        if got.erase:
            continue
        new = {c.id: row[meta + cols.index(c)] for c in vals}
        flags = {c.id: row[meta + len(cols) + i] for i, c in enumerate(vals)}
        wanted = {cid: v for cid, v in new.items() if op == CHANGE_SNAPSHOT or flags[cid]}
        assert set(got.cells) == set(wanted)
        for cid, v in wanted.items():
            c = table.column_by_id(cid)
            if c.type.kind is Kind.JSON and v is not None:
                # (str(): a jsonb value read back is a JsonText, which orjson takes only as str)
                assert orjson.loads(str(got.cells[cid])) == orjson.loads(str(v))
                continue
            assert _same(got.cells[cid], v), (c.name, got.cells[cid], v)


def test_barriers_and_bad_records(tmp_path: Path) -> None:
    table = make_table(tmp_path, "CREATE TABLE t (k Uint64, v Int32, PRIMARY KEY (k))")
    dec = RecordDecoder(table)
    assert dec.decode(b'{"resolved":[1670792500000,0]}') == Barrier(1670792500000, 0)
    assert dec.decode(b'{"key":[1],"update":{"v":5}}') == Change((1 - (1 << 63),), False, {1: 5}, None)
    assert dec.decode(b'{"key":[2],"erase":{}}').erase is True  # type: ignore[union-attr]
    assert dec.parse(orjson.loads(b'{"resolved":[1670792500000,0]}')) == (BARRIER, (), {}, 1670792500000)
    assert dec.parse(orjson.loads(b'{"key":[1],"update":{"v":5},"ts":[7,8]}')) == (
        UPDATE,
        (1 - (1 << 63),),
        {1: 5},
        7,
    )
    assert dec.parse(orjson.loads(b'{"key":[2],"erase":{}}')) == (ERASE, (2 - (1 << 63),), {}, None)
    for bad, text in [
        (b'{"key":[1],"update":{"v":"x"}}', "column v: changefeed value 'x' is not a Int32"),
        (b'{"key":[1],"update":{"v":true}}', "column v: changefeed value True is not a Int32"),
        (b'{"key":[1],"update":{"v":1.5}}', "column v: changefeed value 1.5 is not a Int32"),
        (b'{"key":[-1],"update":{}}', "column k: changefeed value -1 is not a Uint64"),
        (b'{"key":["1"],"update":{}}', "column k: changefeed value '1' is not a Uint64"),
        (b'{"key":[1],"update":{"w":1}}', "unknown column 'w'"),
        (b'{"key":[1,2],"update":{}}', "does not match its 1 key column(s)"),
        (b'{"key":[1]}', "neither update nor erase"),
    ]:
        with pytest.raises(TypeMismatch, match=__import__("re").escape(text)):
            dec.decode(bad)
        with pytest.raises(TypeMismatch, match=__import__("re").escape(text)):
            dec.parse(orjson.loads(bad))
