"""The figures the pipeline and the endpoints report, kept in memory for ``/metrics`` and the console.

Two small faces, one per reporter:

* :class:`PipelineMetrics`: what a feed's delivery reports (messages and bytes emitted with their
  commit timestamps, retries, failures, backfills, whether it runs). The pipeline calls it; it
  never learns who listens.
* :class:`EndpointMetrics`: what a network endpoint reports (connections, requests, errors).

:class:`Metrics` implements both. Its figures are CockroachDB's changefeed metrics (``pkg/ccl/
changefeedccl/metrics.go``: ``changefeed.emitted_messages``, ``changefeed.commit_latency``, ...),
kept per feed label (a YDB feed's topic, a CockroachDB job's id), plus a one-hour history of
throughput and lag sampled every :data:`SAMPLE_S` seconds for the console's plots. Histograms are
bucketed in nanoseconds as CockroachDB exports them; a micro-batch's messages are bucketed in one
numpy call, not one observation per message.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = [
    "COMMIT_LATENCY_BUCKETS_NS",
    "HISTORY_S",
    "NULL_ENDPOINT_METRICS",
    "NULL_PIPELINE_METRICS",
    "SAMPLE_S",
    "EndpointMetrics",
    "FeedFigures",
    "Histogram",
    "Metrics",
    "PipelineMetrics",
    "default_metrics",
]

#: Seconds between two points of the console's history, and how much history is kept.
SAMPLE_S = 5.0
HISTORY_S = 3600.0

_MS = 1_000_000
_S = 1_000_000_000
#: ``changefeed.commit_latency``: commit to acknowledged by the sink (CockroachDB: up to 10 min).
COMMIT_LATENCY_BUCKETS_NS: tuple[int, ...] = (
    *(x * _MS for x in (1, 2, 5, 10, 25, 50, 100, 250, 500)),
    *(x * _S for x in (1, 2, 5, 10, 30, 60, 120, 300, 600)),
)
#: ``changefeed.batch_hist_nanos``: one micro-batch's delivery (CockroachDB: up to 30 s).
BATCH_BUCKETS_NS: tuple[int, ...] = (
    *(x * _MS for x in (1, 5, 10, 25, 50, 100, 250, 500)),
    *(x * _S for x in (1, 2, 5, 10, 30)),
)
#: ``changefeed.emitted_batch_sizes``: messages per emitted batch.
BATCH_SIZE_BUCKETS: tuple[int, ...] = (1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)


class PipelineMetrics(Protocol):
    """What the pipeline reports about each feed, by its label (see :func:`feed_label`)."""

    def feed_running(self, feed: str, running: bool) -> None:
        """The feed's delivery started (True) or stopped (False) in this process."""
        ...

    def emitted(self, feed: str, messages: int, nbytes: int, oldest_ns: int | None, batch_ns: int) -> None:
        """A micro-batch was durably delivered: ``messages`` messages of ``nbytes`` key and value
        bytes, the oldest committed at ``oldest_ns`` (wall ns; its commit-to-acknowledged time is
        the batch's ``changefeed.commit_latency``, as CockroachDB records it per emitted batch),
        after ``batch_ns`` of delivery work."""
        ...

    def resolved(self, feed: str, messages: int) -> None:
        """Resolved-timestamp messages were emitted."""
        ...

    def retried(self, feed: str) -> None:
        """A retryable error: the feed's delivery restarts (``changefeed.error_retries``)."""
        ...

    def failed(self, feed: str) -> None:
        """A non-retryable error ended the feed's job (``changefeed.failures``)."""
        ...

    def backfill(self, feed: str, pending_ranges: int) -> None:
        """An initial scan or schema-change backfill has this many key ranges left (0: done)."""
        ...


class EndpointMetrics(Protocol):
    """What a network endpoint reports, by endpoint name (``pg``, ``kafka``, ``registry``, ...)."""

    def connection_opened(self, endpoint: str) -> None: ...

    def connection_closed(self, endpoint: str) -> None: ...

    def request(self, endpoint: str) -> None:
        """One request served (a statement, a Kafka request, an HTTP request)."""
        ...

    def error(self, endpoint: str) -> None:
        """One request answered with an error, or a connection closed for a protocol error."""
        ...


class _NullPipeline:
    def feed_running(self, feed: str, running: bool) -> None:
        pass

    def emitted(self, feed: str, messages: int, nbytes: int, oldest_ns: int | None, batch_ns: int) -> None:
        pass

    def resolved(self, feed: str, messages: int) -> None:
        pass

    def retried(self, feed: str) -> None:
        pass

    def failed(self, feed: str) -> None:
        pass

    def backfill(self, feed: str, pending_ranges: int) -> None:
        pass


class _NullEndpoint:
    def connection_opened(self, endpoint: str) -> None:
        pass

    def connection_closed(self, endpoint: str) -> None:
        pass

    def request(self, endpoint: str) -> None:
        pass

    def error(self, endpoint: str) -> None:
        pass


NULL_PIPELINE_METRICS: PipelineMetrics = _NullPipeline()
NULL_ENDPOINT_METRICS: EndpointMetrics = _NullEndpoint()


@dataclass
class Histogram:
    """Cumulative-on-export bucket counts over fixed upper bounds (Prometheus ``le``)."""

    bounds: tuple[int, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)  # the last: above every bound (+Inf)

    def observe_many(self, values: Any) -> None:
        arr = np.asarray(values, dtype=np.float64)
        if arr.size == 0:
            return
        idx = np.searchsorted(np.asarray(self.bounds, dtype=np.float64), arr, side="left")
        for i, c in enumerate(np.bincount(idx, minlength=len(self.counts)).tolist()):
            self.counts[i] += int(c)
        self.total += float(arr.sum())
        self.n += int(arr.size)

    def observe(self, value: float) -> None:
        self.observe_many([value])

    def cumulative(self) -> list[tuple[str, int]]:
        """``[(le, count of values <= le), ..., ("+Inf", n)]``."""
        out, run = [], 0
        for b, c in zip(self.bounds, self.counts, strict=False):
            run += c
            out.append((str(float(b)), run))
        out.append(("+Inf", self.n))
        return out

    def quantile(self, q: float) -> float | None:
        """An upper bound of the q-quantile (the bucket it falls in), None without data."""
        if not self.n:
            return None
        want, run = q * self.n, 0
        for b, c in zip(self.bounds, self.counts, strict=False):
            run += c
            if run >= want:
                return float(b)
        return float("inf")


@dataclass
class FeedFigures:
    """Everything counted for one feed label since this process started."""

    emitted_messages: int = 0
    emitted_bytes: int = 0
    resolved_messages: int = 0
    flushes: int = 0
    error_retries: int = 0
    failures: int = 0
    running: bool = False
    backfill_pending_ranges: int = 0
    last_emit_ns: int = 0
    commit_latency: Histogram = field(default_factory=lambda: Histogram(COMMIT_LATENCY_BUCKETS_NS))
    batch_hist: Histogram = field(default_factory=lambda: Histogram(BATCH_BUCKETS_NS))
    batch_sizes: Histogram = field(default_factory=lambda: Histogram(BATCH_SIZE_BUCKETS))
    #: (unix seconds, messages emitted during the interval, lag in seconds or None) per sample
    history: deque[tuple[float, int, float | None]] = field(
        default_factory=lambda: deque(maxlen=int(HISTORY_S / SAMPLE_S) + 1)
    )
    sampled_messages: int = 0


@dataclass
class EndpointFigures:
    connections: int = 0  # open now
    connections_total: int = 0
    requests: int = 0
    errors: int = 0


class Metrics:
    """The process's figures: implements :class:`PipelineMetrics` and :class:`EndpointMetrics`.

    Thread-safe (the pipeline reports from its thread, the endpoints from the event loop, the
    http endpoint reads from the event loop's executor). ``clock`` returns wall ns (injected)."""

    def __init__(self, clock: Callable[[], int] = time.time_ns) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self.feeds: dict[str, FeedFigures] = {}
        self.endpoints: dict[str, EndpointFigures] = {}
        self.started_ns = clock()

    # -- PipelineMetrics ---------------------------------------------------------------------
    def _feed(self, feed: str) -> FeedFigures:
        f = self.feeds.get(feed)
        if f is None:
            f = self.feeds[feed] = FeedFigures()
        return f

    def feed_running(self, feed: str, running: bool) -> None:
        with self._lock:
            self._feed(feed).running = running

    def emitted(self, feed: str, messages: int, nbytes: int, oldest_ns: int | None, batch_ns: int) -> None:
        now = self.clock()
        with self._lock:
            f = self._feed(feed)
            f.emitted_messages += int(messages)
            f.emitted_bytes += int(nbytes)
            f.flushes += 1
            f.last_emit_ns = now
            if oldest_ns is not None:
                f.commit_latency.observe(float(max(0, now - oldest_ns)))
            f.batch_hist.observe(float(max(batch_ns, 0)))
            f.batch_sizes.observe(float(messages))

    def resolved(self, feed: str, messages: int) -> None:
        with self._lock:
            self._feed(feed).resolved_messages += int(messages)

    def retried(self, feed: str) -> None:
        with self._lock:
            self._feed(feed).error_retries += 1

    def failed(self, feed: str) -> None:
        with self._lock:
            f = self._feed(feed)
            f.failures += 1
            f.running = False

    def backfill(self, feed: str, pending_ranges: int) -> None:
        with self._lock:
            self._feed(feed).backfill_pending_ranges = max(0, int(pending_ranges))

    # -- EndpointMetrics ---------------------------------------------------------------------
    def _endpoint(self, endpoint: str) -> EndpointFigures:
        e = self.endpoints.get(endpoint)
        if e is None:
            e = self.endpoints[endpoint] = EndpointFigures()
        return e

    def connection_opened(self, endpoint: str) -> None:
        with self._lock:
            e = self._endpoint(endpoint)
            e.connections += 1
            e.connections_total += 1

    def connection_closed(self, endpoint: str) -> None:
        with self._lock:
            e = self._endpoint(endpoint)
            e.connections = max(0, e.connections - 1)

    def request(self, endpoint: str) -> None:
        with self._lock:
            self._endpoint(endpoint).requests += 1

    def error(self, endpoint: str) -> None:
        with self._lock:
            self._endpoint(endpoint).errors += 1

    # -- reading -----------------------------------------------------------------------------
    def sample(self, lags: dict[str, float | None]) -> None:
        """Append one history point per feed: messages since the last sample and the lag now
        (``lags``: label -> seconds behind, None when unknown). Feeds absent from ``lags`` and
        with nothing emitted get no point."""
        t = self.clock() / 1e9
        with self._lock:
            for label in set(lags) | set(self.feeds):
                f = self._feed(label)
                delta = f.emitted_messages - f.sampled_messages
                f.sampled_messages = f.emitted_messages
                f.history.append((t, delta, lags.get(label)))

    def snapshot(self) -> dict[str, FeedFigures]:
        """A copy of every feed's figures (histograms and history copied too)."""
        with self._lock:
            out = {}
            for label, f in self.feeds.items():
                c = FeedFigures(
                    emitted_messages=f.emitted_messages,
                    emitted_bytes=f.emitted_bytes,
                    resolved_messages=f.resolved_messages,
                    flushes=f.flushes,
                    error_retries=f.error_retries,
                    failures=f.failures,
                    running=f.running,
                    backfill_pending_ranges=f.backfill_pending_ranges,
                    last_emit_ns=f.last_emit_ns,
                    commit_latency=_copy(f.commit_latency),
                    batch_hist=_copy(f.batch_hist),
                    batch_sizes=_copy(f.batch_sizes),
                    history=deque(f.history, maxlen=f.history.maxlen),
                    sampled_messages=f.sampled_messages,
                )
                out[label] = c
            return out

    def endpoint_snapshot(self) -> dict[str, EndpointFigures]:
        with self._lock:
            return {k: EndpointFigures(**vars(v)) for k, v in self.endpoints.items()}

    def forget(self, labels: Iterable[str]) -> None:
        """Drop the figures of feeds that no longer exist."""
        with self._lock:
            for label in labels:
                self.feeds.pop(label, None)


def _copy(h: Histogram) -> Histogram:
    return Histogram(h.bounds, list(h.counts), h.total, h.n)


_default: Metrics | None = None
_default_lock = threading.Lock()


def default_metrics() -> Metrics:
    """The process's :class:`Metrics` (one per process, as a Prometheus client's registry is)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Metrics()
        return _default
