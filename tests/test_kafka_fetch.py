"""The Kafka endpoint's fetch and produce paths, without a client: the record batch encoder
against a plain reference encoder; the topic log's stored batches (a fetch returns them whole,
from the one holding the offset, up to max bytes; retention; ns timestamps); a produced batch
kept as its producer framed it; partition files of the old row format read and appended to;
a damaged stored batch."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import crc32c
import pyarrow as pa
import pytest

from changefeed.server.kafka import errors as E
from changefeed.server.kafka.broker import Broker
from changefeed.server.kafka.records import encode_batch, parse_batches
from changefeed.topics import TopicStore


def _uvarint(u: int) -> bytes:
    out = bytearray()
    while True:
        if u < 0x80:
            out.append(u)
            return bytes(out)
        out.append((u & 0x7F) | 0x80)
        u >>= 7


def _zz(n: int) -> bytes:
    return _uvarint((n << 1) if n >= 0 else ((-n) << 1) - 1)


def reference_batch(
    base: int, offsets: list[int], keys: list[bytes | None], values: list[bytes], ts: list[int]
) -> bytes:
    """The magic-2 record batch straight from the protocol guide, one field at a time."""
    records = b""
    for off, key, value, t in zip(offsets, keys, values, ts, strict=True):
        body = b"\x00" + _zz(t - ts[0]) + _zz(off - base)
        body += _zz(-1) if key is None else _zz(len(key)) + key
        body += _zz(len(value)) + value + _zz(0)
        records += _zz(len(body)) + body
    after = struct.pack(">hiqqqhii", 0, offsets[-1] - base, ts[0], max(ts), -1, -1, -1, len(values)) + records
    return struct.pack(">qiibI", base, 9 + len(after), 0, 2, crc32c.crc32c(after)) + after


@pytest.mark.parametrize(
    "shape",
    ["one transaction", "gaps and clock steps", "null and empty keys", "big records", "10k records"],
)
def test_encoder_matches_the_protocol_guide(shape: str) -> None:
    n = {"10k records": 10_000, "big records": 5}.get(shape, 300)
    offsets = list(range(1000, 1000 + n))
    keys: list[bytes | None] = [b"k%d" % i for i in range(n)]
    values = [b"v" * 200] * n
    ts = [1_700_000_000_000] * n
    if shape == "gaps and clock steps":
        offsets = [1000 + 3 * i + (i > 10) * 70_000 for i in range(n)]
        ts = [1_700_000_000_000 + (i % 7) * 40_000 - (i % 3) * 9 for i in range(n)]
    elif shape == "null and empty keys":
        keys = [None if i % 3 == 0 else b"" if i % 3 == 1 else b"key" for i in range(n)]
    elif shape == "big records":
        keys = [b"K" * 20_000, None, b"k", b"", b"k" * 9000]
        values = [b"x" * 70_000, b"", b"y" * 8190, b"z" * 8200, b"w" * 2_100_000]
    data = encode_batch(offsets[0], offsets, keys, values, ts)
    assert data == reference_batch(offsets[0], offsets, keys, values, ts)
    (batch,) = parse_batches(data)
    assert (batch.keys, batch.values, batch.timestamps_ms.tolist()) == (keys, values, ts)


def test_store_reads_columns_with_and_without_offset_gaps(tmp_path: Path) -> None:
    now = [10**12]
    st = TopicStore(tmp_path, clock=lambda: now[0])
    info = st.ensure_topic("t", 1, retention_ns=1_000)

    def rows(vals: list[bytes], ts: int) -> pa.Table:
        return pa.table({"key": [None] * len(vals), "value": vals, "ts": [ts] * len(vals)})

    st.append("t", 0, "w", 1, rows([b"a", b"b", b"c"], -1_500_000))  # ts before 1970: floor to ms
    cols = st.read_columns(info, 0, 0, 100, ts_unit_ns=1_000_000)
    assert (cols.earliest, cols.next_offset, list(cols.offsets)) == (0, 3, [0, 1, 2])
    assert (list(cols.values), list(cols.keys), list(cols.timestamps)) == (
        [b"a", b"b", b"c"],
        [None] * 3,
        [-2] * 3,
    )
    # A writer whose clock lagged: its records outlive the ones after them, leaving a gap.
    now[0] = 5 * 10**12
    st.append("t", 0, "w", 2, rows([b"d", b"e"], 7_000_000))
    now[0] = 10**12
    st.append("t", 0, "w", 3, rows([b"f"], 8_000_000))
    assert st.apply_retention(10**12 + 2_000) == 4  # a, b, c and f
    st.append("t", 0, "w", 4, rows([b"g"], 9_000_000))
    cols = st.read_columns(info, 0, 0, 100)
    assert (cols.earliest, cols.next_offset) == (3, 7)
    assert (list(cols.offsets), list(cols.values), list(cols.timestamps)) == (
        [3, 4, 6],
        [b"d", b"e", b"g"],
        [7_000_000, 7_000_000, 9_000_000],
    )
    cols = st.read_columns(info, 0, 4, 2)
    assert (list(cols.offsets), list(cols.values)) == ([4, 6], [b"e", b"g"])
    assert list(st.read_columns(info, 0, 7, 10).values) == []


def test_fetch_returns_stored_batches_whole_from_the_one_holding_the_offset(tmp_path: Path) -> None:
    now = [10**12]
    st = TopicStore(tmp_path, clock=lambda: now[0])
    info = st.ensure_topic("t", 1, retention_ns=1_000)
    for b in range(10):  # ten appends: ten stored batches of 100 records (~10.5 KB each)
        keys = [b"k%d" % i for i in range(100 * b, 100 * b + 100)]
        ts = [1_700_000_000_000_000_123 + i for i in range(100)]  # ns: finer than a batch's ms
        st.append("t", 0, "w", b, pa.table({"key": keys, "value": [b"v" * 90] * 100, "ts": ts}))
    broker = Broker(tmp_path)
    try:
        first = broker.fetch_partition(info, 0, 0, 25_000)
        # whole batches while they fit: two
        assert (first.error, first.high_watermark, first.log_start, first.more_at) == (E.NONE, 1000, 0, 200)
        a, b = parse_batches(first.data)
        assert a.keys == [b"k%d" % i for i in range(100)] and b.keys[0] == b"k100"
        # the offset inside a batch: that batch whole, from its base offset (clients skip ahead)
        mid = broker.fetch_partition(info, 0, 150, 1)  # the first batch always, past max bytes
        assert mid.more_at == 200 and struct.unpack_from(">q", mid.records or b"")[0] == 100
        (c,) = parse_batches(mid.records or b"")
        assert c.keys == [b"k%d" % i for i in range(100, 200)]
        assert broker.fetch_partition(info, 0, 999, 10**6).more_at is None
        assert broker.fetch_partition(info, 0, 1000, 10**6).records == b""
        # the log's own readers see the ns timestamps, not the batches' ms ones
        assert [r.ts for r in st.read("t", 0, 150, 2)] == [
            1_700_000_000_000_000_173,
            1_700_000_000_000_000_174,
        ]
        assert st.offset_for_time("t", 0, 1_700_000_000_000_000_200) == (77, 1_700_000_000_000_000_200)
        # retention deletes whole batches; the log start moves to the next one
        now[0] = 2 * 10**12
        st.append("t", 0, "w", 10, pa.table({"key": [b"x"], "value": [b"y"], "ts": [5]}))
        assert st.apply_retention(10**12 + 2_000) == 1000
        gone = broker.fetch_partition(info, 0, 0, 10_000)
        assert (gone.error, gone.log_start, gone.high_watermark) == (E.OFFSET_OUT_OF_RANGE, 1000, 1001)
        (last,) = parse_batches(broker.fetch_partition(info, 0, 1000, 10_000).records or b"")
        assert (last.keys, last.values) == ([b"x"], [b"y"])
    finally:
        broker.close()


def test_produced_timestamps_become_ns_and_out_of_range_ones_are_refused(tmp_path: Path) -> None:
    from changefeed.server.kafka.records import ProducedBatch

    st = TopicStore(tmp_path)
    info = st.ensure_topic("t", 1, 0)
    broker = Broker(tmp_path)
    try:
        ok = ProducedBatch.from_lists(-1, -1, -1, False, [b"a", None], [b"1", None], [1_700_000_000_123, -1])
        assert broker.append_batches(info, 0, [ok]).error == E.NONE
        (a, b) = st.read("t", 0, 0)
        assert (a.key, a.value, a.ts) == (b"a", b"1", 1_700_000_000_123_000_000)
        assert (b.key, b.value) == (None, b"") and abs(
            b.ts - time.time_ns()
        ) < 60 * 10**9  # no timestamp: now
        bad = ProducedBatch.from_lists(-1, -1, -1, False, [None], [b"x"], [9_300_000_000_000])
        res = broker.append_batches(info, 0, [bad])
        assert (res.error, res.message) == (E.INVALID_TIMESTAMP, "timestamp 9300000000000 ms is out of range")
        assert st.offsets("t") == {0: (0, 2)}
    finally:
        broker.close()


# -- the produce path: record batches parsed column-wise, appended as slices -------------------


def _produced_batch(records: list[bytes], base_ts: int = 1_700_000_000_000) -> bytes:
    """A magic-2 batch around hand-framed records (each ``attributes .. headers``)."""
    body = b"".join(_zz(len(r)) + r for r in records)
    n = len(records)
    after = struct.pack(">hiqqqhii", 0, n - 1, base_ts, base_ts, 7, 0, 0, n) + body
    return struct.pack(">qiibI", 0, 9 + len(after), 0, 2, crc32c.crc32c(after)) + after


def _record(td: int, od: int, key: bytes | None, value: bytes | None, headers: bytes = _zz(0)) -> bytes:
    out = b"\x00" + _zz(td) + _zz(od)
    out += _zz(-1) if key is None else _zz(len(key)) + key
    out += _zz(-1) if value is None else _zz(len(value)) + value
    return out + headers


@pytest.fixture(params=["column-wise", "record by record"])
def parse_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test through both parsers: numpy over all records, and the small-batch loop."""
    from changefeed.topics import batch

    monkeypatch.setattr(batch, "_FEW", 0 if request.param == "column-wise" else 1 << 30)
    return str(request.param)


def test_produced_records_parse_column_wise_with_headers_long_varints_and_nulls(parse_path: str) -> None:
    header = _zz(1) + _zz(2) + b"hk" + _zz(3) + b"hv!"
    recs = [
        _record(0, 0, b"a", b"1"),
        _record(-5, 1, None, b"x" * 300, header),  # negative delta, 2-byte value length
        _record(70_000, 2_000_000, b"k" * 9000, None),  # 3- and 4-byte varints, null value
        _record(1 << 40, 3, b"", b"", header),  # a 6-byte timestamp delta, empty key and value
    ]
    (batch,) = parse_batches(_produced_batch(recs))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.count) == (7, 0, 0, 4)
    assert batch.keys == [b"a", None, b"k" * 9000, b""]
    assert batch.values == [b"1", b"x" * 300, None, b""]
    base = 1_700_000_000_000
    assert batch.timestamps_ms.tolist() == [base, base - 5, base + 70_000, base + (1 << 40)]
    # Timestamps past int64 are held at its ends, not wrapped: the broker then refuses or replaces them.
    edge = [_record(1 << 62, 0, None, b"x"), _record(-(1 << 62), 1, None, b"y")]
    (hi,) = parse_batches(_produced_batch(edge[:1], base_ts=(1 << 62) + 5))
    (lo,) = parse_batches(_produced_batch(edge[1:], base_ts=-(1 << 62) - 5))
    assert (hi.timestamps_ms.tolist(), lo.timestamps_ms.tolist()) == ([(1 << 63) - 1], [-(1 << 63)])


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([_record(0, 0, b"a" * 10, b"1")[:-4]], "run past the record"),  # key longer than its record
        ([_record(0, 0, b"a", b"v" * 50)[:-9] + _zz(0)], "run past the record"),  # value too
        ([b"\x00" + b"\xff" * 11], "too long"),  # an endless varint
        ([_record(0, 0, None, b"v")[:1]], "run past the record"),  # attributes only
        ([_record(0, 0, b"a", None, _zz(-3))], ""),  # a negative header count is only skipped
    ],
)
def test_malformed_produced_records_are_refused(records: list[bytes], message: str, parse_path: str) -> None:
    from changefeed.server.kafka.wire import MalformedRequest

    data = _produced_batch(records)
    if not message:
        (batch,) = parse_batches(data)
        assert (batch.keys, batch.values) == ([b"a"], [None])
        return
    with pytest.raises(MalformedRequest, match=message):
        parse_batches(data)
    # a record count beyond the records, and bytes after them
    head = struct.unpack_from(">qiibI", _produced_batch([_record(0, 0, b"a", b"1")]))
    assert head[3] == 2
    for extra, count in ((b"", 2), (b"\x00", 1)):
        body = _zz(len(_record(0, 0, b"a", b"1"))) + _record(0, 0, b"a", b"1") + extra
        after = struct.pack(">hiqqqhii", 0, 0, 0, 0, -1, -1, -1, count) + body
        bad = struct.pack(">qiibI", 0, 9 + len(after), 0, 2, crc32c.crc32c(after)) + after
        with pytest.raises(MalformedRequest, match="record"):
            parse_batches(bad)


def test_append_slices_checks_the_writer_in_its_transaction_and_chunks_rows(tmp_path: Path) -> None:
    import dataclasses

    import numpy as np

    from changefeed.exceptions import TopicError
    from changefeed.topics.store import Appended, RecordSlices

    st = TopicStore(tmp_path)
    info = st.ensure_topic("t", 1, 0)
    two = RecordSlices.from_lists([b"a", None], [b"1", b""], [5, 6])
    assert st.append_slices(info, 0, "w", 1, two, 1_000_000, expect_after=-1) == Appended(0, 2, 0, None)
    assert st.append_slices(info, 0, "w", 1, two, expect_after=-1) == Appended(2, 0, 0, 1)  # a retry
    assert st.append_slices(info, 0, "w", 9, two, expect_after=5) == Appended(2, 0, 0, 1)  # a gap
    assert st.append_slices(info, 0, "w", 3, two, 1_000_000, expect_after=1) == Appended(2, 2, 0, 1)
    assert [(r.offset, r.key, r.value, r.ts) for r in st.read("t", 0, 0)] == [
        (0, b"a", b"1", 5_000_000),
        (1, None, b"", 6_000_000),
        (2, b"a", b"1", 5_000_000),
        (3, None, b"", 6_000_000),
    ]
    assert st.committed_batch("t", 0, "w") == 3
    # More rows than one statement holds, of every size: each chunk binds its part of the buffer.
    n = 700
    keys = [None if i % 5 == 0 else b"k%d" % i * (i % 7) for i in range(n)]
    values = [bytes([i % 251]) * (i * 37 % 3000) for i in range(n)]
    many = RecordSlices.from_lists(keys, values, list(range(n)))
    assert st.append_slices(info, 0, "other", 1, many) == Appended(4, n, 0, None)
    got = st.read("t", 0, 4, n)
    assert [(r.key, r.value, r.ts) for r in got] == list(zip(keys, values, range(n), strict=True))
    assert st.read_arrow("t", 0, 4).column("value").to_pylist() == values
    for bad in (
        dataclasses.replace(two, value_lengths=np.array([1, 99])),
        dataclasses.replace(two, value_lengths=np.array([1, -1])),
    ):
        with pytest.raises(TopicError, match="outside their buffer"):
            st.append_slices(info, 0, "w", 10, bad)
    assert st.offsets("t") == {0: (0, 4 + n)}


# -- partition files of the row format (written before the log stored batches) ----------------

_ROW_FORMAT = (
    "CREATE TABLE records (offset INTEGER PRIMARY KEY, key BLOB, value BLOB NOT NULL, "
    "ts INTEGER NOT NULL, write_time INTEGER NOT NULL)",
    "CREATE TABLE writers (writer TEXT PRIMARY KEY, batch INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE state (id INTEGER PRIMARY KEY CHECK (id = 0), next_offset INTEGER NOT NULL)",
)


def _row_format_partition(tmp_path: Path, n: int) -> tuple[TopicStore, object]:
    """A topic whose partition file is in the row format, holding ``n`` records."""
    import sqlite3

    st = TopicStore(tmp_path)
    info = st.ensure_topic("t", 1, 0)
    path = st.root / str(info.id) / "0.sqlite"
    st.close()
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for ddl in _ROW_FORMAT:
        conn.execute(ddl)
    conn.executemany(
        "INSERT INTO records VALUES (?, ?, ?, ?, ?)",
        [
            (i, None if i % 9 == 0 else b"k%d" % i, b"v%d" % i, 1_700_000_000_000_000_001 + i, 10**12)
            for i in range(n)
        ],
    )
    conn.execute("INSERT INTO writers VALUES ('w', 1)")
    conn.execute("INSERT INTO state VALUES (0, ?)", (n,))
    conn.execute("PRAGMA application_id=1128682576")  # "CFTP"
    conn.close()
    return TopicStore(tmp_path), info


def test_a_row_format_partition_is_read_and_appended_to_in_batches(tmp_path: Path) -> None:
    st, info = _row_format_partition(tmp_path, 100)
    assert st.offsets("t") == {0: (0, 100)}
    assert [(r.offset, r.key, r.value, r.ts) for r in st.read("t", 0, 98, 10)] == [
        (98, b"k98", b"v98", 1_700_000_000_000_000_099),
        (99, None, b"v99", 1_700_000_000_000_000_100),
    ]
    assert st.committed_batch("t", 0, "w") == 1
    three = pa.table({"key": [b"a", b"b", b"c"], "value": [b"1", b"2", b"3"], "ts": [7_000_000] * 3})
    assert st.append("t", 0, "w", 1, three) == 0  # a retry of a batch the old file committed
    assert st.append("t", 0, "w", 2, three) == 3
    assert [r.offset for r in st.read("t", 0, 97, 10)] == [97, 98, 99, 100, 101, 102]
    table = st.read_arrow("t", 0, 0)
    assert table.num_rows == 103 and table.column("value").to_pylist()[99:] == [b"v99", b"1", b"2", b"3"]
    assert st.offset_for_time("t", 0, 1_700_000_000_000_000_051) == (50, 1_700_000_000_000_000_051)
    assert st.offset_for_time("t", 0, 1) == (0, 1_700_000_000_000_000_001)
    broker = Broker(tmp_path)
    try:
        # rows are encoded at fetch time, the batches after them as stored
        (old, *_rest) = parse_batches(broker.fetch_partition(info, 0, 90, 10**6).records or b"")  # type: ignore[arg-type]
        assert old.keys[:10] == [b"k%d" % i if i % 9 else None for i in range(90, 100)]
        new = broker.fetch_partition(info, 0, 101, 10**6)  # type: ignore[arg-type]
        assert struct.unpack_from(">q", new.records or b"")[0] == 100
        (batch,) = parse_batches(new.records or b"")
        assert (batch.keys, batch.values) == ([b"a", b"b", b"c"], [b"1", b"2", b"3"])
    finally:
        broker.close()
    # retention reaches both formats
    assert TopicStore(tmp_path, clock=lambda: 10**13).apply_retention(10**13) == 0
    st.ensure_topic("t", 1, retention_ns=1)
    assert TopicStore(tmp_path, clock=lambda: 9 * 10**18).apply_retention() == 103
    assert st.offsets("t") == {0: (103, 103)}


def test_a_produced_batch_is_stored_as_framed_and_fetched_byte_for_byte(tmp_path: Path) -> None:
    st = TopicStore(tmp_path)
    info = st.ensure_topic("t", 1, 0)
    header = _zz(1) + _zz(1) + b"h" + _zz(2) + b"hv"
    framed = _produced_batch(
        [_record(0, 0, b"a", b"1", header), _record(3, 1, None, None), _record(9, 2, b"c", b"")]
    )
    other = _zz(1) + _zz(3) + b"h-2" + _zz(-1)  # one header, its value null
    wrong = bytearray(  # offset deltas 0, 5: framed anew
        _produced_batch(
            [_record(0, 0, b"x", b"9", other), _record(0, 5, b"y", None), _record(0, 6, b"z", b"7")]
        )
    )
    struct.pack_into(">q", wrong, 43, 8)  # another producer id
    struct.pack_into(">I", wrong, 17, crc32c.crc32c(bytes(wrong[21:])))
    broker = Broker(tmp_path)
    try:
        assert broker.append_batches(info, 0, parse_batches(framed)).error == E.NONE
        assert broker.append_batches(info, 0, parse_batches(bytes(wrong))).error == E.NONE
        got = broker.fetch_partition(info, 0, 1, 10**6).data
        # the producer's batch itself (its max timestamp made its records', the CRC redone)
        first = len(framed)
        assert got[8:12] == framed[8:12] and got[61:first] == framed[61:first]
        assert got[:8] == struct.pack(">q", 0) and struct.unpack_from(">q", got, 35)[0] == 1_700_000_000_009
        a, b = parse_batches(got)
        assert (a.keys, a.values) == ([b"a", None, b"c"], [b"1", None, b""])
        # offsets the log must assign: framed anew from base offset 3, offsets consecutive; keys,
        # values (the null one too) and headers as the producer sent them
        assert struct.unpack_from(">qi", got, first)[0] == 3 and b.offset_deltas.tolist() == [0, 1, 2]
        assert (b.keys, b.values) == ([b"x", b"y", b"z"], [b"9", None, b"7"])
        assert other in got[first:] and struct.unpack_from(">q", got, first + 43)[0] == 8  # its producer
        assert [(r.offset, r.key, r.value) for r in st.read("t", 0, 0)] == [
            (0, b"a", b"1"),
            (1, None, b""),  # the log's own readers see a tombstone as an empty value
            (2, b"c", b""),
            (3, b"x", b"9"),
            (4, b"y", b""),
            (5, b"z", b"7"),
        ]
    finally:
        broker.close()


def test_a_damaged_stored_batch_is_a_corrupt_file_error(tmp_path: Path) -> None:
    import sqlite3

    from changefeed.exceptions import CorruptFile

    st = TopicStore(tmp_path)
    info = st.ensure_topic("t", 1, 0)
    st.append("t", 0, "w", 1, pa.table({"key": [b"a"], "value": [b"1"], "ts": [5]}))
    path = st.root / str(info.id) / "0.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    (data,) = conn.execute("SELECT data FROM batches").fetchone()
    conn.execute("UPDATE batches SET data = ?", (data[:-1] + b"\xff",))
    conn.close()
    with pytest.raises(CorruptFile, match=r"0\.sqlite: batch at offset 0: record batch CRC-32C mismatch"):
        st.read("t", 0, 0)


# -- compressed batches: stored as produced, decompressed by the log's own readers -------------

CODEC_IDS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _with_body(plain: bytes, codec: int, body: bytes) -> bytes:
    """``plain``'s header around compressed records ``body``: codec bits, length, CRC set."""
    head = bytearray(plain[:61])
    struct.pack_into(">i", head, 8, 49 + len(body))
    struct.pack_into(">h", head, 21, codec)
    out = head + body
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


@pytest.mark.parametrize("codec", [*CODEC_IDS, "snappy-raw"])
def test_compressed_batches_are_stored_as_produced_and_read_decompressed(tmp_path: Path, codec: str) -> None:
    import cramjam

    from changefeed.topics.batch import compress_batch

    n = 300  # column-wise parse
    keys = [b"k%d" % (i % 7) for i in range(n)]
    values = [b"value %d " % i * 4 for i in range(n)]
    ts = [1_700_000_000_000 + i for i in range(n)]
    plain = encode_batch(0, range(n), keys, values, ts)
    if codec == "snappy-raw":  # one raw snappy block, no snappy-java framing: Kafka reads it too
        packed = _with_body(plain, 2, bytes(cramjam.snappy.compress_raw(plain[61:])))
    else:
        packed = compress_batch(plain, CODEC_IDS[codec])
    assert len(packed) < len(plain) // 2 and packed[22] & 7 == CODEC_IDS[codec.split("-")[0]]
    st = TopicStore(tmp_path)
    info = st.ensure_topic("t", 1, 0)
    broker = Broker(tmp_path)
    try:
        for _ in range(2):
            assert broker.append_batches(info, 0, parse_batches(packed)).error == E.NONE
        # a Fetch returns the batches compressed, as produced (the second one at base offset 300)
        got = broker.fetch_partition(info, 0, 0, 10**6).data
        assert got == packed + struct.pack(">q", n) + packed[8:]
        # the log's own readers (changefeed read, conn.stream, the pipeline's topic source)
        assert [(r.offset, r.key, r.value, r.ts) for r in st.read("t", 0, 290, 20)] == [
            (o, keys[o % n], values[o % n], ts[o % n] * 1_000_000) for o in range(290, 310)
        ]
        table = st.read_arrow("t", 0, 0)
        assert table.num_rows == 2 * n and table.column("value").to_pylist() == values * 2
        cols = st.read_columns(info, 0, 598, 10)
        assert (list(cols.offsets), list(cols.keys)) == ([598, 599], keys[-2:])
    finally:
        broker.close()


@pytest.mark.parametrize("codec", CODEC_IDS)
@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_corrupt_compressed_batch_is_refused_and_changes_nothing(
    tmp_path: Path, codec: str, damage: str
) -> None:
    from changefeed.server.kafka.records import UnsupportedBatch
    from changefeed.topics.batch import compress_batch
    from changefeed.topics.store import TopicError

    plain = encode_batch(0, range(50), [b"k"] * 50, [b"v%d" % i for i in range(50)], [1_700_000_000_000] * 50)
    body = compress_batch(plain, CODEC_IDS[codec])[61:]
    # the CRC-32C matches (it covers the compressed bytes): only decompressing finds the damage
    body = body[:-7] if damage == "truncated" else b"\xff" * 12 + body[12:]
    bad = _with_body(plain, CODEC_IDS[codec], body)
    with pytest.raises(UnsupportedBatch, match=f"{codec} records") as refused:
        parse_batches(bad)
    assert refused.value.code == E.UNKNOWN_SERVER_ERROR  # as Kafka answers it
    st = TopicStore(tmp_path)
    info = st.ensure_topic("t", 1, 0)
    with pytest.raises(TopicError, match=f"{codec} records"):
        st.append_batch(info, 0, "w", 1, bad)
    assert st.offsets("t") == {0: (0, 0)} and st.committed_batch("t", 0, "w") is None
    if codec == "zstd":  # zstd needs Produce v7 or later, as in Kafka
        good = compress_batch(plain, 4)
        with pytest.raises(UnsupportedBatch, match="version 6") as exc:
            parse_batches(good, 6)
        assert exc.value.code == E.UNSUPPORTED_COMPRESSION_TYPE
        assert len(parse_batches(good, 7)[0].values) == 50


@pytest.mark.parametrize("codec", CODEC_IDS)
def test_a_batch_that_decompresses_past_the_limit_is_refused(tmp_path: Path, codec: str) -> None:
    """A compression bomb (a small batch whose records expand past MAX_DECOMPRESSED) is refused
    without being expanded whole, and nothing is stored."""
    from changefeed.server.kafka.records import UnsupportedBatch
    from changefeed.topics import codecs
    from changefeed.topics.store import TopicError

    plain = encode_batch(0, range(1), [b"k"], [b"v"], [1_700_000_000_000])
    body = codecs.compress(CODEC_IDS[codec], b"\0" * (codecs.MAX_DECOMPRESSED + 1))
    bad = _with_body(plain, CODEC_IDS[codec], body)
    with pytest.raises(UnsupportedBatch, match="decompress to more than"):
        parse_batches(bad)
    st = TopicStore(tmp_path)
    info = st.ensure_topic("t", 1, 0)
    with pytest.raises(TopicError, match="decompress to more than"):
        st.append_batch(info, 0, "w", 1, bad)
    assert st.offsets("t") == {0: (0, 0)}


def test_the_next_window_is_read_ahead_and_served_as_a_fresh_read_would(tmp_path: Path) -> None:
    now = [10**12]
    st = TopicStore(tmp_path, clock=lambda: now[0])
    info = st.ensure_topic("t", 1, retention_ns=1_000)
    for b in range(10):
        keys = [b"k%d" % i for i in range(100 * b, 100 * b + 100)]
        st.append("t", 0, "w", b, pa.table({"key": keys, "value": [b"v" * 90] * 100, "ts": [b + 1] * 100}))
    broker = Broker(tmp_path)
    try:
        first = broker.fetch_partition(info, 0, 0, 25_000)
        assert first.more_at == 200
        time.sleep(0.5)  # the read-ahead of the next window (one small read) is done
        st.append("t", 0, "w", 10, pa.table({"key": [b"x"], "value": [b"y"], "ts": [11]}))
        ahead = broker.fetch_partition(info, 0, 200, 25_000)  # from the cache, watermarks fresh
        fresh = st.read_batches(info, 0, 200, 25_000)
        assert (ahead.data, ahead.more_at, ahead.high_watermark) == (b"".join(fresh.data), 400, 1001)
        # retention past a window read ahead: the cached window is out of range, as a read is
        broker.fetch_partition(info, 0, 400, 25_000)
        now[0] = 2 * 10**12
        st.append("t", 0, "w", 11, pa.table({"key": [b"z"], "value": [b"z"], "ts": [12]}))
        assert st.apply_retention(10**12 + 2_000) == 1001
        gone = broker.fetch_partition(info, 0, 600, 25_000)
        assert (gone.error, gone.log_start) == (E.OFFSET_OUT_OF_RANGE, 1001)
    finally:
        broker.close()


def test_big_and_small_stored_batches_are_fetched_byte_for_byte(tmp_path: Path) -> None:
    """Batches of BLOB_READ_MIN bytes and more are read through SQLite's blob I/O (and the
    broker's files through a memory mapping): windows of mixed sizes are the stored bytes, cut
    at whole batches, and a batch appended after the mapping was made is read whole."""
    from changefeed.topics.batch import encode_batch as encode, patch_batch
    from changefeed.topics.store import BLOB_READ_MIN

    st = TopicStore(tmp_path)
    info = st.ensure_topic("t", 1, 0)
    stored: list[bytes] = []
    base = 0
    for i, (n, size) in enumerate([(3, 50), (200, 400), (1, BLOB_READ_MIN), (5, 10), (300, 700), (2, 9)]):
        raw = encode(
            0, range(n), [b"k%d" % j for j in range(n)], [bytes([i]) * size] * n, [1_700_000_000_000] * n
        )
        st.append_batch(info, 0, "w", i + 1, raw)
        stored.append(patch_batch(raw, base))
        base += n
    assert [len(s) >= BLOB_READ_MIN for s in stored] == [False, True, True, False, True, False]
    broker = Broker(tmp_path)
    try:
        whole = broker.fetch_partition(info, 0, 0, 10**7)
        assert whole.data == b"".join(stored) and whole.high_watermark == base and whole.more_at is None
        # from inside the second (big) batch: it whole, then as many whole batches as fit
        cut = broker.fetch_partition(info, 0, 10, len(stored[1]) + len(stored[2]) + len(stored[3]) - 1)
        assert cut.data == stored[1] + stored[2] and cut.more_at == 3 + 200 + 1
        more = broker.fetch_partition(info, 0, cut.more_at, 10**7)
        assert more.data == b"".join(stored[3:])
        # a big batch appended between fetches (the file grew past what was mapped): read whole
        raw = encode(0, range(100), [None] * 100, [b"z" * 1000] * 100, [1_700_000_000_001] * 100)
        TopicStore(tmp_path).append_batch(info, 0, "w2", 1, raw)
        tail = broker.fetch_partition(info, 0, base, 10**7)
        assert tail.data == patch_batch(raw, base) and tail.high_watermark == base + 100
        assert [r.value for r in st.read("t", 0, base + 99, 5)] == [b"z" * 1000]
    finally:
        broker.close()
