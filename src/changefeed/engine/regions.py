"""The region of a key: which of a table's regions (salt buckets, partitions) a row belongs to.

Apache Phoenix salts a table's row keys with one byte, a hash of the key, so a salted table is
pre-split into one region per salt bucket; Phoenix 5.3 partitions its CDC index by those regions
(``PARTITION_ID()``). Here a key's region is the same kind of function: a hash of its storage
values, tagged by type, modulo the region count. It is registered on every engine connection as
the SQLite function ``cf_region(n, key...)`` so the time index computes it at commit.
"""

from __future__ import annotations

import sqlite3
import struct
from typing import Any

import xxhash

SEED = 0x5A17


def region_of(regions: int, *key: Any) -> int:
    """The region of a key (its storage values): a hash of the values, tagged by type, modulo
    ``regions``. Deterministic across processes and versions; SQLite calls it ``cf_region``."""
    h = xxhash.xxh64(seed=SEED)
    for v in key:
        if v is None:
            h.update(b"\x00")
        elif isinstance(v, int):
            h.update(
                b"\x01" + struct.pack(">q", v) if -(1 << 63) <= v < 1 << 63 else b"\x05" + str(v).encode()
            )
        elif isinstance(v, float):
            h.update(b"\x02" + struct.pack(">d", v))
        elif isinstance(v, str):
            b = v.encode()
            h.update(b"\x03" + struct.pack(">I", len(b)) + b)
        else:
            b = bytes(v)
            h.update(b"\x04" + struct.pack(">I", len(b)) + b)
    return h.intdigest() % max(1, int(regions))


def register_functions(conn: sqlite3.Connection) -> None:
    """SQLite functions the engine's SQL needs (every engine connection has them)."""
    conn.create_function("cf_region", -1, region_of, deterministic=True)


__all__ = ["SEED", "region_of", "register_functions"]
