"""The pipeline a node (``changefeed start``) runs in its own thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from changefeed.observe import Metrics


def run_node(db: Path, *, stop: threading.Event, metrics: Metrics, on_ready: Callable[[], None]) -> None:
    """Deliver every feed of ``db`` continuously until ``stop`` is set (the node holds the lock)."""
    from changefeed.pipeline import runner

    runner.run_forever(db, stop=stop, install_signals=False, claim_lock=False, on_ready=on_ready)
