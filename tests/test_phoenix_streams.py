"""Apache Phoenix 5.3's partitioned CDC (issue 20): ``PARTITION_ID()``, ``SYSTEM.CDC_STREAM_STATUS``
and ``SYSTEM.CDC_STREAM``, after Phoenix's CDCStreamIT and CDCQueryIT scenarios that apply here
(a table's regions are its salt buckets or partitions, fixed: no splits or merges), and a
randomized workload read partition by partition, window by window, that must give every change
exactly once and each key's changes in order."""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import changefeed
from changefeed.connection import Connection
from changefeed.engine import phoenix
from changefeed.engine.gc import collect_garbage
from changefeed.exceptions import CdcAlreadyEnabled
from tests.phoenix_clock import MS, START_NS, Clock

STREAM = "phoenix/cdc/stream/{t}/{c}/1716890130123/2024-05-28T09:55:30.123"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def conn(tmp_path: Path, clock: Clock) -> Iterator[Connection]:
    c = changefeed.connect(tmp_path / "db", clock=clock)
    yield c
    c.close()


def _stream_name(c: Connection, table: str) -> str:
    rows = c.execute(
        "SELECT STREAM_NAME FROM SYSTEM.CDC_STREAM_STATUS WHERE TABLE_NAME = ? AND STREAM_STATUS = 'ENABLED'",
        (table,),
    ).rows
    assert len(rows) == 1, rows
    return str(rows[0][0])


def _partitions(c: Connection, table: str, stream: str) -> list[tuple[Any, ...]]:
    return c.execute(
        "SELECT * FROM SYSTEM.CDC_STREAM WHERE TABLE_NAME = ? AND STREAM_NAME = ?", (table, stream)
    ).rows


# ------------------------------------------------------------------------- CDCStreamIT scenarios


def test_stream_partition_metadata_bootstrap(conn: Connection) -> None:
    """testStreamPartitionMetadataBootstrap: a stream per CDC, its partitions the table's regions.
    Phoenix fills them in a background task (ENABLING until it runs); here they are known when
    CREATE CDC commits, so the stream is ENABLED at once."""
    conn.execute("CREATE TABLE T (k INTEGER PRIMARY KEY, v1 INTEGER, v2 DATE) COLUMN_ENCODED_BYTES=0")
    conn.execute("CREATE CDC C ON T")
    stream = _stream_name(conn, "T")
    assert stream == STREAM.format(t="T", c="C")
    assert conn.execute("SELECT * FROM SYSTEM.CDC_STREAM_STATUS").rows == [("T", stream, "ENABLED", None)]
    parts = _partitions(conn, "T", stream)
    assert len(parts) == 1  # an unsalted table is one region
    table, name, pid, parent, start, end, skey, ekey, pstart = parts[0]
    assert (table, name, parent, end, skey, ekey, pstart) == ("T", stream, None, None, None, None, None)
    assert re.fullmatch(r"[0-9a-f]{32}", pid) and start == START_NS // MS

    # A salted table: one region per salt bucket, split at the salt byte, as Phoenix pre-splits it.
    conn.execute("CREATE TABLE S (k VARCHAR PRIMARY KEY, v INTEGER) SALT_BUCKETS = 4")
    conn.execute("CREATE CDC SC ON S")
    parts = _partitions(conn, "S", _stream_name(conn, "S"))
    assert len(parts) == 4 and len({p[2] for p in parts}) == 4
    assert sorted(((p[6], p[7]) for p in parts), key=repr) == sorted(
        [(None, b"\x01"), (b"\x01", b"\x02"), (b"\x02", b"\x03"), (b"\x03", None)], key=repr
    )
    # SELECT * lists the released columns in their order
    assert conn.execute("SELECT * FROM SYSTEM.CDC_STREAM").columns == [
        "TABLE_NAME",
        "STREAM_NAME",
        "PARTITION_ID",
        "PARENT_PARTITION_ID",
        "PARTITION_START_TIME",
        "PARTITION_END_TIME",
        "PARTITION_START_KEY",
        "PARTITION_END_KEY",
        "PARENT_PARTITION_START_TIME",
    ]


def test_only_one_stream_allowed(conn: Connection, clock: Clock) -> None:
    """testOnlyOneStreamAllowed: a second CDC fails with 10963 naming the live stream; DROP CDC
    disables the stream; a new CDC then makes a new stream."""
    conn.execute("CREATE TABLE T (k INTEGER PRIMARY KEY, v1 INTEGER, v2 DATE) COLUMN_ENCODED_BYTES=0")
    conn.execute("CREATE CDC C ON T")
    stream = _stream_name(conn, "T")
    with pytest.raises(CdcAlreadyEnabled) as info:
        conn.execute("CREATE CDC C2 ON T")
    assert info.value.code == "44A45" and str(info.value).endswith(f"tableName={stream}")
    conn.execute("DROP CDC C ON T")
    assert conn.execute(
        "SELECT STREAM_STATUS FROM SYSTEM.CDC_STREAM_STATUS WHERE STREAM_NAME = ?", (stream,)
    ).rows == [("DISABLED",)]
    clock.now += 1000 * MS
    conn.execute("CREATE CDC C3 ON T")
    assert _stream_name(conn, "T") == "phoenix/cdc/stream/T/C3/1716890131123/2024-05-28T09:55:31.123"
    # the disabled stream and its partitions stay until the table goes
    assert len(conn.execute("SELECT * FROM SYSTEM.CDC_STREAM WHERE TABLE_NAME = 'T'").rows) == 2


def test_stream_metadata_when_table_is_dropped(conn: Connection) -> None:
    """testStreamMetadataWhenTableIsDropped: DROP TABLE clears the stream metadata; the same
    table and CDC can be made again."""
    create = "CREATE TABLE T (k INTEGER PRIMARY KEY, v1 INTEGER, v2 DATE) COLUMN_ENCODED_BYTES=0"
    conn.execute(create)
    conn.execute("CREATE CDC C ON T")
    assert conn.execute("SELECT * FROM SYSTEM.CDC_STREAM WHERE TABLE_NAME='T'").rows
    conn.execute("DROP TABLE T")
    assert conn.execute("SELECT * FROM SYSTEM.CDC_STREAM WHERE TABLE_NAME='T'").rows == []
    assert conn.execute("SELECT * FROM SYSTEM.CDC_STREAM_STATUS WHERE TABLE_NAME='T'").rows == []
    conn.execute(create)
    conn.execute("CREATE CDC C ON T")
    assert conn.execute("SELECT * FROM SYSTEM.CDC_STREAM WHERE TABLE_NAME='T'").rows


@pytest.mark.parametrize("salt", [None, 3])
def test_get_records(conn: Connection, clock: Clock, salt: int | None) -> None:
    """testGetRecords: the stream name from SYSTEM.CDC_STREAM_STATUS, partitions from
    SYSTEM.CDC_STREAM, then per partition ``PARTITION_ID() = ? AND PHOENIX_ROW_TIMESTAMP() >= ?``."""
    props = f" SALT_BUCKETS = {salt}" if salt else ""
    conn.execute(f"CREATE TABLE T (k VARCHAR PRIMARY KEY, v1 INTEGER, v2 VARCHAR){props}")
    conn.execute("CREATE CDC C ON T")
    for k, v1, v2 in [("a", 1, "foo"), ("b", 2, "bar"), ("e", 3, "alice"), ("j", 4, "bob"), ("m", 5, "cat")]:
        clock.now += MS
        conn.execute("UPSERT INTO T VALUES (?, ?, ?)", (k, v1, v2))
    stream = conn.execute("SELECT STREAM_NAME FROM SYSTEM.CDC_STREAM_STATUS WHERE TABLE_NAME='T'").rows[0][0]
    parts = conn.execute(
        "SELECT PARTITION_ID, PARTITION_START_TIME FROM SYSTEM.CDC_STREAM WHERE TABLE_NAME='T' AND STREAM_NAME=?",
        (stream,),
    ).rows
    assert len(parts) == (salt or 1)
    cdc_name = stream.split("/")[4]
    sql = (
        "SELECT /*+ CDC_INCLUDE(PRE, POST) */ *  FROM %s WHERE PARTITION_ID() = ?"
        "  AND PHOENIX_ROW_TIMESTAMP() >= CAST(CAST(? AS BIGINT) AS TIMESTAMP) LIMIT ? "
    )
    seen = []
    for pid, start in parts:
        res = conn.execute(sql % cdc_name, (pid, start, 5))
        # (without a Phoenix property the table keeps its names as written: see docs/phoenix.md)
        assert [n.upper() for n in res.columns] == ["PHOENIX_ROW_TIMESTAMP()", "K", "CDC JSON"]
        for _, k, text in res.rows:
            event = orjson.loads(text)
            assert event["pre_image"] == {} and event["event_type"] == "upsert"
            seen.append(k)
    assert sorted(seen) == ["a", "b", "e", "j", "m"]


# ------------------------------------------------------------------------- CDCQueryIT partition ids


def test_partition_ids_in_queries(conn: Connection, clock: Clock) -> None:
    """checkIndexPartitionIdCount: the partitions are the non-empty salt buckets; ORDER BY,
    DISTINCT, IN lists and GROUP BY on PARTITION_ID()."""
    conn.execute(
        "CREATE TABLE T (k INTEGER NOT NULL, v1 INTEGER, CONSTRAINT PK PRIMARY KEY (k)) SALT_BUCKETS = 4"
    )
    conn.execute("CREATE CDC C ON T INCLUDE (PRE, POST)")
    for i in range(40):
        clock.now += MS
        conn.execute("UPSERT INTO T (k, v1) VALUES (?, ?)", (i % 17, i))
    ids = [r[0] for r in conn.execute("SELECT PARTITION_ID() FROM C ORDER BY PARTITION_ID()").rows]
    assert len(ids) == 40 and ids == sorted(ids)
    distinct = [r[0] for r in conn.execute("SELECT DISTINCT PARTITION_ID() FROM C").rows]
    assert distinct == sorted(set(ids)) and len(distinct) == 4
    counts = {pid: ids.count(pid) for pid in distinct}
    in_list = ",".join(f"'{p}'" for p in distinct)
    grouped = conn.execute(
        f"SELECT PARTITION_ID(), Count(*) from C WHERE PARTITION_ID() IN ({in_list})"
        " AND PHOENIX_ROW_TIMESTAMP() >= ? AND PHOENIX_ROW_TIMESTAMP() < ? Group By PARTITION_ID()",
        (phoenix_dt(1000), phoenix_dt(clock.now // MS + 1)),
    ).rows
    assert dict(grouped) == counts
    # a partition's rows are its keys' changes, time-ordered; every key lives in one partition
    owner: dict[int, str] = {}
    for pid in distinct:
        rows = conn.execute("SELECT PHOENIX_ROW_TIMESTAMP(), K FROM C WHERE PARTITION_ID() = ?", (pid,)).rows
        assert [r[0] for r in rows] == sorted(r[0] for r in rows)
        for _, k in rows:
            assert owner.setdefault(k, pid) == pid
    assert len(owner) == 17
    # an unknown partition id is no partition: no rows, no error
    assert (
        conn.execute("SELECT * FROM C WHERE PARTITION_ID() = 'ffffffffffffffffffffffffffffffff'").rows == []
    )
    # without PARTITION_ID() the query keeps its global change order (the design's)
    times = [r[0] for r in conn.execute("SELECT PHOENIX_ROW_TIMESTAMP() FROM C").rows]
    assert times == sorted(times)


def phoenix_dt(ms: int) -> Any:
    import datetime as dt

    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)


def test_ttl_delete_lands_in_its_partition(conn: Connection, clock: Clock) -> None:
    """The released ``ttl_delete`` event (PHOENIX-7653): at compaction (GC here), in the expired
    row's partition, with only the pre-image under PRE."""
    conn.execute("CREATE TABLE E (k INTEGER PRIMARY KEY, v1 INTEGER) TTL=100, SALT_BUCKETS=3")
    conn.execute("CREATE CDC EC ON E INCLUDE (PRE, POST)")
    conn.execute("UPSERT INTO E (k, v1) VALUES (1, 10), (2, 20), (3, 30), (4, 40)")
    clock.now += 101_000 * MS
    collect_garbage(conn.db, now_ns=clock.now, min_age=0)
    per_key: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for pid, k, text in conn.execute('SELECT PARTITION_ID(), K, "CDC JSON" FROM EC').rows:
        per_key[k].append((pid, orjson.loads(text)["event_type"]))
    for k, events in per_key.items():
        assert [e for _, e in events] == ["upsert", "ttl_delete"], k
        assert events[0][0] == events[1][0]
    ttl = conn.execute(
        'SELECT "CDC JSON" FROM EC WHERE PARTITION_ID() = ? AND K = 2', (per_key[2][0][0],)
    ).rows[-1][0]
    assert orjson.loads(ttl) == {"event_type": "ttl_delete", "pre_image": {"V1": 20}}


# ------------------------------------------------------------------------- randomized: each partition in order


@pytest.mark.parametrize(("table_salt", "cdc_salt"), [(None, None), (4, None), (3, 2)])
def test_partition_by_partition_consumer_gets_every_change_once(
    tmp_path: Path, clock: Clock, table_salt: int | None, cdc_salt: int | None
) -> None:
    """A consumer that reads each partition in order, in successive time windows (the loop of
    Phoenix's stream readers), gets every change exactly once, each key's in commit order."""
    rng = random.Random(20 + (table_salt or 0) * 10 + (cdc_salt or 0))
    c = changefeed.connect(tmp_path / "db", clock=clock)
    props = f" SALT_BUCKETS = {table_salt}" if table_salt else " COLUMN_ENCODED_BYTES = 0"
    c.execute(f"CREATE TABLE T (k INTEGER NOT NULL, v INTEGER, CONSTRAINT PK PRIMARY KEY (k)){props}")
    c.execute("CREATE CDC C ON T INCLUDE (PRE, POST)" + (f" SALT_BUCKETS = {cdc_salt}" if cdc_salt else ""))
    expected: list[tuple[int, int, str]] = []  # (ms, k, event) in commit order
    live: set[int] = set()
    for _ in range(300):
        clock.now += rng.choice([0, 1, 1, 2, 5]) * MS + 1000
        with c.transaction():
            for k in rng.sample(range(30), rng.randint(1, 4)):
                if k in live and rng.random() < 0.3:
                    c.execute("DELETE FROM T WHERE k = ?", (k,))
                    live.discard(k)
                    expected.append((clock.now // MS, k, "delete"))
                else:
                    c.execute("UPSERT INTO T (k, v) VALUES (?, ?)", (k, rng.randint(0, 99)))
                    live.add(k)
                    expected.append((clock.now // MS, k, "upsert"))
    end_ms = clock.now // MS + 1
    stream = _stream_name(c, "T")
    parts = _partitions(c, "T", stream)
    assert len(parts) == (table_salt or 1)
    got: list[tuple[int, int, str, str]] = []
    sql = (
        'SELECT PHOENIX_ROW_TIMESTAMP(), K, "CDC JSON" FROM C WHERE PARTITION_ID() = ?'
        " AND PHOENIX_ROW_TIMESTAMP() >= ? AND PHOENIX_ROW_TIMESTAMP() < ?"
    )
    for part in parts:
        pid, start = part[2], part[4]
        lo = start
        while lo < end_ms:
            hi = lo + rng.randint(1, 40)
            for ts, k, text in c.execute(sql, (pid, phoenix_dt(lo), phoenix_dt(hi))).rows:
                ms = int(ts.timestamp() * 1000 + 0.5)
                got.append((ms, k, orjson.loads(text)["event_type"], pid))
            lo = hi
    assert sorted((ms, k, e) for ms, k, e, _ in got) == sorted(expected)  # every change once
    by_key: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    for ms, k, e, pid in got:
        by_key[k].append((ms, e, pid))
    for k, events in by_key.items():
        assert len({pid for _, _, pid in events}) == 1, k  # one partition per key
        assert [ms for ms, _, _ in events] == sorted(ms for ms, _, _ in events), k  # read in time order
        assert [e for _, e, _ in events] == [e for _, kk, e in expected if kk == k], k
    c.close()


def test_partition_read_uses_its_buckets_only(conn: Connection) -> None:
    """A partition's read touches only its own index buckets (region * salt .. + salt)."""
    conn.execute(
        "CREATE TABLE T (k INTEGER NOT NULL, v INTEGER, CONSTRAINT PK PRIMARY KEY (k)) SALT_BUCKETS = 3"
    )
    conn.execute("CREATE CDC C ON T SALT_BUCKETS = 2")
    conn.execute("UPSERT INTO T (k, v) VALUES (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6)")
    schema = conn.db.find_table("T")
    assert schema is not None
    cdc = phoenix.cdc_of(schema)
    assert cdc is not None and cdc.regions == 3 and cdc.buckets == 6
    rows = conn.db.conn.execute(f"SELECT b, c0 FROM {phoenix.index_table(schema)}").fetchall()
    for b, k in rows:
        assert b // cdc.salt == phoenix.region_of(3, k)
