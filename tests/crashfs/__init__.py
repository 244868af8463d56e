"""Power loss below the file system, for crash-consistency tests.

``crashfs.c`` (an LD_PRELOAD shim, built here with the machine's C compiler into ``build/``) logs
every write, truncate, unlink and sync that a process (and every process it starts, which
inherit the shim and append to the same log) makes to files under one directory.
:func:`power_loss` rebuilds from that log what a disk would hold if power had failed when the
log ends: every operation on a file logged before the *start* of that file's last completed
sync survives (what another thread or process wrote while the sync ran may not be on disk);
each later one survives or not at random, independently (the disk may have written back some
of what was not synced, in any order), or none of them (``keep=0``).
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import changefeed
from changefeed.pipeline.baseline import deliver_all
from changefeed.testing.validators import check_change_stream, validate_feed

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).resolve().parent / "crashfs.c"
LIBRARY = ROOT / "build" / "crashfs.so"


def build() -> Path:
    """Compile the shim (once; again when its source is newer). Fails loudly without a compiler."""
    if LIBRARY.exists() and LIBRARY.stat().st_mtime >= SOURCE.stat().st_mtime:
        return LIBRARY
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("crash tests need a C compiler (cc): `make setup` installs gcc")
    LIBRARY.parent.mkdir(parents=True, exist_ok=True)
    tmp = LIBRARY.with_suffix(f".{os.getpid()}.so")
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O2", "-o", str(tmp), str(SOURCE), "-ldl", "-lpthread"], check=True
    )
    tmp.replace(LIBRARY)
    return LIBRARY


def environment(directory: Path, log: Path) -> dict[str, str]:
    """Environment variables that run a child process under the shim, tracking ``directory``.
    The log's directory is made here: a process that cannot open the log logs nothing."""
    log.parent.mkdir(parents=True, exist_ok=True)
    return {
        "LD_PRELOAD": str(build()),
        "CRASHFS_DIR": os.path.realpath(directory),
        "CRASHFS_LOG": str(log),
    }


@dataclass(frozen=True)
class Op:
    kind: str  # W(rite), T(runcate), B(egin sync), S(ync done), U(nlink)
    path: str
    at: int  # W: offset; T: length
    data: bytes


def read_log(log: Path) -> list[Op]:
    """The log's records; a record cut off by the kill (the log's tail) is left out."""
    raw = log.read_bytes() if log.exists() else b""
    ops: list[Op] = []
    i = 0
    while i + 5 <= len(raw):
        kind = chr(raw[i])
        (plen,) = struct.unpack_from("<I", raw, i + 1)
        j = i + 5 + plen
        if j + 16 > len(raw):
            break
        path = raw[i + 5 : j].decode()
        at, n = struct.unpack_from("<qq", raw, j)
        j += 16
        data = b""
        if kind == "W":
            if j + n > len(raw):
                break
            data = raw[j : j + n]
            j += n
        ops.append(Op(kind, path, at, data))
        i = j
    return ops


def power_loss(log: Path, source: Path, target: Path, *, keep: float = 0.5, seed: int = 0) -> dict[str, int]:
    """Rebuild under ``target`` the files of ``source`` (the tracked directory, which started
    empty) as they would be after a power loss at the end of ``log``. Returns counts: operations
    replayed, and unsynced ones kept and dropped."""
    rng = random.Random(seed)
    ops = read_log(log)
    last_sync: dict[str, int] = {}
    begun: dict[int, int] = {}  # a sync's token -> where it began
    for n, op in enumerate(ops):
        if op.kind == "B":
            begun[op.at] = n
        elif op.kind == "S":
            # what was logged before the sync began is durable (not what came while it ran)
            last_sync[op.path] = max(last_sync.get(op.path, -1), begun.get(op.at, n))
    files: dict[str, bytearray] = {}
    stats = {"ops": len(ops), "kept": 0, "dropped": 0}
    for n, op in enumerate(ops):
        if op.kind in ("B", "S"):
            continue
        if op.kind == "U":
            files.pop(op.path, None)
            continue
        if n > last_sync.get(op.path, -1):
            if rng.random() >= keep:
                stats["dropped"] += 1
                continue
            stats["kept"] += 1
        content = files.setdefault(op.path, bytearray())
        if op.kind == "W":
            end = op.at + len(op.data)
            if len(content) < end:
                content.extend(b"\0" * (end - len(content)))
            content[op.at : end] = op.data
        elif op.kind == "T":
            del content[op.at :]
    root = os.path.realpath(source)
    for path, content in files.items():
        rel = os.path.relpath(path, root)
        out = target / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(bytes(content))
    return stats


def check_ledger_workload(db: Path, acked: set[int], writers: int, *, single_below: int = 0) -> None:
    """Check a database rebuilt by :func:`power_loss` after the crash tests' workload.

    The workload's transactions, each with an id ``tid``: a *block* writes ``ledger (tid, w)``,
    rows ``t (tid * 3 + j, tid)`` for j < 3 and sets its writer's counter row ``t (-1 - w)`` to
    ``tid``; a *single* (ids below ``single_below``) writes one row ``t (tid * 3, tid)``. Every
    acknowledged transaction must be present, every block whole, every counter at its writer's
    last block; the change stream must replay to the table, and the YDB changefeed ``t/f``,
    delivered over what is left, must pass the exactly-once, order and image validators."""
    with changefeed.connect(db) as conn:
        ledger = {r[0]: r[1] for r in conn.execute("SELECT id, w FROM ledger").rows}
        rows = dict(conn.execute("SELECT k, v FROM t").rows)
        present = set(ledger) | {v for k, v in rows.items() if 0 <= v < single_below and k == v * 3}
        missing = sorted(acked - present)
        assert not missing, f"{len(missing)} acknowledged commits lost, e.g. {missing[:5]}"
        for tid in ledger:
            got = [rows.get(tid * 3 + j) for j in range(3)]
            assert got == [tid] * 3, f"transaction {tid} half-applied: rows {got}"
        for k, v in rows.items():
            if k >= 0 and v >= single_below:
                assert v in ledger and k // 3 == v, f"row {k} of transaction {v} without its ledger row"
        for w in range(writers):
            mine = [tid for tid, ww in ledger.items() if ww == w]
            assert rows[-1 - w] == (max(mine) if mine else -1), f"counter of writer {w}"
        report = check_change_stream(conn, "t")
        assert report.ok, str(report)
    deliver_all(db, batch_rows=1000)
    report = validate_feed(db, "t/f")
    assert report.ok, str(report)
