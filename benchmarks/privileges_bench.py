"""What privilege checks cost single-row writes.

    python benchmarks/privileges_bench.py [--rows 3000] [--repeat 3]

Writes ``--rows`` single-row transactions (``UPSERT INTO t VALUES (?, ?)`` through
``Connection.execute``, as ``benchmarks/engine_bench.py --single`` does) three ways: with the
checks switched off (the baseline), as ``root`` (an admin), and as a user granted INSERT, SELECT
and UPDATE through a role. Each configuration runs ``--repeat`` times, interleaved in a rotating
order after a warm-up, best run kept. Prints rows/s and the ratio to the baseline, and, since on a busy machine run-to-run noise
exceeds the effect, the cost of one statement's check measured alone (100,000 calls of the
granted user's INSERT+SELECT+UPDATE check) as a share of the time of one single-row write.
Target (issue 7): checks cost at most 5% of single-row write throughput.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import changefeed
from changefeed.engine.privileges import Privilege
from changefeed.engine.txn import Transaction
from changefeed.sql.session import Session


def run(db: Path, user: str, first: int, n: int) -> float:
    with changefeed.connect(db, user=user) as conn:
        start = time.perf_counter()
        for i in range(first, first + n):
            conn.execute("UPSERT INTO t VALUES (?, ?)", (i, "value"))
        return n / (time.perf_counter() - start)


def check_cost(db: Path, calls: int = 100_000) -> float:
    """Seconds per check of the granted user's UPSERT privileges, measured alone."""
    with changefeed.connect(db, user="w") as conn:
        session = conn.session
        txn = Transaction(conn.db, write=False)
        try:
            schema = conn.db.find_table("t")
            assert schema is not None
            needed = (Privilege.INSERT, Privilege.SELECT, Privilege.UPDATE)
            start = time.perf_counter()
            for _ in range(calls):
                session.require(txn, schema, *needed)
            return (time.perf_counter() - start) / calls
        finally:
            txn.rollback()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="privileges-bench-"))
    try:
        db = root / "db"
        with changefeed.connect(db) as conn:
            for s in (
                "CREATE TABLE t (k INT8 PRIMARY KEY, v STRING)",
                "CREATE ROLE writers",
                "GRANT INSERT, SELECT, UPDATE ON TABLE t TO writers",
                "CREATE USER w",
                "GRANT writers TO w",
            ):
                conn.execute(s)
        checked = Session.require
        off: Callable[..., Any] = lambda self, txn, table, *needed: None  # noqa: E731
        best: dict[str, float] = {}
        key = 0
        configs = [
            ("checks off", "root", off),
            ("root (admin)", "root", checked),
            ("granted user", "w", checked),
        ]
        run(db, "root", -args.rows, args.rows)  # warm up (caches, WAL)
        for r in range(args.repeat):
            for name, user, require in configs[r % 3 :] + configs[: r % 3]:  # rotate the order
                Session.require = require  # type: ignore[method-assign]
                try:
                    rate = run(db, user, key, args.rows)
                finally:
                    Session.require = checked  # type: ignore[method-assign]
                key += args.rows
                best[name] = max(best.get(name, 0.0), rate)
        base = best["checks off"]
        print(f"single-row UPSERT transactions, {args.rows} rows, best of {args.repeat}")
        for name, rate in best.items():
            print(f"  {name:<14} {rate:>9,.0f} rows/s   ratio {rate / base:.3f}")
        check = check_cost(db)
        print(
            f"one UPSERT's check alone: {check * 1e6:.2f} us = {check * base * 100:.2f}% of a single-row"
            f" write ({1e6 / base:.0f} us)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
