"""The commit clock: one strictly increasing timestamp per transaction (DESIGN.md principle 4).

A :class:`CommitTs` is a hybrid logical clock reading: wall-clock nanoseconds plus a logical
counter that breaks ties when the wall clock stands still or goes back. The last value handed out
is persisted in the database inside the writing transaction, so every process agrees and
timestamps never go backwards across restarts. Every other timestamp form derives from it.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol


class WallClock(Protocol):
    """Where wall time comes from; injected so tests can drive time."""

    def now_ns(self) -> int: ...


class SystemClock:
    def now_ns(self) -> int:
        return time.time_ns()


@dataclass(frozen=True, slots=True, order=True)
class CommitTs:
    wall: int  # nanoseconds since the Unix epoch
    logical: int = 0

    def next(self, now_wall: int) -> CommitTs:
        """The smallest reading strictly greater than self and not earlier than ``now_wall``."""
        if now_wall > self.wall:
            return CommitTs(now_wall, 0)
        return CommitTs(self.wall, self.logical + 1)

    # ------------------------------------------------------------------ derived forms
    def crdb(self) -> str:
        """CockroachDB's HLC decimal: ``<wall ns>.<logical, 10 digits>``."""
        return f"{self.wall}.{self.logical:010d}"

    @staticmethod
    def parse_crdb(text: str) -> CommitTs:
        """Parse ``1536242855577149065.0000000000`` (or a bare nanosecond integer)."""
        s = text.strip()
        if "." in s:
            wall, logical = s.split(".", 1)
            return CommitTs(int(wall), int(logical or "0"))
        d = Decimal(s)
        return CommitTs(int(d), 0)

    @property
    def millis(self) -> int:
        return self.wall // 1_000_000

    def ydb(self, tx_id: int) -> tuple[int, int]:
        """YDB's virtual timestamp ``[step, txId]``: step is the coordinator time in ms."""
        return (self.millis, tx_id)

    def timeuuid(self, tiebreak: int = 0) -> uuid.UUID:
        """ScyllaDB ``cdc$time``: a version-1 UUID carrying this time (100 ns ticks).

        Its lower half orders as ScyllaDB compares timeuuids (timestamp, then the low eight bytes
        as signed bytes): the nanoseconds below the tick, the logical counter, then ``tiebreak``
        (40 bits; the CDC log passes bits of the partition token, so two partitions written by one
        transaction get two distinct times, as ScyllaDB gives each base partition its own).
        :func:`timeuuid_key` is that order; :func:`from_timeuuid` reads the reading back."""
        ticks = self.wall // 100 + GREGORIAN_OFFSET
        low = (self.wall % 100) << 55 | min(self.logical, _LOGICAL_MAX) << 40 | (tiebreak & _TIEBREAK_MASK)
        return uuid.UUID(int=(_msb(ticks) << 64) | _lsb(low))


#: 100 ns intervals between 1582-10-15 (the UUID epoch) and 1970-01-01.
GREGORIAN_OFFSET = 0x01B21DD213814000
_LOGICAL_MAX = (1 << 15) - 1
_TIEBREAK_MASK = (1 << 40) - 1
_FLIP = 0x0080_8080_8080_8080  # bytes 9-15 stored with their top bit flipped (signed order)


def _msb(ticks: int) -> int:
    """time_low, time_mid, version 1 + time_hi."""
    return (ticks & 0xFFFFFFFF) << 32 | ((ticks >> 32) & 0xFFFF) << 16 | 0x1000 | ((ticks >> 48) & 0x0FFF)


def _lsb(value: int) -> int:
    """62 bits laid out so that comparing the eight bytes as signed bytes orders by ``value``:
    byte 8 is the variant (10) and the top 6 bits, bytes 9-15 the rest with the top bit flipped."""
    return (0x80 | (value >> 56) & 0x3F) << 56 | ((value & ((1 << 56) - 1)) ^ _FLIP)


def timeuuid_ticks(u: uuid.UUID) -> int:
    """The 60-bit timestamp of a version-1 UUID (100 ns since 1582-10-15)."""
    return int(u.time)


def timeuuid_bound(ms: int, *, upper: bool) -> uuid.UUID:
    """CQL's ``minTimeuuid``/``maxTimeuuid``: the smallest (largest) timeuuid of millisecond
    ``ms`` in ScyllaDB's order (:func:`timeuuid_key`): the tick the millisecond starts at (the
    last of it), the low bytes all signed-minimum ``0x80`` (all signed-maximum ``0x7f``)."""
    ticks = ms * 10_000 + GREGORIAN_OFFSET + (9_999 if upper else 0)
    return uuid.UUID(int=(_msb(ticks) << 64) | (0x7F7F_7F7F_7F7F_7F7F if upper else 0x8080_8080_8080_8080))


def timeuuid_key(u: uuid.UUID) -> tuple[int, int]:
    """How ScyllaDB orders timeuuids: timestamp, then the low eight bytes as signed bytes (as an
    integer: each byte's top bit flipped). For :meth:`CommitTs.timeuuid` values the second part is
    exactly the 62 bits it packed (sub-tick nanoseconds, logical counter, tiebreak)."""
    n = u.int
    ticks = ((n >> 64) & 0x0FFF) << 48 | ((n >> 80) & 0xFFFF) << 32 | (n >> 96)
    return ticks, (n & 0xFFFF_FFFF_FFFF_FFFF) ^ 0x8080_8080_8080_8080


def from_timeuuid(u: uuid.UUID) -> tuple[CommitTs, int] | None:
    """The commit reading and tiebreak a ``cdc$time`` of :meth:`CommitTs.timeuuid` carries, or None
    for a timeuuid this clock did not make."""
    if u.version != 1:
        return None
    low = u.int & ((1 << 64) - 1)
    if low >> 62 != 0b10:
        return None
    value = ((low >> 56) & 0x3F) << 56 | ((low & ((1 << 56) - 1)) ^ _FLIP)
    sub = value >> 55
    if sub >= 100:
        return None
    wall = (u.time - GREGORIAN_OFFSET) * 100 + sub
    return CommitTs(wall, (value >> 40) & _LOGICAL_MAX), value & _TIEBREAK_MASK


ZERO = CommitTs(0, 0)
