"""The feed validators over CockroachDB feeds with column families and schema changes.

:func:`adjust` prepares what :func:`~changefeed.testing.validators.validate_events` compares, so
the same checks (order, exactly once, images, resolved fingerprints, initial scan) hold for:

* a **column family** feed (``FeedSpec.family``): the change rows that give a message for the
  family (CockroachDB's rules, :func:`changefeed.formats.crdb_json.family_rows`), images of the
  family's columns only; in a family other than the primary one a row whose family columns are
  all NULL has no message, so such an image counts as no row;
* **schema changes** (``_schema_changes``): images are compared on the columns every schema of
  the table's history has (a column added or dropped later is checked by the backfill check);
  the backfill messages at a change's timestamp are taken out and checked on their own: per
  pass (old schema unless a column was dropped, then the new schema with ``backfill``) exactly
  one message per row of the table at the change, equal to it; with
  ``schema_change_policy='stop'`` only the changes before the first triggering change are
  expected.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from changefeed.engine.catalog import TableSchema
from changefeed.engine.clock import CommitTs
from changefeed.engine.schema_history import history
from changefeed.feeds.crdb_options import (
    SCHEMA_CHANGE_POLICY_BACKFILL,
    SCHEMA_CHANGE_POLICY_IGNORE,
    SCHEMA_CHANGE_POLICY_STOP,
    triggers_backfill,
)
from changefeed.feeds.spec import FeedSpec
from changefeed.formats.crdb_json import families, family_of

if TYPE_CHECKING:
    from changefeed.connection import Connection
    from changefeed.testing.validators.journal import ChangeRow
    from changefeed.testing.validators.records import FeedEvent
    from changefeed.testing.validators.report import Report
    from changefeed.testing.validators.values import Image, Key

CHANGE_ERASE = 11


def _undo(table: Mapping[Key, Image], rows: Sequence[ChangeRow]) -> dict[Key, Image]:
    """The table before ``rows`` (undone newest first through their old images)."""
    out = dict(table)
    for r in reversed(rows):
        if r.old is None:
            out.pop(r.key, None)
        else:
            out[r.key] = r.old
    return out


def adjust(
    conn: Connection,
    spec: FeedSpec,
    schema: TableSchema,
    events: list[FeedEvent],
    rows: list[ChangeRow],
    table: dict[Key, Image],
    rep: Report,
) -> tuple[list[FeedEvent], list[ChangeRow], dict[Key, Image]]:
    """(events, change rows, table) for the generic checks; the backfill checks add to ``rep``."""
    changes = history(conn.db.conn, schema.id)
    if spec.family is None and not changes:
        return events, rows, table
    created = CommitTs(spec.created_wall, spec.created_logical)
    mine = [c for c in changes if c.at > created and c.seq >= spec.created_seq]
    opts = spec.crdb
    due = [c for c in mine if opts is not None and triggers_backfill(c.old, c.new, opts)]
    policy = opts.schema_change_policy if opts is not None else SCHEMA_CHANGE_POLICY_IGNORE
    if policy == SCHEMA_CHANGE_POLICY_IGNORE:
        due = []

    # ---- the columns compared: every schema's, the feed's family's
    schemas = [*(c.old for c in changes), *(c.new for c in changes), schema]
    stable = set.intersection(*({c.name for c in s.stored if not c.is_key} for s in schemas))
    primary = True
    if spec.family is not None:
        stable &= {c.name for c in schema.stored if not c.is_key and family_of(c) == spec.family}
        primary = spec.family == families(schema)[0]
        written_cols = {c.name for c in schema.stored if not c.is_key and family_of(c) == spec.family}
    else:
        written_cols = set()

    def project(img: Image | None) -> Image | None:
        if img is None:
            return None
        out = {k: v for k, v in img.items() if k in stable}
        if not primary and all(v is None for v in out.values()):
            return None  # no row of this family
        return out

    # ---- stop: nothing at or after the first triggering change is expected
    if policy == SCHEMA_CHANGE_POLICY_STOP and due:
        stop = due[0]
        later = [r for r in rows if r.seq > stop.seq]
        table = _undo(table, later)
        rows = [r for r in rows if r.seq <= stop.seq]
        due = []

    # ---- the backfill messages, checked on their own and taken out
    if due:
        data = [e for e in events if e.kind != "resolved"]
        for c in due:
            if any(r.ts == c.at.wall for r in rows):
                rep.add("backfill", c.version, f"a change row shares the wall time of schema change {c.at}")
                continue
            mark = [e for e in data if e.kind in ("update", "snapshot") and e.ts == c.at.wall]
            state = _undo(table, [r for r in rows if r.seq > c.seq])
            want = {k: project(img) for k, img in state.items()}
            want = {k: img for k, img in want.items() if img is not None}
            dropped = {x.id for x in c.old.stored} - {x.id for x in c.new.stored}
            passes = (0 if dropped else 1) + (1 if policy == SCHEMA_CHANGE_POLICY_BACKFILL else 0)
            got = Counter(e.key for e in mark)
            for k in set(want) | set(got):
                if got.get(k, 0) != passes:
                    rep.add("backfill", k, f"{got.get(k, 0)} messages at schema change {c.at}, want {passes}")
            for e in mark:
                assert e.key is not None
                if e.key in want and project(e.new) != want[e.key]:
                    rep.add("backfill", e.key, f"backfill image {e.new} != table at the change {want[e.key]}")
            marked = {id(e) for e in mark}
            events = [e for e in events if id(e) not in marked]
        rep.stats["backfill_changes"] = len(due)

    # ---- family rows and projected images
    def gives_message(r: ChangeRow) -> bool:
        if spec.family is None or r.op == CHANGE_ERASE:
            return True
        if r.old is None:  # created
            return primary or any(v is not None for k, v in (r.new or {}).items() if k in written_cols)
        return bool(r.written & written_cols)

    rows = [
        replace(r, new=project(r.new), old=project(r.old)) if gives_message(r) else r
        for r in rows
        if gives_message(r) or r.seq <= spec.created_seq
    ]
    table = {k: p for k, img in table.items() if (p := project(img)) is not None}
    events = [replace(e, new=project(e.new), old=project(e.old)) for e in events]
    return events, rows, table


__all__ = ["adjust"]
