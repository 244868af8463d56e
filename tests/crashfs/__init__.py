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
