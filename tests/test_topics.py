"""The embedded topic log: store, consumer, retention, the `read` command."""

from __future__ import annotations

import base64
import json
import multiprocessing as mp
import pickle
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from changefeed.cli.read_cmd import read as read_cmd
from changefeed.exceptions import CorruptFile, DatabaseError, TopicError
from changefeed.topics import Consumer, Record, TopicInfo, TopicLog, TopicStore

SEC = 1_000_000_000


class FakeClock:
    def __init__(self, now: int = 1_000 * SEC) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(values: list[bytes], keys: list[bytes | None] | None = None, ts0: int = 0) -> pa.Table:
    return pa.table(
        {
            "key": pa.array(
                keys if keys is not None else [b"k%d" % i for i in range(len(values))], pa.binary()
            ),
            "value": pa.array(values, pa.binary()),
            "ts": pa.array(range(ts0, ts0 + len(values)), pa.int64()),
        }
    )


@pytest.fixture
def store(tmp_path: Path) -> TopicStore:
    (tmp_path / "db").mkdir()
    return TopicStore(tmp_path / "db")


# -- topics ----------------------------------------------------------------------------------


def test_lazy_creation_and_ensure_topic_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "db"
    db.mkdir()
    s = TopicStore(db)
    assert s.topics() == []
    assert not (db / "topics").exists()
    info = s.ensure_topic("orders/updates_feed", 3, 3600 * SEC)
    assert isinstance(info, TopicInfo)
    assert (db / "topics" / "catalog.sqlite").exists()
    assert sorted(p.name for p in (db / "topics" / str(info.id)).glob("*.sqlite")) == [
        "0.sqlite",
        "1.sqlite",
        "2.sqlite",
    ]
    again = s.ensure_topic("orders/updates_feed", 3, 3600 * SEC)
    assert again == info
    assert s.topic("orders/updates_feed") == info
    with pytest.raises(TopicError, match="already exists with 3 partitions"):
        s.ensure_topic("orders/updates_feed", 4, 3600 * SEC)
    assert isinstance(s, TopicLog)


def test_names_never_in_paths(store: TopicStore) -> None:
    names = ["office_dogs", "t.family", "a/b/../../c", "имя с пробелом", "x" * 300]
    for n in names:
        store.ensure_topic(n, 1, 0)
    assert sorted(t.name for t in store.topics()) == sorted(names)
    for p in store.root.rglob("*"):
        assert p.name in {"catalog.sqlite"} or p.name.split(".")[0].isdigit() or p.parent == store.root
    with pytest.raises(TopicError, match="invalid topic name"):
        store.ensure_topic("", 1, 0)
    with pytest.raises(TopicError, match="invalid topic name"):
        store.ensure_topic("bad\nname", 1, 0)
    with pytest.raises(TopicError, match="partitions"):
        store.ensure_topic("p0", 0, 0)


def test_unknown_topic_and_drop(store: TopicStore) -> None:
    with pytest.raises(TopicError, match="topic 'nope' does not exist"):
        store.topic("nope")
    info = store.ensure_topic("t", 2, 0)
    store.append("t", 0, "w", 0, batch([b"a"]))
    store.commit_offsets("g", "t", {0: 1})
    store.drop_topic("t")
    assert not (store.root / str(info.id)).exists()
    with pytest.raises(TopicError, match="does not exist"):
        store.read("t", 0, 0)
    with pytest.raises(TopicError, match="does not exist"):
        store.drop_topic("t")
    store.drop_topic("t", missing_ok=True)
    again = store.ensure_topic("t", 2, 0)
    assert again.id != info.id  # ids are never reused
    assert store.offsets("t") == {0: (0, 0), 1: (0, 0)}
    assert store.committed_offsets("g", "t") == {}


def test_missing_db_dir(tmp_path: Path) -> None:
    s = TopicStore(tmp_path / "nowhere")
    with pytest.raises(DatabaseError, match="does not exist"):
        s.topic("t")


# -- append / read ---------------------------------------------------------------------------


def test_append_read_round_trip(store: TopicStore) -> None:
    clock = FakeClock()
    s = TopicStore(store.db_dir, clock=clock)
    s.ensure_topic("t/f", 2, 0)
    n = s.append("t/f", 1, "w1", 0, batch([b'{"a":1}', b"\xff\x00", b""], keys=[b"k", None, b"\x00"], ts0=7))
    assert n == 3
    recs = s.read("t/f", 1, 0)
    assert recs == [
        Record("t/f", 1, 0, b"k", b'{"a":1}', 7, clock.now),
        Record("t/f", 1, 1, None, b"\xff\x00", 8, clock.now),
        Record("t/f", 1, 2, b"\x00", b"", 9, clock.now),
    ]
    assert s.read("t/f", 1, 1, max_records=1) == recs[1:2]
    assert s.read("t/f", 0, 0) == []
    tbl = s.read_arrow("t/f", 1, 1, 3)
    assert tbl.column("offset").to_pylist() == [1, 2]
    assert tbl.column("key").to_pylist() == [None, b"\x00"]
    assert s.read_arrow("t/f", 1, 0).num_rows == 3
    assert s.read_arrow("t/f", 0, 0).num_rows == 0
    assert s.offsets("t/f") == {0: (0, 0), 1: (0, 3)}


def test_append_accepts_record_batch_and_strings(store: TopicStore) -> None:
    store.ensure_topic("t", 1, 0)
    rb = pa.RecordBatch.from_pydict({"key": ["k"], "value": ["v"], "ts": [1]})
    assert store.append("t", 0, "w", 0, rb) == 1
    assert store.read("t", 0, 0)[0].value == b"v"
    with pytest.raises(TopicError, match="'value' must be binary"):
        store.append("t", 0, "w", 1, pa.table({"key": [b"k"], "value": [1], "ts": [1]}))
    with pytest.raises(TopicError, match="must not be null"):
        store.append(
            "t", 0, "w", 1, pa.table({"key": [b"k"], "value": pa.array([None], pa.binary()), "ts": [1]})
        )


def test_consecutive_offsets_across_appends(store: TopicStore) -> None:
    store.ensure_topic("t", 1, 0)
    for b in range(5):
        assert store.append("t", 0, "w", b, batch([b"x"] * (b + 1))) == b + 1
    offs = [r.offset for r in store.read("t", 0, 0, 100)]
    assert offs == list(range(15))
    assert store.offsets("t") == {0: (0, 15)}
    # Large append spanning several multi-row INSERT statements plus a remainder.
    assert store.append("t", 0, "w", 5, batch([b"y"] * 1234)) == 1234
    assert [r.offset for r in store.read("t", 0, 15, 5000)] == list(range(15, 15 + 1234))


def test_idempotent_replay(store: TopicStore) -> None:
    store.ensure_topic("t", 2, 0)
    assert store.committed_batch("t", 0, "job") is None
    assert store.append("t", 0, "job", 7, batch([b"a", b"b"])) == 2
    assert store.committed_batch("t", 0, "job") == 7
    assert store.append("t", 0, "job", 7, batch([b"a", b"b"])) == 0  # replayed micro-batch
    assert store.append("t", 0, "job", 3, batch([b"old"])) == 0  # older still
    assert store.append("t", 0, "other", 7, batch([b"c"])) == 1  # another writer
    assert store.append("t", 0, "job", 8, batch([])) == 0  # empty batch still records the id
    assert store.committed_batch("t", 0, "job") == 8
    assert store.committed_batch("t", 1, "job") is None
    assert [r.value for r in store.read("t", 0, 0)] == [b"a", b"b", b"c"]


def test_append_is_atomic(store: TopicStore) -> None:
    store.ensure_topic("t", 1, 0)
    bad = pa.table({"key": [b"a", b"b"], "value": [b"1", b"2"], "ts": pa.array([1, None], pa.int64())})
    with pytest.raises(TopicError):
        store.append("t", 0, "w", 0, bad)
    assert store.offsets("t") == {0: (0, 0)}
    assert store.committed_batch("t", 0, "w") is None


def test_bad_partition_and_offset(store: TopicStore) -> None:
    store.ensure_topic("t", 2, 0)
    with pytest.raises(TopicError, match=r"partition 2 out of range for topic 't' \(partitions 0..1\)"):
        store.append("t", 2, "w", 0, batch([b"a"]))
    with pytest.raises(TopicError, match="partition -1 out of range"):
        store.read("t", -1, 0)
    with pytest.raises(TopicError, match="offset must be a non-negative integer"):
        store.read("t", 0, -5)
    with pytest.raises(TopicError, match="partition 9 out of range"):
        store.commit_offsets("g", "t", {9: 0})


def test_corrupt_partition_file(store: TopicStore) -> None:
    info = store.ensure_topic("t", 2, 0)
    path = store.root / str(info.id) / "1.sqlite"
    store.close()  # as a fresh process would: no cached connection
    path.write_bytes(b"this is not a database at all, just garbage bytes" * 100)
    for suffix in ("-wal", "-shm"):
        (path.parent / (path.name + suffix)).unlink(missing_ok=True)
    with pytest.raises(CorruptFile, match=r"1\.sqlite"):
        store.read("t", 1, 0)
    with pytest.raises(CorruptFile, match=r"1\.sqlite"):
        store.append("t", 1, "w", 0, batch([b"a"]))
    assert store.read("t", 0, 0) == []  # other partitions unaffected


def test_corrupt_catalog(tmp_path: Path) -> None:
    db = tmp_path / "db"
    (db / "topics").mkdir(parents=True)
    (db / "topics" / "catalog.sqlite").write_bytes(b"\x00garbage" * 1000)
    with pytest.raises(CorruptFile, match=r"catalog\.sqlite"):
        TopicStore(db).topic("t")


def test_foreign_sqlite_file_is_not_ours(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "db"
    (db / "topics").mkdir(parents=True)
    conn = sqlite3.connect(db / "topics" / "catalog.sqlite")
    conn.execute("CREATE TABLE something_else (x)")
    conn.commit()
    conn.close()
    with pytest.raises(CorruptFile, match="not a changefeed topic file"):
        TopicStore(db).topics()


def test_store_is_picklable(store: TopicStore) -> None:
    store.ensure_topic("t", 1, 0)
    store.append("t", 0, "w", 0, batch([b"a"]))
    clone = pickle.loads(pickle.dumps(store))
    assert clone.read("t", 0, 0) == store.read("t", 0, 0)


def _append_worker(db: str, partition: int, batches: int, size: int) -> None:
    s = TopicStore(db)
    for b in range(batches):
        s.append("t", partition, f"proc{partition}", b, batch([b"p%d-%d" % (partition, b)] * size))


def test_two_processes_append_concurrently(store: TopicStore) -> None:
    store.ensure_topic("t", 2, 0)
    store.append("t", 0, "parent", 0, batch([b"before-fork"]))  # a cached connection exists
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_append_worker, args=(str(store.db_dir), p, 20, 500)) for p in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert store.offsets("t") == {0: (0, 10_001), 1: (0, 10_000)}
    assert [r.offset for r in store.read("t", 1, 0, 20_000)] == list(range(10_000))
    assert store.committed_batch("t", 0, "proc0") == 19
    # The parent's cached connection still works after the children exited.
    assert store.append("t", 0, "parent", 1, batch([b"after"])) == 1
    assert store.offsets("t")[0] == (0, 10_002)


def test_spawned_processes_same_partition(store: TopicStore) -> None:
    """Different writers on one partition from separate processes serialize, offsets stay dense."""
    store.ensure_topic("t", 1, 0)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_append_worker_same, args=(str(store.db_dir), i)) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert [r.offset for r in store.read("t", 0, 0, 10_000)] == list(range(2 * 10 * 100))


def _append_worker_same(db: str, i: int) -> None:
    s = TopicStore(db)
    for b in range(10):
        s.append("t", 0, f"w{i}", b, batch([b"x"] * 100))


# -- retention -------------------------------------------------------------------------------


def test_retention_skips_offsets_and_consumer_continues(store: TopicStore) -> None:
    clock = FakeClock()
    s = TopicStore(store.db_dir, clock=clock)
    s.ensure_topic("t", 2, 10 * SEC)
    s.append("t", 0, "w", 0, batch([b"a0", b"a1", b"a2"]))
    c = Consumer(s, "t", from_beginning=True, group="g")
    assert [r.value for r in c.poll(max_records=1)] == [b"a0"]
    c.commit()
    clock.now += 5 * SEC
    s.append("t", 0, "w", 1, batch([b"b3", b"b4"]))
    s.append("t", 1, "w", 0, batch([b"c0"]))
    clock.now += 6 * SEC  # first batch is now 11 s old, second 6 s
    assert s.apply_retention() == 3
    assert s.offsets("t") == {0: (3, 5), 1: (0, 1)}
    got = sorted((r.partition, r.offset, r.value) for r in c.poll())
    assert got == [(0, 3, b"b3"), (0, 4, b"b4"), (1, 0, b"c0")]  # offset skip 0 -> 3
    # Everything expires: offsets still continue, never renumbered.
    assert s.apply_retention(now_ns=clock.now + 100 * SEC) == 3
    assert s.offsets("t") == {0: (5, 5), 1: (1, 1)}
    s.append("t", 0, "w", 2, batch([b"d"]))
    assert [r.offset for r in s.read("t", 0, 0)] == [5]
    # A new group consumer from the beginning starts at the earliest *available* offset.
    assert [r.offset for r in Consumer(s, "t", from_beginning=True).poll()] == [5]


def test_retention_zero_keeps_forever(store: TopicStore) -> None:
    store.ensure_topic("t", 1, 0)
    store.append("t", 0, "w", 0, batch([b"a"]))
    assert store.apply_retention(now_ns=1 << 62) == 0


# -- consumer --------------------------------------------------------------------------------


def test_consumer_positions(store: TopicStore) -> None:
    store.ensure_topic("t", 2, 0)
    store.append("t", 0, "w", 0, batch([b"a", b"b"]))
    store.append("t", 1, "w", 0, batch([b"c"]))
    assert Consumer(store, "t").poll() == []  # starts at the end
    assert len(Consumer(store, "t", from_beginning=True).poll()) == 3
    assert [r.value for r in Consumer(store.db_dir, "t", partitions=[1], from_beginning=True).poll()] == [
        b"c"
    ]
    with pytest.raises(TopicError, match="partition 5 out of range"):
        Consumer(store, "t", partitions=[5])
    with pytest.raises(TopicError, match="does not exist"):
        Consumer(store, "nope")
    with pytest.raises(TopicError, match="needs a consumer group"):
        Consumer(store, "t").commit()
    tail = Consumer(store, "t")
    store.append("t", 1, "w", 1, batch([b"new"]))
    assert [r.value for r in tail.poll()] == [b"new"]


def test_consumer_group_commit_and_resume(store: TopicStore) -> None:
    store.ensure_topic("t", 2, 0)
    store.append("t", 0, "w", 0, batch([b"a%d" % i for i in range(5)]))
    store.append("t", 1, "w", 0, batch([b"b%d" % i for i in range(5)]))
    with Consumer(store, "t", group="g", from_beginning=True) as c:
        first = c.poll(max_records=4)
        assert len(first) == 4
        assert {r.partition for r in first} == {0, 1}  # fair across partitions
        c.commit()
    committed = store.committed_offsets("g", "t")
    assert sum(committed.values()) == 4
    with Consumer(store, "t", group="g") as c:
        rest = c.poll()
        assert len(rest) == 6
        seen = {(r.partition, r.offset) for r in first + rest}
        assert seen == {(p, o) for p in (0, 1) for o in range(5)}
        c.commit()
    assert store.committed_offsets("g", "t") == {0: 5, 1: 5}
    # A group with nothing committed and no from_beginning starts at the end.
    assert Consumer(store, "t", group="other").poll() == []


def test_consumer_poll_timeout_and_follow(store: TopicStore) -> None:
    store.ensure_topic("t", 1, 0)
    c = Consumer(store, "t")
    t0 = time.monotonic()
    assert c.poll(timeout=0.3) == []
    assert time.monotonic() - t0 >= 0.25

    def later() -> None:
        time.sleep(0.2)
        TopicStore(store.db_dir).append("t", 0, "w", 0, batch([b"x", b"y"]))

    threading.Thread(target=later).start()
    got: list[bytes] = []
    for rec in c:
        got.append(rec.value)
        if len(got) == 2:
            c.close()
    assert got == [b"x", b"y"]
    assert c.closed
    with pytest.raises(TopicError, match="closed"):
        c.poll()


# -- read command ----------------------------------------------------------------------------


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    db = tmp_path / "db"
    s = TopicStore(db)
    s.ensure_topic("orders/feed", 2, 0)
    s.append(
        "orders/feed",
        0,
        "w",
        0,
        batch([b'{"update":{"a":1},"key":[1]}', b"\xff\xfe"], keys=[b"[1]", None], ts0=100),
    )
    s.append("orders/feed", 1, "w", 0, batch([b"plain text"], keys=[b"k"], ts0=200))
    return db


def test_read_cmd_text(filled: Path) -> None:
    r = CliRunner().invoke(read_cmd, ["--db", str(filled), "orders/feed", "--from-beginning"])
    assert r.exit_code == 0, r.output
    lines = sorted(r.stdout.splitlines())
    assert lines == [
        '0:0 [1] {"update":{"a":1},"key":[1]}',
        "0:1 null " + base64.b64encode(b"\xff\xfe").decode(),
        "1:0 k plain text",
    ]
    # Without --from-beginning: starts at the end, prints nothing, exits 0.
    r = CliRunner().invoke(read_cmd, ["--db", str(filled), "orders/feed"])
    assert r.exit_code == 0 and r.stdout == ""


def test_read_cmd_json(filled: Path) -> None:
    r = CliRunner().invoke(
        read_cmd, ["--db", str(filled), "orders/feed", "--from-beginning", "--json", "--partition", "0"]
    )
    assert r.exit_code == 0, r.output
    objs = [json.loads(line) for line in r.stdout.splitlines()]
    assert objs == [
        {
            "topic": "orders/feed",
            "partition": 0,
            "offset": 0,
            "key": [1],
            "value": {"update": {"a": 1}, "key": [1]},
            "ts": 100,
        },
        {
            "topic": "orders/feed",
            "partition": 0,
            "offset": 1,
            "key": None,
            "value": base64.b64encode(b"\xff\xfe").decode(),
            "ts": 101,
        },
    ]
    r = CliRunner().invoke(
        read_cmd, ["--db", str(filled), "orders/feed", "--from-beginning", "--json", "--partition", "1"]
    )
    assert json.loads(r.stdout)["value"] == base64.b64encode(b"plain text").decode()


def test_read_cmd_group_and_max(filled: Path) -> None:
    args = ["--db", str(filled), "orders/feed", "--from-beginning", "--group", "g", "--max", "2"]
    r = CliRunner().invoke(read_cmd, args)
    assert r.exit_code == 0, r.output
    assert len(r.stdout.splitlines()) == 2
    r = CliRunner().invoke(read_cmd, args)
    assert len(r.stdout.splitlines()) == 1  # resumed after the committed two
    r = CliRunner().invoke(read_cmd, args)
    assert r.stdout == ""
    assert sum(TopicStore(filled).committed_offsets("g", "orders/feed").values()) == 3


def test_read_cmd_follow(filled: Path) -> None:
    def later() -> None:
        time.sleep(0.5)
        TopicStore(filled).append("orders/feed", 1, "w", 1, batch([b"late"], keys=[b"z"]))

    threading.Thread(target=later).start()
    r = CliRunner().invoke(read_cmd, ["--db", str(filled), "orders/feed", "--follow", "--max", "1"])
    assert r.exit_code == 0, r.output
    assert r.stdout == "1:1 z late\n"


def test_read_cmd_errors(filled: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    r = runner.invoke(read_cmd, ["--db", str(filled), "nope"])
    assert r.exit_code == 1
    assert r.stderr == "ERROR: topic 'nope' does not exist\n"
    r = runner.invoke(read_cmd, ["--db", str(filled), "orders/feed", "--partition", "7"])
    assert r.exit_code == 1
    assert r.stderr.startswith("ERROR: partition 7 out of range")
    r = runner.invoke(read_cmd, ["--db", str(tmp_path / "missing"), "orders/feed"])
    assert r.exit_code == 1
    assert r.stderr.startswith("ERROR: database directory") and "does not exist" in r.stderr
    r = runner.invoke(read_cmd, ["--help"])
    assert r.exit_code == 0 and "--max" in r.stdout and "--follow" in r.stdout
