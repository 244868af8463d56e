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

    def timeuuid(self, node: int = 0x0000_5C_DC_00_00) -> uuid.UUID:
        """ScyllaDB ``cdc$time``: a version-1 UUID carrying this time (100 ns resolution)."""
        ticks = self.wall // 100 + 0x01B21DD213814000
        clock_seq = self.logical & 0x3FFF
        time_low = ticks & 0xFFFFFFFF
        time_mid = (ticks >> 32) & 0xFFFF
        time_hi = (ticks >> 48) & 0x0FFF
        return uuid.UUID(
            fields=(time_low, time_mid, time_hi | 0x1000, 0x80 | (clock_seq >> 8), clock_seq & 0xFF, node)
        )


ZERO = CommitTs(0, 0)
