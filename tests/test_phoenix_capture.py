"""The change rows of bulk writes computed inside SQLite (``TableStore.capture_bulk_write``) are
the rows the Python capture builds: same ``seq`` numbers, old images, liveness of expired rows
and cells, time index rows and CDC JSON, also when later statements of the transaction touch
the same keys."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed.engine import txn
from tests.phoenix_clock import MS, Clock


def _workload(path: Path, seed: int) -> Any:
    rng = random.Random(seed)
    clock = Clock()
    c = changefeed.connect(path, clock=clock)
    c.execute(
        "CREATE TABLE W (k INTEGER NOT NULL, v1 INTEGER, B.v2 VARCHAR, v3 DOUBLE, CONSTRAINT pk PRIMARY KEY (k)) TTL=5"
    )
    c.execute("CREATE CDC WC ON W INCLUDE (PRE, POST, CHANGE)")
    cols = ["v1", "B.v2", "v3"]
    for _ in range(120):
        clock.now += rng.choice([0, 1, 900, 2_000, 6_000]) * MS  # rows and cells expire (TTL 5 s)
        with c.transaction():
            for _ in range(rng.randint(1, 3)):
                r = rng.random()
                if r < 0.15:
                    c.execute("DELETE FROM W WHERE k = ?", (rng.randint(0, 15),))
                    continue
                chosen = [i for i in range(3) if rng.random() < 0.6] or [0]
                keys = rng.sample(range(16), rng.randint(1, 8))
                rows = [
                    [
                        k,
                        *(
                            rng.choice(
                                [None, rng.randint(0, 9), "a"] if i == 1 else [None, rng.randint(0, 9)]
                            )
                            for i in chosen
                        ),
                    ]
                    for k in keys
                ]
                rows = [
                    [v if not (i and chosen[i - 1] == 1) or v is None else str(v) for i, v in enumerate(r)]
                    for r in rows
                ]
                names = ", ".join(["k", *(cols[i] for i in chosen)])
                marks = ", ".join("?" * (len(chosen) + 1))
                c.executemany(f"UPSERT INTO W ({names}) VALUES ({marks})", rows)
    t = c.db.find_table("W")
    assert t is not None
    x = c.db.conn.execute(f"SELECT * FROM x{t.id} ORDER BY seq").fetchall()
    p = c.db.conn.execute(f"SELECT * FROM p{t.id}").fetchall()
    seq = c.db.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (f"x{t.id}",)).fetchall()
    events = c.execute("SELECT * FROM WC").rows
    table = c.execute("SELECT * FROM W").rows
    c.close()
    return x, p, seq, events, table


@pytest.mark.parametrize("seed", [1, 2])
def test_sqlite_capture_equals_python_capture(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _workload(tmp_path / "fast", seed)
    monkeypatch.setattr(txn, "CAPTURE_IN_SQLITE", False)
    slow = _workload(tmp_path / "slow", seed)
    x, p, seq, events, table = fast
    assert len(x) > 300 and len(events) > 300
    assert any(r[5] == 1 for r in x) and any(r[5] == 0 for r in x)  # rows that existed and not
    assert x == slow[0]
    assert p == slow[1]
    assert seq == slow[2]
    assert events == slow[3]
    assert table == slow[4]
