"""The pipelined-run scan of the PostgreSQL endpoint's bulk path (``server/pg/batch.scan_run``)
against a message-by-message reference: random runs of Bind/[Describe]/Execute of one statement,
binary and text formats, NULLs, values of one size and of many, values holding the Execute's own
bytes, Executes with no row limit and with a limit of one (pgjdbc's executeBatch), and groups that
break the run (another statement, other formats, a value that does not decode, a malformed Bind);
an Execute with another row limit ends the scan's fast path but not the run (the statement returns
no rows: any limit takes them all). The scan must take exactly the rows the reference takes, with
the same decoded values, and leave the stream at the same message. No server: the scan reads a
buffer; ``test_pg_load.py`` drives it through real clients."""

from __future__ import annotations

import random
import struct
from types import SimpleNamespace
from typing import Any

import pytest

from changefeed.exceptions import ChangefeedError
from changefeed.server.pg import batch as batches, protocol as p, types as t
from changefeed.server.pg.portals import Batch, BatchRows, Portal, Prepared
from changefeed.server.pg.values import fmt_of

#: Describe of the unnamed portal, and Execute of it with no row limit, as the wire carries them.
DESCRIBE = b"D\x00\x00\x00\x06P\x00"
EXECUTE = b"E\x00\x00\x00\x09\x00\x00\x00\x00\x00"


def _execute(limit: int) -> bytes:
    return b"E\x00\x00\x00\x09\x00" + struct.pack("!i", limit)


def _msg(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _bind(stmt: bytes, formats: list[int], values: list[bytes | None], result: list[int]) -> bytes:
    body = b"\x00" + stmt + b"\x00" + struct.pack(f"!h{len(formats)}h", len(formats), *formats)
    body += struct.pack("!h", len(values))
    for v in values:
        body += b"\xff\xff\xff\xff" if v is None else struct.pack("!i", len(v)) + v
    return _msg(b"B", body + struct.pack(f"!h{len(result)}h", len(result), *result))


#: (oid, binary) -> a random wire value and its decoded form.
def _value(rng: random.Random, oid: int, binary: bool, same: bool) -> bytes | None:
    if rng.random() < (0.0 if same else 0.08):
        return None
    if oid in (t.INT8, t.INT4, t.INT2):
        bits = {t.INT8: 63, t.INT4: 31, t.INT2: 15}[oid]
        v = 7 if same else rng.randint(-(2**bits), 2**bits - 1)
        if binary:
            return v.to_bytes({t.INT8: 8, t.INT4: 4, t.INT2: 2}[oid], "big", signed=True)
        return str(v).encode()
    if same:
        return b"value"
    choice = rng.random()
    if choice < 0.05:
        return EXECUTE + b"x"  # the Execute's bytes inside a value: the split must not be fooled
    if choice < 0.1:
        return DESCRIBE + EXECUTE
    if choice < 0.15:
        return "é€😀 snow ☃".encode()
    if choice < 0.18:
        return b""
    return ("v" * rng.randint(0, 40)).encode()


def _decode_ref(values: list[bytes | None], oids: list[int], formats: list[int]) -> list[Any] | None:
    try:
        return [t.decode_param(v, oids[i], fmt_of(formats, i) == 1, i) for i, v in enumerate(values)]
    except (ChangefeedError, ValueError):
        return None


SHAPES = [
    # (oids, formats): asyncpg (all binary), psycopg (int4 binary, text, int2 binary), all text,
    # one format code for all, no codes (text), a single column.
    ([t.INT8, t.TEXT, t.INT8], [1, 1, 1]),
    ([t.INT4, 0, t.INT2], [1, 0, 1]),
    ([t.INT8, t.TEXT, t.INT8], [0, 0, 0]),
    ([t.INT8, t.TEXT], [1]),
    ([t.INT4, t.VARCHAR, t.TEXT, t.INT8], []),
    ([t.TEXT], [1]),
]


def _scan_all(buf: bytes, prep: Prepared, first: Portal) -> tuple[list[tuple[Any, ...]], int, int]:
    """Drive ``scan_run`` over ``buf`` (the groups after the batch's first Execute) as
    ``take_pipelined`` does, taking a group message by message when the scan does not (as
    ``batch_message`` would: here by the reference parse). Rows taken by the scan, rows in all,
    and where the stream stopped."""
    batch = Batch(prep, BatchRows([first.params]), [b""], shape=batches.run_shape(first))
    stream = SimpleNamespace(buf=buf, pos=0)
    session = SimpleNamespace(batch=batch, messages=stream, portals={"": first})
    scanned = 0
    while True:
        before = len(batch.rows)
        if batches.scan_run(session):  # type: ignore[arg-type]
            scanned += len(batch.rows) - before
            assert batch.rows[-1] == tuple(session.portals[""].params)
            continue
        got = _one_group(buf, stream.pos, prep, first)
        if got is None:
            return [tuple(r) for r in list(batch.rows)[1:]], scanned, stream.pos
        row, stream.pos = got
        batch.rows.append(row)


def _one_group(buf: bytes, pos: int, prep: Prepared, first: Portal) -> tuple[list[Any], int] | None:
    """The reference: the group at ``pos`` if it belongs to the run (a Bind of the statement with
    the first one's formats whose parameters decode, then Execute with any row limit, with
    Describe if the first had it): its parameters and where the next group starts."""
    if len(buf) - pos < 5 or buf[pos : pos + 1] != b"B":
        return None
    (n,) = struct.unpack_from("!i", buf, pos + 1)
    if pos + 1 + n > len(buf):
        return None
    try:
        portal, stmt, pf, raw, rf = p.parse_bind(buf[pos + 5 : pos + 1 + n])
    except p.ProtocolViolation:
        return None
    if portal or stmt != "s1" or pf != first.param_formats or list(rf) != first.formats:
        return None
    if len(raw) != len(first.params):
        return None
    row = _decode_ref(raw, prep.param_oids, list(pf))
    if row is None:
        return None
    nxt = pos + 1 + n
    if first.described:
        if not buf.startswith(DESCRIBE, nxt):
            return None
        nxt += len(DESCRIBE)
    if not buf.startswith(EXECUTE[:6], nxt) or len(buf) < nxt + len(EXECUTE):
        return None
    return row, nxt + len(EXECUTE)


def _breaker(rng: random.Random, oids: list[int], formats: list[int]) -> bytes:
    """A group that ends the run."""
    kind = rng.choice([0, 2, 3, 4, 5])
    width = len(oids)
    good = [b"1"] * width if not any(fmt_of(formats, i) for i in range(width)) else None
    if kind == 0:  # another statement
        return _bind(b"s2", formats, good or [b"\x00" * 8] * width, [1]) + EXECUTE
    if kind == 2:  # a value that does not decode: bad UTF-8 or a wrong integer width
        vals = [_value(rng, o, fmt_of(formats, i) == 1, False) for i, o in enumerate(oids)]
        vals[0] = b"\xff\xfe" if oids[0] in (t.TEXT, 0, t.VARCHAR) else b"\x01\x02\x03"
        return _bind(b"s1", formats, vals, [1]) + EXECUTE
    if kind == 3:  # a malformed Bind: a value length past its end
        body = b"\x00s1\x00" + struct.pack(f"!h{len(formats)}h", len(formats), *formats)
        body += struct.pack("!h", width) + b"\x7f\xff\xff\xff" + b"12345678" * width
        return _msg(b"B", body + struct.pack("!hh", 1, 1)) + EXECUTE
    if kind == 4:  # Sync
        return _msg(b"S", b"")
    return _bind(b"s1", [1 - (fmt_of(formats, 0) == 1)] * width, [b"\x00" * 4] * width, [1]) + EXECUTE


@pytest.mark.parametrize("seed", range(40))
def test_scan_run_takes_what_message_by_message_takes(seed: int) -> None:
    rng = random.Random(seed)
    oids, formats = SHAPES[seed % len(SHAPES)]
    described = seed % 3 == 0
    same = seed % 4 in (1, 2)  # every group the same size (the fixed-layout path)
    limit = int(seed % 5 == 4)  # pgjdbc's executeBatch asks for one row
    prep = Prepared("INSERT ..", "engine", param_oids=list(oids))
    first_vals = [_value(rng, o, fmt_of(formats, i) == 1, same) for i, o in enumerate(oids)]
    first_row = _decode_ref(first_vals, oids, formats)
    assert first_row is not None
    first = Portal(prep, first_row, [1])
    first.param_formats = tuple(formats)
    first.described = described
    first_bind = _bind(b"s1", formats, first_vals, [1])
    first.bind_head = first_bind[5 : 5 + 1 + 3 + 2 + 2 * len(formats)]
    term = DESCRIBE + _execute(limit) if described else _execute(limit)
    groups = []
    expected: list[tuple[Any, ...]] = []
    ended = False
    for _ in range(rng.choice([3, 9, 40, 300, 2000])):
        if rng.random() < 0.01:
            groups.append(_breaker(rng, oids, formats))
            ended = True
            continue
        vals = [_value(rng, o, fmt_of(formats, i) == 1, same) for i, o in enumerate(oids)]
        other = rng.random() < 0.01  # another row limit: still the run's
        groups.append(
            _bind(b"s1", formats, vals, [1]) + (term[: -len(EXECUTE)] + _execute(5) if other else term)
        )
        if not ended:
            row = _decode_ref(vals, oids, formats)
            assert row is not None
            expected.append(tuple(row))
    buf = b"".join(groups) + _msg(b"S", b"")
    rows, scanned, stop = _scan_all(buf, prep, first)
    assert rows == expected[: len(rows)]
    assert len(rows) == len(expected)  # every breaker breaks the run
    # It stops where the reference stops: at the first group that breaks the run.
    ref_rows: list[tuple[Any, ...]] = []
    pos = 0
    while (got := _one_group(buf, pos, prep, first)) is not None:
        ref_rows.append(tuple(got[0]))
        pos = got[1]
    assert rows == ref_rows
    assert stop == pos
    if len(ref_rows) >= 50 and same:
        assert scanned == len(ref_rows)  # nothing of one size is left to the slow path
    elif len(ref_rows) >= 50:
        assert scanned >= len(ref_rows) * 0.7  # values holding the Execute's bytes go one by one


def test_replies_of_a_run_keep_each_rows_own() -> None:
    tag = p.command_complete("INSERT 0 1")
    pre = [b"", p.BIND_COMPLETE, p.BIND_COMPLETE, p.BIND_COMPLETE + p.NO_DATA, p.BIND_COMPLETE]
    assert batches.replies(pre, tag) == b"".join(r + tag for r in pre)
