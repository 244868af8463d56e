"""Reading a table's change stream (``x<id>``) straight from the database file, for tests that
compare what two ways of writing leave there."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import changefeed


def change_rows(db: Path, table: str, *, in_order: bool = False) -> list[tuple[Any, ...]]:
    """The change stream's rows without their position and time (which differ between runs):
    in commit order with ``in_order``, else sorted."""
    with changefeed.connect(db) as conn:
        conn.db.refresh_catalog()
        schema = conn.db.find_table(table)
        assert schema is not None
    raw = sqlite3.connect(db / "changefeed.db")
    names = [r[1] for r in raw.execute(f"PRAGMA table_info(x{schema.id})")]
    keep = [n for n in names if n not in ("seq", "ts", "lg", "tx")]
    rows = raw.execute(f"SELECT {', '.join(keep)} FROM x{schema.id} ORDER BY seq").fetchall()
    raw.close()
    return rows if in_order else sorted(rows, key=repr)
