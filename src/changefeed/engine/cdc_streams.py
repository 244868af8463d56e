"""ScyllaDB's CDC streams and generations for this one-node store.

ScyllaDB splits the token ring into vnodes and, for each vnode and shard, creates one CDC
*stream*: a 16-byte id whose first eight bytes are a token inside that vnode (the log table's
partitioner places the stream there) and whose last eight bytes hold the stream-id version (1),
the vnode's index and random bits. A *generation* is the set of streams in force from a time on;
it is published in ``system_distributed.cdc_generation_timestamps`` and
``system_distributed.cdc_streams_descriptions_v2`` (one row per vnode: its range end and its
streams). A write to a base partition goes to the log partition of the stream of the vnode and
shard that own the partition's token.

This store is one node with one shard and :data:`VNODES` evenly spaced tokens, so there is one
stream per vnode and one generation, created with the database (or, for a database made before
streams existed, at the time of its first logged change). Partition tokens are the engine's own
64-bit partition hash (``engine.storage.token``), and they map to streams as ScyllaDB maps its
tokens: the vnode ``(t[i-1], t[i]]`` that contains the token, vnode 0 wrapping around the ring.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from functools import lru_cache

#: Vnodes of the single node (a power of two: the vnode of a token is one shift).
VNODES = 16
_SHIFT = 64 - VNODES.bit_length() + 1
#: The node's tokens: the end of each vnode, evenly spaced, the last one the largest token.
TOKENS: tuple[int, ...] = tuple(-(1 << 63) + (i + 1) * (1 << _SHIFT) - 1 for i in range(VNODES))
#: SQL over a log row's ``tok`` giving its vnode index.
VNODE_SQL = f"((tok >> {_SHIFT}) + {VNODES // 2})"
#: The stream-id version ScyllaDB writes in bits 0-3 of the low half.
STREAM_ID_VERSION = 1
#: The ``_meta`` key holding the generation's start (milliseconds since the epoch).
GENERATION_KEY = "cdc_generation_ms"


def vnode_of(tok: int) -> int:
    """The index of the vnode ``(TOKENS[i-1], TOKENS[i]]`` containing partition token ``tok``."""
    return (tok >> _SHIFT) + VNODES // 2


def stream_token(index: int) -> int:
    """The token a vnode's stream carries: the first token of the vnode (its single shard's)."""
    return -(1 << 63) + 1 if index == 0 else TOKENS[index - 1] + 1


@dataclass(frozen=True, slots=True)
class Generation:
    """The streams in force from ``time_ms`` on; ``streams[i]`` is vnode i's stream id."""

    time_ms: int
    streams: tuple[bytes, ...]

    def index_of(self, stream: bytes) -> int | None:
        try:
            return self.streams.index(stream)
        except ValueError:
            return None


@lru_cache(maxsize=64)
def generation_at(time_ms: int) -> Generation:
    """The generation that starts at ``time_ms``. ScyllaDB fills 38 bits of each id at random; here
    they are a fixed function of the vnode, so every database (and every restart) has the same
    ids for the one generation it ever has."""
    streams = []
    for i in range(VNODES):
        seed = hashlib.blake2b(f"changefeed-cdc-stream:{i}".encode(), digest_size=8).digest()
        random = int.from_bytes(seed, "big") & ((1 << 38) - 1)
        low = STREAM_ID_VERSION | i << 4 | random << 26
        token = stream_token(i)
        streams.append(token.to_bytes(8, "big", signed=True) + low.to_bytes(8, "big"))
    return Generation(time_ms, tuple(streams))


def generation(conn: sqlite3.Connection) -> Generation | None:
    """The database's generation, or None when it has none yet (see :func:`ensure_generation`)."""
    row = conn.execute("SELECT value FROM _meta WHERE key = ?", (GENERATION_KEY,)).fetchone()
    return None if row is None else generation_at(int(row[0]))


def ensure_generation(conn: sqlite3.Connection, now_ms: int, earliest_ms: int | None) -> Generation:
    """Inside a write transaction: the generation, created when missing. It starts at the first
    logged change (``earliest_ms``) when there is one, so no logged change predates its streams."""
    found = generation(conn)
    if found is not None:
        return found
    start = now_ms if earliest_ms is None else min(now_ms, earliest_ms)
    conn.execute("INSERT OR IGNORE INTO _meta (key, value) VALUES (?, ?)", (GENERATION_KEY, start))
    made = generation(conn)
    assert made is not None
    return made
