"""What every check returns: a :class:`Report` of :class:`Violation` s per check, with counters."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_KEPT", "Report", "Violation"]

MAX_KEPT = 50  # violations kept per check (all are counted)


@dataclass(frozen=True)
class Violation:
    check: str
    key: Any
    detail: str

    def __str__(self) -> str:
        return f"[{self.check}] key={self.key!r}: {self.detail}"


@dataclass
class Report:
    """Violations found, per check, plus counters of what was looked at."""

    violations: list[Violation] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    stats: dict[str, int] = field(default_factory=dict)

    def add(self, check: str, key: Any, detail: str) -> None:
        self.counts[check] += 1
        if self.counts[check] <= MAX_KEPT:
            self.violations.append(Violation(check, key, detail))

    def merge(self, other: Report) -> Report:
        self.violations.extend(other.violations)
        self.counts.update(other.counts)
        self.stats.update(other.stats)
        return self

    @property
    def ok(self) -> bool:
        return not self.counts

    def of(self, check: str) -> list[Violation]:
        return [v for v in self.violations if v.check == check]

    def __bool__(self) -> bool:  # truthy when there are violations, like a non-empty list
        return not self.ok

    def __str__(self) -> str:
        if self.ok:
            return f"no violations ({', '.join(f'{k}={v}' for k, v in sorted(self.stats.items()))})"
        lines = [
            f"{sum(self.counts.values())} violation(s): "
            + ", ".join(f"{k}={v}" for k, v in sorted(self.counts.items()))
        ]
        lines += [f"  {v}" for v in self.violations[:40]]
        return "\n".join(lines)
