"""Correctness validators, after CockroachDB's ``cdctest`` (order, before/after, fingerprint).

Engine (journal) checks, independent of any changefeed:

* :func:`check_scylla_replay` — replaying ``<table>_scylla_cdc_log`` with the same CQL statements
  into a fresh table reproduces the table (``SELECT *`` equal);
* :func:`check_scylla_images` — every pre-image (op 0) equals the row before its statement and
  every post-image (op 9) the row after, by simulating the log;
* :func:`check_change_stream` — replaying the change stream ``x<id>`` (upsert the new image,
  delete on erase) reproduces the table; per key, each old image equals the previous new image;
  with a workload :class:`~changefeed.testing.workload.History`, each old image equals the table
  read before the transaction and each new image the table read after it.

Feed checks (:func:`validate_feed`), reading every record of a feed's topic:

* ``order`` — records of one key are all in the partition ``partition_of(key)`` and in commit order;
* ``exactly_once`` — the (key, transaction) pairs delivered equal exactly the change rows committed
  after the feed's creation (plus one snapshot per row for an initial scan): no duplicates, no gaps;
* ``images`` — old/new images (or the UPDATES columns) equal the journal's, and per key each old
  image equals the previous record's new image;
* ``resolved`` — after a resolved record no record of that partition is at or below its timestamp,
  and replaying the feed up to it reproduces the table as of that timestamp (all keys the feed covers);
* ``initial_scan`` — per key at most one snapshot record, preceding all its updates, equal to the
  row at the feed's creation.

CockroachDB changefeed messages (feeds of kind ``crdb``) decode into the same events: ``after``
is the new image, ``before`` (``diff``) the old one, ``updated`` the commit time, resolved
messages per partition; so the same checks are cdctest's order validator (per key order, one
partition per key, nothing at or below a partition's resolved timestamp after it), its
before/after validator (``before`` equals the previous ``after`` and the journal's old image),
exactly-once (no duplicates or gaps), and its fingerprint validator (replaying the feed up to
each resolved timestamp gives the table as of then).

Every check returns or adds to a :class:`Report`; an empty report means the check passed.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson

import changefeed
from changefeed.connection import Connection
from changefeed.engine.catalog import Role, TableSchema
from changefeed.engine.changes import CHANGE_SNAPSHOT, read_changes
from changefeed.engine.clock import CommitTs
from changefeed.feeds.spec import FeedSpec, Mode
from changefeed.feeds.store import all_feeds
from changefeed.formats.base import partition_of
from changefeed.topics import TopicStore

__all__ = [
    "ChangeRow",
    "FeedEvent",
    "Report",
    "Violation",
    "change_rows",
    "check_change_stream",
    "check_scylla_images",
    "check_scylla_replay",
    "decode_records",
    "find_feed",
    "read_topic",
    "validate_events",
    "validate_feed",
]

CHANGE_UPSERT = 10
CHANGE_ERASE = 11
MAX_KEPT = 50  # violations kept per check (all are counted)

Key = tuple[Any, ...]
Image = dict[str, Any]


# ============================================================================== report
@dataclass(frozen=True)
class Violation:
    check: str
    key: Any
    detail: str

    def __str__(self) -> str:
        return f"[{self.check}] key={self.key!r}: {self.detail}"


@dataclass
class Report:
    """Violations found, per check, plus counters of what was looked at."""

    violations: list[Violation] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    stats: dict[str, int] = field(default_factory=dict)

    def add(self, check: str, key: Any, detail: str) -> None:
        self.counts[check] += 1
        if self.counts[check] <= MAX_KEPT:
            self.violations.append(Violation(check, key, detail))

    def merge(self, other: Report) -> Report:
        self.violations.extend(other.violations)
        self.counts.update(other.counts)
        self.stats.update(other.stats)
        return self

    @property
    def ok(self) -> bool:
        return not self.counts

    def of(self, check: str) -> list[Violation]:
        return [v for v in self.violations if v.check == check]

    def __bool__(self) -> bool:  # truthy when there are violations, like a non-empty list
        return not self.ok

    def __str__(self) -> str:
        if self.ok:
            return f"no violations ({', '.join(f'{k}={v}' for k, v in sorted(self.stats.items()))})"
        lines = [
            f"{sum(self.counts.values())} violation(s): "
            + ", ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        ]
        lines += [f"  {v}" for v in self.violations[:40]]
        return "\n".join(lines)


# ============================================================================== values
def norm(v: Any) -> Any:
    """A value as JSON would carry it, so journal, table and record values compare equal."""
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, bool | int | float | str) or v is None:
        return v
    if isinstance(v, list | tuple):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    return orjson.loads(orjson.dumps(v, default=str))


def _nkey(values: Iterable[Any]) -> Key:
    return tuple(norm(v) for v in values)


def _nimage(d: Mapping[str, Any] | None) -> Image | None:
    return None if d is None else {k: norm(v) for k, v in d.items()}


# ============================================================================== change stream
@dataclass(frozen=True)
class ChangeRow:
    seq: int
    ts: int
    lg: int
    tx: int
    op: int
    static: bool
    key: Key
    new: Image | None  # value columns after (None: erased)
    old: Image | None  # value columns before (None: the row did not exist)
    written: frozenset[str]

    @property
    def order(self) -> tuple[int, int, int]:
        return (self.ts, self.lg, self.tx)


def _schema(conn: Connection, table: str) -> TableSchema:
    conn.db.refresh_catalog()
    schema = conn.db.find_table(table)
    if schema is None:
        raise LookupError(f"table {table!r} does not exist")
    return schema


def change_rows(conn: Connection, table: str, start_seq: int = 0) -> list[ChangeRow]:
    """The change stream of ``table`` after ``start_seq`` as Python objects (JSON-normalised)."""
    schema = _schema(conn, table)
    batch = read_changes(conn.db.conn, schema, start_seq, 1 << 62)
    cols = batch.to_pydict()
    keys = [c for c in schema.stored if c.is_key]
    vals = [c for c in schema.stored if not c.is_key]
    out: list[ChangeRow] = []
    for i in range(batch.num_rows):
        op = cols["op"][i]
        key = _nkey(cols[c.db][i] for c in keys)
        new = None if op == CHANGE_ERASE else {c.name: norm(cols[c.db][i]) for c in vals}
        old = {c.name: norm(cols[f"o{c.id}"][i]) for c in vals} if cols["ox"][i] else None
        written = frozenset(c.name for c in vals if cols[f"u{c.id}"][i])
        out.append(
            ChangeRow(
                cols["seq"][i],
                cols["ts"][i],
                cols["lg"][i],
                cols["tx"][i],
                op,
                bool(cols["st"][i]),
                key,
                new,
                old,
                written,
            )
        )
    return out


def _table_state(conn: Connection, schema: TableSchema) -> dict[Key, Image]:
    nk = len([c for c in schema.stored if c.is_key])
    res = conn.execute(f"SELECT * FROM {schema.name}")
    names = res.columns
    return {_nkey(r[:nk]): {n: norm(v) for n, v in zip(names[nk:], r[nk:], strict=True)} for r in res.rows}


def check_change_stream(conn: Connection, table: str = "t", history: Any = None) -> Report:
    """Replay ``x<id>`` into a dict and compare with the table; check images (see module doc).

    ``history`` is a :class:`changefeed.testing.workload.History` (table states per transaction)."""
    rep = Report()
    schema = _schema(conn, table)
    rows = change_rows(conn, table)
    state: dict[Key, Image] = {}
    prev_order: tuple[int, int, int] | None = None
    seen_tx_keys: set[tuple[int, Key]] = set()
    known: set[Key] = set()
    for r in rows:
        if r.op == CHANGE_SNAPSHOT:
            continue
        if prev_order is not None and r.order < prev_order:
            rep.add(
                "stream_order",
                r.key,
                f"seq {r.seq} has commit ts {r.order} before the previous row's {prev_order}",
            )
        prev_order = r.order
        if (r.tx, r.key) in seen_tx_keys:
            rep.add("stream_dup", r.key, f"transaction {r.tx} has two change rows for the key")
        seen_tx_keys.add((r.tx, r.key))
        before = state.get(r.key)
        # A key's first change may carry an old image written before the change stream existed.
        if r.key in known and r.old != before:
            rep.add(
                "stream_old_image",
                r.key,
                f"seq {r.seq} tx {r.tx}: old image {r.old} but the previous new image is {before}",
            )
        known.add(r.key)
        if r.new is None:
            state.pop(r.key, None)
        else:
            state[r.key] = r.new
        if history is not None:
            after = history.state_after(r.tx)
            if after is None:
                rep.add(
                    "history",
                    r.key,
                    f"transaction {r.tx} is not in the workload's history (not committed by it?)",
                )
            else:
                exp_new = _nimage(after.get(r.key))
                exp_old = _nimage(history.state_before(r.tx).get(r.key))
                if r.new != exp_new:
                    rep.add(
                        "new_image",
                        r.key,
                        f"tx {r.tx}: new image {r.new}, table after the transaction {exp_new}",
                    )
                if r.old != exp_old:
                    rep.add(
                        "old_image",
                        r.key,
                        f"tx {r.tx}: old image {r.old}, table before the transaction {exp_old}",
                    )
    table_rows = _table_state(conn, schema)
    for k in sorted(set(table_rows) | set(state), key=repr):
        if table_rows.get(k) != state.get(k):
            rep.add("stream_replay", k, f"replayed {state.get(k)} but the table has {table_rows.get(k)}")
    if history is not None:
        # Every committed transaction that changed a row shows up in the stream, with every key it changed.
        prev = history.initial
        by_tx: dict[int, set[Key]] = defaultdict(set)
        for r in rows:
            by_tx[r.tx].add(r.key)
        for txid, st in history.after:
            changed = {_nkey(k) for k in set(st) | set(prev) if _nimage(st.get(k)) != _nimage(prev.get(k))}
            missing = changed - by_tx.get(txid, set())
            for k in sorted(missing, key=repr):
                rep.add(
                    "stream_gap", k, f"transaction {txid} changed the row but the stream has no change for it"
                )
            prev = st
    rep.stats["change_rows"] = len(rows)
    return rep


# ============================================================================== ScyllaDB log
def _cql_type(schema: TableSchema, name: str) -> str:
    return schema.column(name).type.name


def _log_rows(conn: Connection, table: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    res = conn.execute(f"SELECT * FROM {table}_scylla_cdc_log")
    return res.columns, res.rows


def _groups(columns: list[str], rows: list[tuple[Any, ...]]) -> list[list[dict[str, Any]]]:
    """Log rows grouped per (stream, time) — one statement batch in one partition — in log order."""
    groups: list[list[dict[str, Any]]] = []
    last: tuple[Any, Any] | None = None
    for r in rows:
        d = dict(zip(columns, r, strict=True))
        k = (d["cdc$stream_id"], d["cdc$time"])
        if k != last:
            groups.append([])
            last = k
        groups[-1].append(d)
    for g in groups:
        g.sort(key=lambda d: d["cdc$batch_seq_no"])
    return groups


def check_scylla_replay(conn: Connection, table: str = "ks.t", target: str | None = None) -> Report:
    """Replay the CDC log of ``table`` into a new table ``target`` with CQL statements and compare
    ``SELECT *`` of both. ``conn`` must be a CQL connection."""
    rep = Report()
    schema = _schema(conn, table)
    target = target or f"{table}_replay"
    pk = [c.name for c in schema.partition_key]
    ck = [c.name for c in schema.clustering_key]
    static = [c.name for c in schema.columns if c.role is Role.STATIC]
    regular = [c.name for c in schema.columns if c.role is Role.REGULAR]
    defs = [
        f"{c.name} {c.type.name}{' static' if c.role is Role.STATIC else ''}"
        for c in schema.columns
        if not c.virtual
    ]
    key_clause = f"(({', '.join(pk)}){', ' + ', '.join(ck) if ck else ''})"
    conn.execute(f"CREATE TABLE {target} ({', '.join(defs)}, PRIMARY KEY {key_clause})")
    columns, rows = _log_rows(conn, table)
    statements = 0
    for group in _groups(columns, rows):
        i = 0
        while i < len(group):
            d = group[i]
            op = d["cdc$operation"]
            i += 1
            where_pk = " AND ".join(f"{c} = ?" for c in pk)
            pkv = [d[c] for c in pk]
            ttl = f" USING TTL {d['cdc$ttl']}" if d.get("cdc$ttl") else ""
            if op in (0, 9):
                continue
            sql: str
            params: list[Any]
            if op in (1, 2):
                is_static = ck and all(d[c] is None for c in ck)
                cols = static if is_static else regular
                cells = [(c, d[c]) for c in cols if d[c] is not None or d.get(f"cdc$deleted_{c}")]
                if op == 2:
                    names = pk + ck + [c for c, _ in cells]
                    sql = f"INSERT INTO {target} ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)}){ttl}"
                    params = pkv + [d[c] for c in ck] + [v for _, v in cells]
                else:
                    if not cells:
                        continue
                    where = where_pk + ("" if is_static else "".join(f" AND {c} = ?" for c in ck))
                    sql = f"UPDATE {target}{ttl} SET {', '.join(f'{c} = ?' for c, _ in cells)} WHERE {where}"
                    params = [v for _, v in cells] + pkv + ([] if is_static else [d[c] for c in ck])
            elif op == 3:
                sql = f"DELETE FROM {target} WHERE {where_pk}" + "".join(f" AND {c} = ?" for c in ck)
                params = pkv + [d[c] for c in ck]
            elif op == 4:
                sql, params = f"DELETE FROM {target} WHERE {where_pk}", pkv
            elif op in (5, 6, 7, 8):
                lower = d if op in (5, 6) else None
                upper = d if op in (7, 8) else None
                if lower is not None and i < len(group) and group[i]["cdc$operation"] in (7, 8):
                    upper = group[i]
                    i += 1
                conds, params = [where_pk], list(pkv)
                ref = lower if lower is not None else upper
                assert ref is not None
                set_ck = [c for c in ck if ref[c] is not None]
                prefix, last = set_ck[:-1], set_ck[-1] if set_ck else None
                for c in prefix:
                    conds.append(f"{c} = ?")
                    params.append(ref[c])
                if last is not None:
                    if (
                        lower is not None
                        and upper is not None
                        and lower["cdc$operation"] == 5
                        and upper["cdc$operation"] == 7
                        and lower[last] == upper[last]
                        and len(set_ck) < len(ck)
                    ):
                        conds.append(f"{last} = ?")
                        params.append(lower[last])
                    else:
                        if lower is not None:
                            conds.append(f"{last} {'>=' if lower['cdc$operation'] == 5 else '>'} ?")
                            params.append(lower[last])
                        if upper is not None:
                            conds.append(f"{last} {'<=' if upper['cdc$operation'] == 7 else '<'} ?")
                            params.append(upper[last])
                sql = f"DELETE FROM {target} WHERE {' AND '.join(conds)}"
            else:
                rep.add("scylla_log", None, f"unknown cdc$operation {op}")
                continue
            conn.execute(sql, params)
            statements += 1
    a = conn.execute(f"SELECT * FROM {table}")
    b = conn.execute(f"SELECT * FROM {target}")
    sa, sb = Counter(map(repr, a.rows)), Counter(map(repr, b.rows))
    for r in sorted((sa - sb).elements()):
        rep.add("scylla_replay", r, "row in the table, missing from the replay")
    for r in sorted((sb - sa).elements()):
        rep.add("scylla_replay", r, "row in the replay, not in the table")
    rep.stats.update(log_rows=len(rows), replay_statements=statements, table_rows=len(a.rows))
    return rep


def check_scylla_images(conn: Connection, table: str = "ks.t") -> Report:
    """Simulate the log; every pre-image (op 0) must equal the simulated row before its delta and
    every post-image (op 9) the row after it. Needs preimage 'full' and postimage true."""
    rep = Report()
    schema = _schema(conn, table)
    pk = [c.name for c in schema.partition_key]
    ck = [c.name for c in schema.clustering_key]
    static = [c.name for c in schema.columns if c.role is Role.STATIC]
    regular = [c.name for c in schema.columns if c.role is Role.REGULAR]
    # row state: (pk, ck) -> (marker, cells); statics: pk -> cells
    rows: dict[tuple[Key, Key], tuple[bool, dict[str, Any]]] = {}
    statics: dict[Key, dict[str, Any]] = {}
    columns, log = _log_rows(conn, table)
    n_pre = n_post = 0

    def current(p: Key, c: Key | None) -> dict[str, Any] | None:
        if c is None:
            s = statics.get(p)
            return None if s is None else {n: s.get(n) for n in static}
        r = rows.get((p, c))
        return None if r is None else {n: r[1].get(n) for n in regular}

    for group in _groups(columns, log):
        pending_pre: tuple[tuple[Key, Key | None], dict[str, Any]] | None = None
        last_delta: tuple[Key, Key | None] | None = None
        for d in group:
            op = d["cdc$operation"]
            p: Key = tuple(d[c] for c in pk)
            is_static = bool(ck) and all(d[c] is None for c in ck) and op in (0, 1, 9)
            c: Key | None = None if is_static else tuple(d[x] for x in ck)
            names = static if is_static else regular
            if op == 0:
                n_pre += 1
                pending_pre = ((p, c), {n: d[n] for n in names})
                continue
            if op == 9:
                n_post += 1
                if last_delta != (p, c):
                    rep.add("postimage", (p, c), "post-image not right after a delta of the same row")
                now = current(p, c)
                img = {n: d[n] for n in names}
                if now != img:
                    rep.add("postimage", (p, c), f"post-image {img} but the row after the statement is {now}")
                last_delta = None
                continue
            if op in (1, 2, 3):
                before = current(p, c)
                if pending_pre is not None and pending_pre[0] != (p, c):
                    rep.add(
                        "preimage",
                        (p, c),
                        f"pre-image of {pending_pre[0]} followed by a delta of another row",
                    )
                got = pending_pre[1] if pending_pre is not None and pending_pre[0] == (p, c) else None
                if before != got:
                    rep.add(
                        "preimage",
                        (p, c),
                        f"op {op}: pre-image {got} but the row before the statement is {before}",
                    )
                pending_pre = None
            if op in (1, 2):
                cells = {n: d[n] for n in names if d[n] is not None or d.get(f"cdc$deleted_{n}")}
                if c is None:
                    s = statics.setdefault(p, {})
                    s.update(cells)
                    if all(v is None for v in s.values()):
                        del statics[p]
                else:
                    marker, old = rows.get((p, c), (False, {}))
                    merged = {**old, **cells}
                    marker = marker or op == 2
                    if not marker and all(v is None for v in merged.values()):
                        rows.pop((p, c), None)
                    else:
                        rows[(p, c)] = (marker, merged)
                last_delta = (p, c)
            elif op == 3:
                assert c is not None
                rows.pop((p, c), None)
                last_delta = None
            elif op == 4:
                for k in [k for k in rows if k[0] == p]:
                    del rows[k]
                statics.pop(p, None)
            elif op in (5, 6, 7, 8):
                _range_delete(rows, p, ck, d, group)
    rep.stats.update(preimages=n_pre, postimages=n_post)
    if n_pre == 0 or n_post == 0:
        rep.add(
            "images",
            None,
            f"the log has {n_pre} pre-images and {n_post} post-images; is preimage/postimage on?",
        )
    return rep


def _range_delete(
    rows: dict[tuple[Key, Key], tuple[bool, dict[str, Any]]],
    p: Key,
    ck: list[str],
    d: dict[str, Any],
    group: list[dict[str, Any]],
) -> None:
    op = d["cdc$operation"]
    lower: dict[str, Any] | None
    upper: dict[str, Any] | None
    if op in (7, 8):
        idx = group.index(d)
        if idx > 0 and group[idx - 1]["cdc$operation"] in (5, 6):
            return  # handled with its left bound
        lower, upper = None, d
    else:
        idx = group.index(d)
        upper = group[idx + 1] if idx + 1 < len(group) and group[idx + 1]["cdc$operation"] in (7, 8) else None
        lower = d
    ref = lower if lower is not None else upper
    assert ref is not None
    set_ck = [i for i, c in enumerate(ck) if ref[c] is not None]
    if not set_ck:
        return
    last = set_ck[-1]
    prefix = tuple(ref[ck[i]] for i in set_ck[:-1])

    def inside(c: Key) -> bool:
        if c[: len(prefix)] != prefix:
            return False
        v = c[last]
        if lower is not None:
            lv = lower[ck[last]]
            if v < lv or (v == lv and lower["cdc$operation"] == 6):
                return False
        if upper is not None:
            uv = upper[ck[last]]
            if v > uv or (v == uv and upper["cdc$operation"] == 8):
                return False
        return True

    for k in [k for k in rows if k[0] == p and inside(k[1])]:
        del rows[k]


# ============================================================================== feed records
@dataclass(frozen=True)
class FeedEvent:
    partition: int
    offset: int
    raw_key: bytes | None
    key: Key | None  # None for resolved records
    kind: str  # "update" | "erase" | "snapshot" | "resolved"
    ts: int  # the record's ts (commit wall ns)
    tx: int | None  # transaction id when the record carries it
    new: Image | None
    old: Image | None
    update: Image | None  # UPDATES-mode columns
    has_new: bool
    has_old: bool


def find_feed(conn: Connection, feed: str | int) -> tuple[FeedSpec, TableSchema]:
    """A feed by id, name or ``table/name``, with its table's schema."""
    conn.db.refresh_catalog()
    for row in all_feeds(conn.db.conn):
        s = row.spec
        if feed in (s.id, s.name, s.topic, f"{row.table}/{s.name}", str(s.id)):
            schema = conn.db.table_by_id(s.table_id)
            return s, schema
    raise LookupError(f"no changefeed {feed!r}")


def read_topic(db: str | Path, topic: str) -> list[tuple[int, int, bytes | None, bytes, int]]:
    """Every record of ``topic``: (partition, offset, key, value, ts), partition by partition."""
    store = TopicStore(db)
    out: list[tuple[int, int, bytes | None, bytes, int]] = []
    info = store.topic(topic)
    for p in range(info.partitions):
        t = store.read_arrow(topic, p, 0).to_pydict()
        out.extend(zip([p] * len(t["offset"]), t["offset"], t["key"], t["value"], t["ts"], strict=True))
    return out


def decode_records(
    records: Sequence[tuple[int, int, bytes | None, bytes, int]], feed: FeedSpec, schema: TableSchema
) -> list[FeedEvent]:
    key_names = [c.name for c in schema.stored if c.is_key]
    out: list[FeedEvent] = []
    for p, off, kb, vb, ts in records:
        if feed.kind == "crdb":
            out.append(_decode_crdb(p, off, kb, vb, ts, key_names, feed))
            continue
        v = orjson.loads(vb)
        if feed.format == "debezium-json":
            out.append(_decode_debezium(p, off, kb, v, ts, key_names, feed))
        else:
            out.append(_decode_ydb(p, off, kb, v, ts, feed))
    return out


def _is_resolved(kb: bytes | None, v: Any) -> bool:
    return isinstance(v, dict) and "resolved" in v


def _decode_ydb(p: int, off: int, kb: bytes | None, v: Any, ts: int, feed: FeedSpec) -> FeedEvent:
    if _is_resolved(kb, v):
        r = v["resolved"]
        tx = int(r[1]) if isinstance(r, list) and len(r) > 1 else None
        return FeedEvent(p, off, kb, None, "resolved", ts, tx, None, None, None, False, False)
    key = _nkey(v.get("key", []))
    tx = int(v["ts"][1]) if isinstance(v.get("ts"), list) else None
    kind = "erase" if "erase" in v else "update"
    if (
        kind == "update"
        and feed.initial_scan
        and ts == feed.created_wall
        and (tx is None or tx == feed.created_tx)
    ):
        kind = "snapshot"
    upd = v.get("update") if feed.mode is Mode.UPDATES else None
    return FeedEvent(
        p,
        off,
        kb,
        key,
        kind,
        ts,
        tx,
        _nimage(v.get("newImage")),
        _nimage(v.get("oldImage")),
        _nimage(upd),
        "newImage" in v,
        "oldImage" in v,
    )


def _decode_debezium(
    p: int, off: int, kb: bytes | None, v: Any, ts: int, key_names: list[str], feed: FeedSpec
) -> FeedEvent:
    if _is_resolved(kb, v) or kb is None:
        return FeedEvent(p, off, kb, None, "resolved", ts, None, None, None, None, False, False)
    payload = v.get("payload", v)
    kp = orjson.loads(kb)
    kp = kp.get("payload", kp) if isinstance(kp, dict) else kp
    key = _nkey(kp[n] for n in key_names) if isinstance(kp, dict) else _nkey(kp)
    src = payload.get("source", {}) or {}
    tx = int(src["txId"]) if src.get("txId") is not None else None
    op = payload.get("op")
    kind = {"d": "erase", "r": "snapshot"}.get(op, "update")

    def strip(img: Any) -> Image | None:
        if img is None:
            return None
        return {k: norm(x) for k, x in img.items() if k not in key_names}

    before, after = payload.get("before"), payload.get("after")
    return FeedEvent(
        p,
        off,
        kb,
        key,
        kind,
        ts,
        tx,
        strip(after),
        strip(before),
        None,
        after is not None,
        before is not None,
    )


def _decode_crdb(
    p: int, off: int, kb: bytes | None, vb: bytes, ts: int, key_names: list[str], feed: FeedSpec
) -> FeedEvent:
    """A CockroachDB changefeed message (JSON, wrapped or row envelope). Initial-scan rows are
    the ones at the feed's creation timestamp; ``before`` (diff) is the old image, key columns
    left out of images as for the other formats."""
    v = orjson.loads(vb) if vb else None
    if kb is None or (isinstance(v, dict) and ("resolved" in v or "resolved" in v.get("__crdb__", {}))):
        r = v.get("resolved") or v.get("__crdb__", {}).get("resolved") if isinstance(v, dict) else None
        wall = int(str(r).split(".")[0]) if r else ts
        return FeedEvent(p, off, kb, None, "resolved", wall, None, None, None, None, False, False)
    key = _nkey(orjson.loads(kb))

    def strip(img: Any) -> Image | None:
        if img is None:
            return None
        return {k: norm(x) for k, x in img.items() if k not in key_names and k != "__crdb__"}

    if v is None:  # row/key_only envelope delete: empty value
        return FeedEvent(p, off, kb, key, "erase", ts, None, None, None, None, False, False)
    wrapped = "after" in v
    after = v.get("after") if wrapped else v
    meta = v if wrapped else v.get("__crdb__", {})
    updated = meta.get("updated")
    at = CommitTs.parse_crdb(updated) if updated else None
    created = CommitTs(feed.created_wall, feed.created_logical)
    kind = "erase" if after is None else "update"
    if (
        kind == "update"
        and feed.initial_scan
        and (at == created if at is not None else ts == feed.created_wall)
    ):
        kind = "snapshot"
    return FeedEvent(
        p,
        off,
        kb,
        key,
        kind,
        at.wall if at is not None else ts,
        None,
        strip(after),
        strip(v.get("before")),
        None,
        after is not None,
        "before" in v,
    )


# ============================================================================== feed validation
def _order(e: FeedEvent, spec: FeedSpec) -> tuple[int, int]:
    """Commit order of an event: (wall ns, transaction id). Transaction ids are allocated with the
    commit timestamp under the write lock, so they order commits even within one wall ns."""
    if e.kind == "snapshot":
        return (spec.created_wall, spec.created_tx)
    if e.kind == "resolved":
        return (e.ts, e.tx if e.tx is not None else 1 << 62)  # wall only: covers that whole ns
    return (e.ts, e.tx if e.tx is not None else 0)


def validate_feed(db: str | Path, feed: str | int, *, complete: bool = True) -> Report:
    """Read the whole topic of ``feed`` and run every feed check against the journal and table.

    ``complete``: the pipeline has delivered everything committed (run after ``--until-idle``);
    when False, missing records are not reported (only duplicates, order, images...)."""
    return validate_records(db, feed, None, complete=complete)


# (issue 10, the Kafka sink: records read back from an external sink)
def validate_records(
    db: str | Path,
    feed: str | int,
    records: Sequence[tuple[int, int, bytes | None, bytes, int]] | None,
    *,
    complete: bool = True,
    partition_of_key: Callable[[bytes], int] | None = None,
    at_least_once: bool = False,
) -> Report:
    """:func:`validate_feed` over ``records`` (partition, offset, key, value, ts) read from a sink
    (None: the feed's embedded topic). ``partition_of_key``: the sink's partitioner (default:
    the embedded topics'). ``at_least_once``: a sink that replays a micro-batch after a crash
    may repeat records; a repeat must equal the first delivery of that change and is dropped
    before the checks (as CockroachDB's validators allow), counted in ``stats["repeats"]``;
    a repeat that differs from its first delivery is a violation."""
    with changefeed.connect(db) as conn:
        spec, schema = find_feed(conn, feed)
        if records is None:
            records = read_topic(db, spec.topic)
        events = decode_records(records, spec, schema)
        rows = change_rows(conn, schema.name)
        table = _table_state(conn, schema)
        extra = Report()
        if spec.kind == "crdb":  # column families, schema changes (testing/crdb_schema.py)
            from changefeed.testing.crdb_schema import adjust

            events, rows, table = adjust(conn, spec, schema, events, rows, table, extra)
    repeats = 0
    if at_least_once:
        first: dict[tuple[Any, ...], FeedEvent] = {}
        kept: list[FeedEvent] = []
        for e in sorted(events, key=lambda e: (e.partition, e.offset)):
            if e.kind == "resolved":
                kept.append(e)
                continue
            ident = (e.partition, e.raw_key, e.kind == "snapshot", e.ts, e.tx)
            seen = first.get(ident)
            if seen is None:
                first[ident] = e
                kept.append(e)
            elif (seen.kind, seen.new, seen.old) != (e.kind, e.new, e.old):
                extra.add(
                    "exactly_once", e.key, f"offset {e.offset}: a repeat differs from offset {seen.offset}"
                )
            else:
                repeats += 1
        events = kept
    rep = validate_events(events, rows, table, spec, complete=complete, partition_of_key=partition_of_key)
    rep.stats["repeats"] = repeats
    return rep.merge(extra)


def validate_events(
    events: Sequence[FeedEvent],
    rows: Sequence[ChangeRow],
    table: Mapping[Key, Image],
    spec: FeedSpec,
    *,
    complete: bool = True,
    partition_of_key: Callable[[bytes], int] | None = None,
) -> Report:
    """The feed checks over decoded events (see the module doc). ``rows`` is the whole change
    stream of the table, ``table`` its current state."""
    rep = Report()
    data = [e for e in events if e.kind != "resolved"]
    resolved = [e for e in events if e.kind == "resolved"]
    after_rows = [
        r for r in rows if r.seq > spec.created_seq and r.op in (CHANGE_UPSERT, CHANGE_ERASE) and not r.static
    ]
    by_ts: dict[int, list[ChangeRow]] = defaultdict(list)
    for r in after_rows:
        by_ts[r.ts].append(r)
    rep.stats.update(
        records=len(events),
        data_records=len(data),
        resolved_records=len(resolved),
        change_rows=len(after_rows),
    )

    # ---- snapshot expectation: the table at creation (undo later changes with their old images)
    at_creation: dict[Key, Image] = dict(table)
    for r in reversed(after_rows):
        if r.old is None:
            at_creation.pop(r.key, None)
        else:
            at_creation[r.key] = r.old

    # ---- (i) order: one partition per key, the right one, in commit order
    per_key: dict[Key, list[FeedEvent]] = defaultdict(list)
    for e in sorted(data, key=lambda e: (e.partition, e.offset)):
        assert e.key is not None
        per_key[e.key].append(e)
    for k, evs in per_key.items():
        parts = {e.partition for e in evs}
        if len(parts) > 1:
            rep.add("order", k, f"records of one key in partitions {sorted(parts)}")
        raw = evs[0].raw_key
        part_of = partition_of_key or (lambda b: partition_of(b, spec.partitions))
        hashed = None if raw is None else part_of(raw)
        if hashed is not None and hashed != evs[0].partition:
            rep.add("order", k, f"key hashes to partition {hashed} but was written to {evs[0].partition}")
        if len({e.raw_key for e in evs}) > 1:
            rep.add("order", k, "one key encoded as different message keys")
        prev: tuple[int, int] | None = None
        for e in evs:
            o = _order(e, spec)
            if prev is not None and o < prev:
                rep.add("order", k, f"offset {e.offset} (ts {o}) delivered after a later change (ts {prev})")
            prev = o if prev is None or o > prev else prev

    # ---- (ii) exactly once
    def ident_event(e: FeedEvent) -> tuple[Any, ...]:
        if e.kind == "snapshot":
            return ("snapshot", e.key)
        return (e.key, e.tx) if e.tx is not None else (e.key, e.ts)

    use_tx = all(e.tx is not None for e in data if e.kind != "snapshot")
    expected: dict[tuple[Any, ...], ChangeRow | Image] = {}
    for r in after_rows:
        expected[(r.key, r.tx) if use_tx else (r.key, r.ts)] = r
    if spec.initial_scan:
        for k, img in at_creation.items():
            expected[("snapshot", k)] = img
    got = Counter(ident_event(e) for e in data)
    for ident, n in got.items():
        if n > 1:
            rep.add(
                "exactly_once",
                ident[-2] if ident[0] != "snapshot" else ident[1],
                f"delivered {n} times: {ident}",
            )
        if ident not in expected:
            rep.add("exactly_once", ident, "delivered but no such committed change (phantom)")
    if complete:
        for ident in expected:
            if ident not in got:
                rep.add("exactly_once", ident, "committed but never delivered (lost)")

    # ---- (iii) images vs the journal, and chained per key
    wants_new = spec.mode in (Mode.NEW_IMAGE, Mode.NEW_AND_OLD_IMAGES)
    wants_old = spec.mode in (Mode.OLD_IMAGE, Mode.NEW_AND_OLD_IMAGES)
    for e in data:
        exp = expected.get(ident_event(e))
        if exp is None:
            continue
        if isinstance(exp, ChangeRow):
            want_kind = "erase" if exp.op == CHANGE_ERASE else "update"
            if e.kind != want_kind:
                rep.add("images", e.key, f"tx {exp.tx}: record is {e.kind}, journal says {want_kind}")
            if wants_new and (e.new if e.has_new else None) != exp.new:
                rep.add("images", e.key, f"tx {exp.tx}: new image {e.new} != journal {exp.new}")
            if wants_old and (e.old if e.has_old else None) != exp.old:
                rep.add("images", e.key, f"tx {exp.tx}: old image {e.old} != journal {exp.old}")
            if spec.mode is Mode.UPDATES and exp.new is not None:
                want = {c: exp.new[c] for c in exp.written}
                if e.update != want:
                    rep.add("images", e.key, f"tx {exp.tx}: update columns {e.update} != journal {want}")
        elif wants_new and e.new != exp:
            rep.add("images", e.key, f"snapshot image {e.new} != table at creation {exp}")
    if wants_new and wants_old:
        for k, evs in per_key.items():
            prev_new: Image | None = None
            have_prev = False
            for e in evs:
                if e.kind == "snapshot":
                    prev_new, have_prev = e.new, True
                    continue
                if have_prev and (e.old if e.has_old else None) != prev_new:
                    rep.add(
                        "images",
                        k,
                        f"offset {e.offset}: old image {e.old} != previous record's new image {prev_new}",
                    )
                prev_new, have_prev = (e.new if e.has_new else None), True

    # ---- (iv) resolved timestamps
    if resolved:
        _check_resolved(rep, data, resolved, rows, spec, at_creation, wants_new)

    # ---- (v) initial scan
    if spec.initial_scan:
        for k, evs in per_key.items():
            snaps = [i for i, e in enumerate(evs) if e.kind == "snapshot"]
            if len(snaps) > 1:
                rep.add("initial_scan", k, f"{len(snaps)} snapshot records")
            if snaps and snaps[0] != 0:
                rep.add(
                    "initial_scan",
                    k,
                    f"snapshot record at offset {evs[snaps[0]].offset} after an update of the key",
                )
    return rep


def _check_resolved(
    rep: Report,
    data: Sequence[FeedEvent],
    resolved: Sequence[FeedEvent],
    rows: Sequence[ChangeRow],
    spec: FeedSpec,
    at_creation: Mapping[Key, Image],
    wants_new: bool,
) -> None:
    def order_of(e: FeedEvent) -> tuple[int, int]:
        return _order(e, spec)

    res_order = order_of

    # no record at or below a resolved timestamp after it, in its partition
    by_part: dict[int, list[FeedEvent]] = defaultdict(list)
    for e in [*data, *resolved]:
        by_part[e.partition].append(e)
    for p, evs in by_part.items():
        evs.sort(key=lambda e: e.offset)
        high: tuple[int, int] | None = None
        for e in evs:
            if e.kind == "resolved":
                r = res_order(e)
                high = r if high is None or r > high else high
            elif high is not None and order_of(e) <= high:
                rep.add(
                    "resolved",
                    e.key,
                    f"partition {p} offset {e.offset}: record at {order_of(e)} after resolved {high}",
                )
    if not wants_new:
        return
    # fingerprint: replay the feed (all partitions) up to each resolved ts == journal state then
    marks = sorted({res_order(e) for e in resolved})
    feed_evs = sorted(data, key=lambda e: (order_of(e), e.partition, e.offset))
    stream = [r for r in rows if not r.static and r.op in (CHANGE_UPSERT, CHANGE_ERASE)]
    stream.sort(key=lambda r: (r.ts, r.tx))
    feed_state: dict[Key, Image] = {}
    truth: dict[Key, Image] = dict(at_creation)
    covered: set[Key] = set(at_creation) if spec.initial_scan else set()
    i = j = 0
    for m in marks:
        while i < len(feed_evs) and order_of(feed_evs[i]) <= m:
            e = feed_evs[i]
            assert e.key is not None
            if e.kind == "erase" or e.new is None:
                feed_state.pop(e.key, None)
            else:
                feed_state[e.key] = e.new
            i += 1
        while j < len(stream) and (stream[j].ts, stream[j].tx) <= m:
            sr = stream[j]
            if sr.seq > spec.created_seq:
                covered.add(sr.key)
                if sr.new is None:
                    truth.pop(sr.key, None)
                else:
                    truth[sr.key] = sr.new
            j += 1
        for k in covered:
            if feed_state.get(k) != truth.get(k):
                rep.add(
                    "resolved",
                    k,
                    f"at resolved {m}: feed replay has {feed_state.get(k)}, table had {truth.get(k)}",
                )
    rep.stats["resolved_marks"] = len(marks)
