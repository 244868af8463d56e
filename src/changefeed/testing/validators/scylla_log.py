"""Checks of the ScyllaDB-shaped CDC log (``<table>_scylla_cdc_log``), independent of any changefeed.

* :func:`check_scylla_replay` — replaying the log with the same CQL statements into a fresh table
  reproduces the table (``SELECT *`` equal);
* :func:`check_scylla_images` — every pre-image (op 0) equals the row before its statement and
  every post-image (op 9) the row after, by simulating the log.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from changefeed.connection import Connection
from changefeed.engine.catalog import Role
from changefeed.testing.validators.journal import table_schema
from changefeed.testing.validators.report import Report
from changefeed.testing.validators.values import Key

__all__ = ["check_scylla_images", "check_scylla_replay"]


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
    schema = table_schema(conn, table)
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
    schema = table_schema(conn, table)
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
