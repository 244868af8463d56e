"""A feed's records, read from its topic (or a sink) and decoded into :class:`FeedEvent` s: YDB
changefeed JSON, Debezium JSON and CockroachDB changefeed messages (``after`` the new image,
``before`` (``diff``) the old one, ``updated`` the commit time, resolved messages per partition).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from changefeed.connection import Connection
from changefeed.engine.catalog import TableSchema
from changefeed.engine.clock import CommitTs
from changefeed.feeds.spec import FeedSpec, Mode
from changefeed.feeds.store import all_feeds
from changefeed.testing.validators.values import Image, Key, norm, norm_image, norm_key
from changefeed.topics import TopicStore

__all__ = ["FeedEvent", "decode_records", "find_feed", "read_topic"]


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
    key = norm_key(v.get("key", []))
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
        norm_image(v.get("newImage")),
        norm_image(v.get("oldImage")),
        norm_image(upd),
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
    key = norm_key(kp[n] for n in key_names) if isinstance(kp, dict) else norm_key(kp)
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
    key = norm_key(orjson.loads(kb))

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
