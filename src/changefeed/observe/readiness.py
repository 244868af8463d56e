"""Whether a node is ready: every endpoint listens and the pipeline runs (``/health?ready=1``)."""

from __future__ import annotations

import threading

__all__ = ["Readiness"]


class Readiness:
    """Named parts a node waits for; ready once every expected part said so and none said not."""

    def __init__(self, expected: tuple[str, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._parts: dict[str, tuple[bool, str]] = {name: (False, "starting") for name in expected}

    def expect(self, name: str) -> None:
        with self._lock:
            self._parts.setdefault(name, (False, "starting"))

    def set(self, name: str, ready: bool, why: str = "") -> None:
        with self._lock:
            self._parts[name] = (ready, why or ("ready" if ready else "not ready"))

    def ready(self) -> bool:
        with self._lock:
            return bool(self._parts) and all(r for r, _ in self._parts.values())

    def parts(self) -> dict[str, tuple[bool, str]]:
        with self._lock:
            return dict(self._parts)

    def not_ready(self) -> list[str]:
        """``name: why`` of each part that is not ready."""
        with self._lock:
            return [f"{n}: {w}" for n, (r, w) in sorted(self._parts.items()) if not r]
