"""Apache Phoenix CDC through the Python API: errors with Phoenix's codes (nothing changed),
max lookback and GC, and a randomized workload checked against the change journal."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import changefeed
from changefeed.connection import Connection
from changefeed.engine import phoenix
from changefeed.engine.gc import collect_garbage
from changefeed.exceptions import (
    CdcAlreadyEnabled,
    ChangefeedError,
    PhoenixIllegalData,
    PhoenixSyntaxError,
    PhoenixTableAlreadyExists,
    PhoenixTableUndefined,
    UnknownChangeScope,
)
from tests.phoenix_clock import MS, Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def conn(tmp_path: Path, clock: Clock) -> Iterator[Connection]:
    c = changefeed.connect(tmp_path / "db", clock=clock)
    c.execute("CREATE TABLE T (k INTEGER PRIMARY KEY, v1 INTEGER, v2 VARCHAR) COLUMN_ENCODED_BYTES=0")
    c.execute("CREATE CDC C ON T INCLUDE (PRE, POST)")
    yield c
    c.close()


def _state(c: Connection) -> Any:
    """What a failed statement must leave unchanged: the catalog and every table's rows."""
    cat = c.db.conn.execute("SELECT id, name, spec FROM _catalog ORDER BY id").fetchall()
    objects = c.db.conn.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall()
    return cat, objects, c.execute("SELECT * FROM T").rows, c.execute("SELECT * FROM C").rows


@pytest.mark.parametrize(
    ("sql", "error", "code", "tail"),
    [
        ("CREATE CDC X ON MISSING", PhoenixTableUndefined, "42M03", "tableName=MISSING"),
        ("CREATE CDC X ON C", PhoenixTableUndefined, "42M03", "(a CDC object, not a table)"),
        ("CREATE CDC C2 ON T", CdcAlreadyEnabled, "44A45", "tableName=phoenix/cdc/stream/T/C/1716890130123/2024-05-28T09:55:30.123"),
        ("CREATE CDC IF NOT EXISTS C ON T", CdcAlreadyEnabled, "44A45", "tableName=phoenix/cdc/stream/T/C/1716890130123/2024-05-28T09:55:30.123"),
        ("CREATE CDC C ON U", PhoenixTableAlreadyExists, "42M04", "tableName=C"),
        ("CREATE CDC X ON U INCLUDE (abc)", PhoenixSyntaxError, "42P00", "ABC)"),
        ("SELECT /*+ CDC_INCLUDE(DUMMY) */ * FROM C", UnknownChangeScope, "44A40", ": DUMMY"),
        ("SELECT /*+ CDC_INCLUDE(PRE POST) */ * FROM C", UnknownChangeScope, "44A40", ": PRE POST"),
        ("SELECT * FROM C WHERE PHOENIX_ROW_TIMESTAMP() >= TO_DATE('yesterday')", PhoenixIllegalData, "22000", '"yesterday"'),
        ("DROP CDC NOPE ON T", PhoenixTableUndefined, "42M03", "NOPE"),
        ("DROP CDC C ON MISSING", PhoenixTableUndefined, "42M03", "C"),
    ],
)  # fmt: skip
def test_bad_input_gets_phoenix_errors_and_changes_nothing(
    conn: Connection, sql: str, error: type[ChangefeedError], code: str, tail: str
) -> None:
    conn.execute("CREATE TABLE U (k INTEGER PRIMARY KEY, v INTEGER) SALT_BUCKETS=2")
    conn.execute("UPSERT INTO T VALUES (1, 1, 'a')")
    before = _state(conn)
    with pytest.raises(error) as info:
        conn.execute(sql)
    assert info.value.code == code
    assert str(info.value).startswith(f"ERROR {error.vendor_code} ({code}): ")  # type: ignore[attr-defined]
    assert str(info.value).endswith(tail)
    assert _state(conn) == before


def test_if_exists_forms_are_silent(conn: Connection) -> None:
    conn.execute("CREATE TABLE U (k INTEGER PRIMARY KEY, v INTEGER) IMMUTABLE_ROWS=true")
    conn.execute("CREATE CDC IF NOT EXISTS C ON U")  # the name is taken: nothing happens
    conn.execute("DROP CDC IF EXISTS NOPE ON T")
    conn.execute("DROP CDC IF EXISTS C ON MISSING")
    assert phoenix.cdc_of(conn.db.find_table("U")) is None  # type: ignore[arg-type]


def test_reversed_range_is_empty_as_in_phoenix(conn: Connection) -> None:
    conn.execute("UPSERT INTO T VALUES (1, 1, 'a')")
    q = "SELECT * FROM C WHERE PHOENIX_ROW_TIMESTAMP() >= TO_DATE('2024-05-29') AND PHOENIX_ROW_TIMESTAMP() < TO_DATE('2024-05-28')"
    assert conn.execute(q).rows == []


def test_drop_table_drops_cdc_and_index(conn: Connection) -> None:
    conn.execute("DROP TABLE T")
    names = {n for (n,) in conn.db.conn.execute("SELECT name FROM sqlite_master")}
    assert not any(n.startswith("p") and n[1:].isdigit() for n in names)
    with pytest.raises(ChangefeedError):
        conn.execute("SELECT * FROM C")


def test_identifier_case_rules(tmp_path: Path) -> None:
    c = changefeed.connect(tmp_path / "db")
    c.execute('CREATE TABLE p (k INTEGER PRIMARY KEY, v1 INTEGER, "lower" INTEGER) SALT_BUCKETS=0')
    c.execute("CREATE TABLE y (k INT PRIMARY KEY, v1 INT)")  # CockroachDB/YDB: names as written
    c.execute("CREATE CDC cp ON p INCLUDE (CHANGE)")
    c.execute("CREATE CDC cy ON y INCLUDE (CHANGE)")
    c.execute('UPSERT INTO p (k, v1, "lower") VALUES (1, 2, 3)')
    c.execute("UPSERT INTO y (k, v1) VALUES (1, 2)")
    assert c.execute("SELECT * FROM p").columns == ["K", "V1", "lower"]
    assert c.execute('SELECT "CDC JSON" FROM CP').rows == [
        ('{"change_image":{"lower":3,"V1":2},"event_type":"upsert"}',)
    ]
    assert c.execute("SELECT * FROM cy").columns == ["PHOENIX_ROW_TIMESTAMP()", "k", "CDC JSON"]
    assert c.execute('SELECT "CDC JSON" FROM cy').rows == [
        ('{"change_image":{"v1":2},"event_type":"upsert"}',)
    ]
    c.close()


# ---------------------------------------------------------------------------------- max lookback
def test_max_lookback_properties_and_gc(conn: Connection, clock: Clock) -> None:
    t = conn.db.find_table("T")
    assert t is not None and phoenix.max_lookback_ms(conn.db.conn, t) == phoenix.DEFAULT_MAX_LOOKBACK_S * 1000
    conn.execute('ALTER TABLE T SET "phoenix.max.lookback.age.seconds" = 50')
    conn.db.refresh_catalog()
    t = conn.db.find_table("T")
    assert t is not None and phoenix.max_lookback_ms(conn.db.conn, t) == 50_000
    conn.execute("ALTER TABLE T SET MAX_LOOKBACK_AGE = 10000")  # milliseconds
    # A YDB changefeed on the same table protects the change rows it has not delivered.
    conn.execute("ALTER TABLE T ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES')")
    for i in range(5):
        clock.now += 4000 * MS
        conn.execute(f"UPSERT INTO T VALUES ({i}, {i}, 'x')")
    clock.now += 4000 * MS
    conn.execute("UPSERT INTO T VALUES (9, 9, 'y')")
    assert len(conn.execute("SELECT * FROM C").rows) == 6
    collect_garbage(conn.db, now_ns=clock.now, min_age=0)
    rows = conn.execute("SELECT K FROM C").rows
    # The window is the last 10 s: changes 0, 4 and 8 s old stay; older ones are gone.
    assert rows == [(3,), (4,), (9,)]
    x = conn.db.conn.execute(f"SELECT COUNT(*) FROM x{t.id}").fetchone()[0]
    assert x == 6  # the feed still protects every change row
    conn.execute("ALTER TABLE T DROP CHANGEFEED f")
    collect_garbage(conn.db, now_ns=clock.now, min_age=0)
    assert conn.db.conn.execute(f"SELECT COUNT(*) FROM x{t.id}").fetchone()[0] == 3
    assert conn.execute("SELECT K FROM C").rows == [(3,), (4,), (9,)]


def test_database_default_max_lookback(conn: Connection, clock: Clock) -> None:
    with conn.db.lock:
        phoenix.set_default_max_lookback(conn.db.conn, 1)
    conn.execute("UPSERT INTO T VALUES (1, 1, 'a')")
    clock.now += 1500 * MS
    conn.execute("UPSERT INTO T VALUES (2, 2, 'b')")
    collect_garbage(conn.db, now_ns=clock.now, min_age=0)
    assert conn.execute("SELECT K FROM C").rows == [(2,)]


# ---------------------------------------------------------------------------------- randomized
def _norm(image: dict[str, Any] | None) -> dict[str, Any]:
    """Phoenix's own tests fill in nulls: an absent key and a null value are the same."""
    return {k: v for k, v in (image or {}).items() if v is not None}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_randomized_cdc_equals_journal_and_replays_the_table(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    clock = Clock()
    c = changefeed.connect(tmp_path / "db", clock=clock)
    c.execute("CREATE TABLE W (k INTEGER NOT NULL, v1 INTEGER, B.v2 VARCHAR, CONSTRAINT pk PRIMARY KEY (k))")
    c.execute(f"CREATE CDC WC ON W INCLUDE (PRE, POST, CHANGE) SALT_BUCKETS = {seed}")
    snapshots: list[tuple[int, dict[int, dict[str, Any]]]] = []  # (commit ms, table after it)
    model: dict[int, dict[str, Any]] = {}
    for _ in range(150):
        clock.now += rng.choice([0, 0, 1, 2, 7]) * MS
        with c.transaction():
            for _ in range(rng.randint(1, 4)):
                k = rng.randint(0, 12)
                r = rng.random()
                if r < 0.2:
                    c.execute("DELETE FROM W WHERE k = ?", (k,))
                    model.pop(k, None)
                elif r < 0.6:
                    v1 = rng.choice([None, rng.randint(0, 99)])
                    c.execute("UPSERT INTO W (k, v1) VALUES (?, ?)", (k, v1))
                    model.setdefault(k, {})["V1"] = v1
                else:
                    v1, v2 = rng.randint(0, 99), rng.choice([None, "x", "y"])
                    c.execute("UPSERT INTO W (k, v1, B.v2) VALUES (?, ?, ?)", (k, v1, v2))
                    model.setdefault(k, {}).update({"V1": v1, "B.V2": v2})
        snapshots.append((c.db.last_ts().millis, {k: dict(v) for k, v in model.items()}))
    t = c.db.find_table("W")
    assert t is not None
    events = c.execute('SELECT PHOENIX_ROW_TIMESTAMP(), K, "CDC JSON" FROM WC').rows
    ms_of = [int(e[0].timestamp() * 1000) for e in events]
    # Change order: time, then key.
    assert [(m, e[1]) for m, e in zip(ms_of, events, strict=True)] == sorted(
        (m, e[1]) for m, e in zip(ms_of, events, strict=True)
    )
    # The journal's changes in any range equal the CDC query's rows in that range.
    journal = c.db.conn.execute(
        f"SELECT ts / 1000000, c0, op, ox FROM x{t.id} WHERE (op = 10 AND (u1 = 1 OR u2 = 1)) OR (op = 11 AND ox = 1) ORDER BY ts / 1000000, c0, seq"
    ).fetchall()
    assert [(m, e[1]) for m, e in zip(ms_of, events, strict=True)] == [(r[0], r[1]) for r in journal]
    lo_all, hi_all = ms_of[0], ms_of[-1] + 1
    for _ in range(20):
        lo = rng.randint(lo_all, hi_all)
        hi = rng.randint(lo, hi_all)
        got = c.execute(
            "SELECT K FROM WC WHERE PHOENIX_ROW_TIMESTAMP() >= ? AND PHOENIX_ROW_TIMESTAMP() < ?",
            (phoenix_json_time(lo), phoenix_json_time(hi)),
        ).rows
        assert [g[0] for g in got] == [r[1] for r in journal if lo <= r[0] < hi]
    # Replaying post images and deletes reproduces the table at each commit time; each pre
    # image equals the key's previous post image.
    state: dict[int, dict[str, Any]] = {}
    last_post: dict[int, dict[str, Any]] = {}
    i = 0
    for j, (ms, snap) in enumerate(snapshots):
        while i < len(events) and ms_of[i] <= ms:
            ev = orjson.loads(events[i][2])
            k = events[i][1]
            assert _norm(ev["pre_image"]) == _norm(last_post.get(k))
            if ev["event_type"] == "upsert":
                assert _norm(ev["change_image"]).items() <= _norm(ev["post_image"]).items()
                state[k] = last_post[k] = ev["post_image"]
            else:
                assert ev["event_type"] == "delete"
                state.pop(k, None)
                last_post.pop(k, None)
            i += 1
        if j + 1 < len(snapshots) and snapshots[j + 1][0] == ms:
            continue  # a later commit in the same millisecond: compare after it
        assert {k: _norm(v) for k, v in state.items()} == {k: _norm(v) for k, v in snap.items()}
    c.close()


@pytest.mark.parametrize("immutable", [False, True])
def test_batch_encoder_equals_the_scalar_encoder(tmp_path: Path, immutable: bool) -> None:
    """Every shape of event (inserts, updates writing some columns, nulls written, deletes, a
    delete and re-write in one transaction) and every scope set: the batch text is the scalar text."""
    import itertools

    from changefeed.engine import phoenix
    from changefeed.formats.phoenix_batch import BatchEncoder
    from changefeed.formats.phoenix_json import SCOPES, EventEncoder

    rng = random.Random(7)
    clock = Clock()
    c = changefeed.connect(tmp_path / "db", clock=clock)
    props = " IMMUTABLE_ROWS=true" if immutable else ""
    c.execute(
        "CREATE TABLE Z (k INTEGER NOT NULL, v1 INTEGER, B.v2 VARCHAR, v3 DOUBLE, v4 CHAR(3),"
        f" v5 DECIMAL(6,2), CONSTRAINT pk PRIMARY KEY (k)){props}"
    )
    c.execute("CREATE CDC ZC ON Z INCLUDE (PRE, POST, CHANGE)")
    cols = ["v1", "B.v2", "v3", "v4", "v5"]
    values: list[list[Any]] = [
        [None, 0, 7, -3],
        [None, "", "x", 'q"\\\n%s'],
        [None, 0.5, 1e21, -2.25],
        [None, "ab", "z"],
        [None, "1.50", "-3.25"],
    ]
    for _ in range(200):
        clock.now += rng.choice([0, 1, 3]) * MS
        with c.transaction():
            for _ in range(rng.randint(1, 3)):
                k = rng.randint(0, 9)
                r = rng.random()
                if r < 0.2:
                    c.execute("DELETE FROM Z WHERE k = ?", (k,))
                else:
                    chosen = [i for i in range(len(cols)) if rng.random() < 0.5] or [0]
                    names = ", ".join(["k", *(cols[i] for i in chosen)])
                    marks = ", ".join("?" * (len(chosen) + 1))
                    row = [k, *(rng.choice(values[i]) for i in chosen)]
                    c.execute(f"UPSERT INTO Z ({names}) VALUES ({marks})", row)
    t = c.db.find_table("Z")
    assert t is not None
    raw = list(phoenix.scan_raw(c.db.conn, t, None, None))
    nk, nv = len(t.key), len(t.stored_values)
    assert len(raw) > 150
    for n in range(1, len(SCOPES) + 1):
        for scopes in itertools.combinations(SCOPES, n):
            scalar = EventEncoder(t, frozenset(scopes))
            want = [scalar.encode(phoenix.change_row(r, nk, nv)) for r in raw]
            batch = BatchEncoder(EventEncoder(t, frozenset(scopes)), nk)
            coded = list(phoenix.scan_raw(c.db.conn, t, None, None, coded=True, with_old=batch.wants_old))
            assert batch.encode(coded) == want
            assert [x for i in range(0, len(coded), 17) for x in batch.encode(coded[i : i + 17])] == want
    c.close()


def phoenix_json_time(ms: int) -> Any:
    from changefeed.formats.phoenix_json import row_time

    return row_time(ms)


# ---------------------------------------------------------------------------------- TTL
def test_ttl_expiry_gives_ttl_delete_events(tmp_path: Path, clock: Clock) -> None:
    c = changefeed.connect(tmp_path / "db", clock=clock)
    c.execute("CREATE TABLE E (k INTEGER PRIMARY KEY, v1 INTEGER, v2 DATE) TTL=100")
    c.execute("CREATE CDC EC ON E INCLUDE (PRE, POST)")
    c.execute("UPSERT INTO E (k, v1) VALUES (1, 10), (2, 20), (3, 30)")
    clock.now += 50_000 * MS
    c.execute("UPSERT INTO E (k, v1) VALUES (2, 21)")  # a write renews the row's TTL
    clock.now += 60_000 * MS
    # Expired rows are invisible at once, but give no event until compaction (GC) removes them.
    assert c.execute("SELECT K FROM E").rows == [(2,)]
    assert len(c.execute("SELECT * FROM EC").rows) == 4
    report = collect_garbage(c.db, now_ns=clock.now, min_age=0)
    assert report.ttl_rows == 2
    rows = c.execute('SELECT K, "CDC JSON" FROM EC').rows
    ttl = [(k, orjson.loads(j)) for k, j in rows if "ttl_delete" in j]
    assert ttl == [
        (1, {"event_type": "ttl_delete", "pre_image": {"V1": 10}}),
        (3, {"event_type": "ttl_delete", "pre_image": {"V1": 30}}),
    ]
    assert c.execute('SELECT /*+ CDC_INCLUDE(POST) */ "CDC JSON" FROM EC WHERE K = 3').rows[-1] == (
        '{"event_type":"ttl_delete"}',
    )
    # The pre-image of the ttl_delete equals the row's last post-image.
    post = orjson.loads(c.execute('SELECT "CDC JSON" FROM EC WHERE K = 1').rows[0][0])["post_image"]
    assert post == ttl[0][1]["pre_image"]
    c.close()


def test_edge_cases_from_the_reference(conn: Connection) -> None:
    conn.execute("UPSERT INTO T (k) VALUES (5)")  # only key columns: no event
    conn.execute("DELETE FROM T WHERE k = 6")  # a row that never existed: no event
    conn.execute("UPSERT INTO T VALUES (1, 1, 'a')")
    conn.execute("UPSERT INTO T VALUES (1, 1, 'a')")  # the same values again: an event, pre == post
    with conn.transaction():  # several writes of one row in one commit: one event
        conn.execute("UPSERT INTO T (k, v1) VALUES (2, 1)")
        conn.execute("UPSERT INTO T (k, v2) VALUES (2, 'b')")
    with pytest.raises(ChangefeedError), conn.transaction():  # a failed commit: no event
        conn.execute("UPSERT INTO T VALUES (3, 3, 'c')")
        conn.execute("UPSERT INTO T VALUES (3, 'not a number', 'c')")
    rows = [(k, orjson.loads(j)) for k, j in conn.execute('SELECT K, "CDC JSON" FROM C').rows]
    assert rows == [
        (1, {"post_image": {"V1": 1, "V2": "a"}, "event_type": "upsert", "pre_image": {}}),
        (1, {"post_image": {"V1": 1, "V2": "a"}, "event_type": "upsert", "pre_image": {"V1": 1, "V2": "a"}}),
        (2, {"post_image": {"V1": 1, "V2": "b"}, "event_type": "upsert", "pre_image": {}}),
    ]


def test_privileges(tmp_path: Path) -> None:
    root = changefeed.connect(tmp_path / "db")
    root.execute("CREATE TABLE T (k INTEGER PRIMARY KEY, v INTEGER) COLUMN_ENCODED_BYTES=0")
    root.execute("CREATE USER bob")
    bob = changefeed.connect(tmp_path / "db", user="bob")
    with pytest.raises(ChangefeedError, match="privilege"):
        bob.execute("CREATE CDC C ON T")
    root.execute("CREATE CDC C ON T")
    with pytest.raises(ChangefeedError, match="privilege"):
        bob.execute("SELECT * FROM C")
    root.execute("GRANT SELECT ON T TO bob")
    assert bob.execute("SELECT * FROM C").rows == []
    bob.execute("CREATE TABLE B (k INTEGER PRIMARY KEY, v INTEGER) SALT_BUCKETS=0")  # its creator holds ALL
    bob.execute("CREATE CDC BC ON B")
    bob.close()
    root.close()
