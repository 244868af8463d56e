"""A clock the Phoenix tests move by hand (``Connection(clock=...)``), starting at ``START_NS``."""

from __future__ import annotations

MS = 1_000_000
START_NS = 1_716_890_130_123 * MS


class Clock:
    def __init__(self) -> None:
        self.now = START_NS

    def now_ns(self) -> int:
        return self.now
