"""Ctrl-C and SIGTERM as a request to stop, never as an exception raised at a random bytecode.

Python runs a signal handler in the main thread between two bytecodes, wherever that thread is.
A handler that raises (``KeyboardInterrupt``) can land inside ``threading.Condition.wait`` after
the lock was released and before it was taken back, so the ``with`` block then fails with
``RuntimeError: release unlocked lock`` instead of ending cleanly; one that calls
``threading.Event.set()`` can deadlock on the event's own lock when the main thread was holding
it. :func:`stop_on_signals` does neither: the handler only writes a byte to a pipe, and a helper
thread reads it and calls ``stop()`` in ordinary thread context. A second signal, for a user who
presses Ctrl-C again because the stop is slow, raises ``KeyboardInterrupt`` as Python would.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

#: The signals that mean "stop" to a command that runs until told to
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)

_WAKE = b"s"  # a signal arrived
_QUIT = b"q"  # the block ended: the helper thread exits


@contextlib.contextmanager
def stop_on_signals(
    stop: Callable[[], None], signals: tuple[signal.Signals, ...] = STOP_SIGNALS
) -> Iterator[None]:
    """Within the block, the first of ``signals`` calls ``stop()`` (from a helper thread); the
    handlers before it are restored on the way out. Outside the main thread, where Python allows
    no handlers, the block runs without any."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    seen = 0

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal seen
        seen += 1
        if seen > 1:
            raise KeyboardInterrupt
        with contextlib.suppress(OSError):
            os.write(write_fd, _WAKE)

    def watch() -> None:
        while True:
            byte = os.read(read_fd, 1)
            if byte != _WAKE:
                return
            stop()

    watcher = threading.Thread(target=watch, name="stop-signals", daemon=True)
    watcher.start()
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        os.write(write_fd, _QUIT)
        watcher.join()
        os.close(read_fd)
        os.close(write_fd)


__all__ = ["STOP_SIGNALS", "stop_on_signals"]
