"""``GET /metrics``: the Prometheus text format (0.0.4) with CockroachDB's changefeed metric names.

Families are ``prometheus_client`` metric families; the pipeline's counters and histograms come
from :class:`~changefeed.observe.Metrics`, the gauges that describe state (``changefeed_running``,
``changefeed_max_behind_nanos``, high-water progress, jobs by status) from
:func:`changefeed.feeds.status.statuses` at scrape time, so ``/metrics``, ``changefeed feeds`` and
``SHOW CHANGEFEED JOBS`` agree. Counters keep CockroachDB's names (``changefeed_emitted_messages``,
no ``_total`` suffix: what CockroachDB's ``/_status/vars`` serves and dashboards built for it
query). The process's own figures (``process_cpu_seconds_total``, resident memory, open files)
come from ``prometheus_client``'s process collector.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from prometheus_client import ProcessCollector
from prometheus_client.metrics_core import Metric

from changefeed.feeds import jobs as J
from changefeed.feeds.status import FeedStatus
from changefeed.observe.metrics import FeedFigures, Histogram, Metrics

_INF = float("inf")


def _fmt(v: float) -> str:
    """A sample value as Prometheus (and prometheus_client) write it: ``5.0``, ``+Inf``, ``NaN``."""
    v = float(v)
    if v != v:
        return "NaN"
    if v in (_INF, -_INF):
        return "+Inf" if v > 0 else "-Inf"
    if v.is_integer() and abs(v) < 1e15:
        return f"{int(v)}.0"
    return repr(v)


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("changefeed_emitted_messages", "emitted_messages", "Messages emitted by all feeds"),
    ("changefeed_emitted_bytes", "emitted_bytes", "Bytes emitted by all feeds"),
    (
        "changefeed_flushed_bytes",
        "emitted_bytes",
        "Bytes emitted by all feeds; maybe different from changefeed.emitted_bytes when compression is enabled",
    ),
    ("changefeed_flushes", "flushes", "Total flushes across all feeds"),
    ("changefeed_error_retries", "error_retries", "Total retryable errors encountered by all changefeeds"),
    ("changefeed_failures", "failures", "Total number of changefeed jobs which have failed"),
)
_HISTOGRAMS: tuple[tuple[str, str, str], ...] = (
    (
        "changefeed_commit_latency",
        "commit_latency",
        "Event commit latency: a difference between event MVCC timestamp and the time it was "
        "acknowledged by the downstream sink",
    ),
    (
        "changefeed_sink_batch_hist_nanos",
        "batch_hist",
        "Time spent batched in the sink buffer before being flushed and acknowledged",
    ),
    ("changefeed_emitted_batch_sizes", "batch_sizes", "Size of batches emitted emitted by all feeds"),
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Text:
    """The text format written family by family (a counter keeps its name as given: no
    ``_total``); label strings are made once per feed, not once per sample."""

    def __init__(self) -> None:
        self.out: list[str] = []

    def family(self, name: str, doc: str, typ: str) -> None:
        doc = doc.replace("\\", "\\\\").replace("\n", "\\n")
        self.out.append(f"# HELP {name} {doc}\n# TYPE {name} {typ}\n")

    def sample(self, name: str, labels: str, value: float) -> None:
        self.out.append(f"{name}{{{labels}}} {_fmt(value)}\n" if labels else f"{name} {_fmt(value)}\n")

    def histogram(self, name: str, labels: str, h: Histogram) -> None:
        sep = "," if labels else ""
        for le, count in h.cumulative():
            self.out.append(f'{name}_bucket{{{labels}{sep}le="{le}"}} {_fmt(float(count))}\n')
        self.sample(name + "_sum", labels, float(h.total))
        self.sample(name + "_count", labels, float(h.n))

    def metrics(self, families: Iterable[Metric]) -> None:
        """``prometheus_client`` families (the process collector's)."""
        for m in families:
            self.family(m.name, m.documentation, "untyped" if m.type == "unknown" else m.type)
            for smp in m.samples:
                if smp.name.endswith("_created"):
                    continue
                labels = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(smp.labels.items()))
                self.sample(smp.name, labels, smp.value)

    def bytes(self) -> bytes:
        return "".join(self.out).encode()


def _lag(st: FeedStatus) -> float:
    return float(st.lag_ns)


def _high_water(st: FeedStatus) -> float:
    return float(st.high_water.wall)


def pipeline_text(t: Text, figures: dict[str, FeedFigures], statuses: Sequence[FeedStatus]) -> None:
    """Per feed label: counters and histograms from ``figures``; state gauges from ``statuses``
    (every feed and job of the database, whether or not it emitted in this process)."""
    by_label = {s.label: s for s in statuses}
    labels = sorted(set(by_label) | set(figures))
    lab = {label: f'feed="{_escape(label)}"' for label in labels}
    empty = FeedFigures()

    def scanning(st: FeedStatus | None) -> bool:
        return st is not None and st.scan is not None and st.scan.get("scanned") != st.scan.get("total")

    t.family("changefeed_running", "Number of currently running changefeeds, including sinkless", "gauge")
    for label in labels:
        st = by_label.get(label)
        active = st is not None and st.held and st.state in ("running", "scanning")
        t.sample("changefeed_running", lab[label], 1.0 if active else 0.0)
    for name, attr, doc in _COUNTERS:
        t.family(name, doc, "counter")
        for label in labels:
            t.sample(name, lab[label], float(getattr(figures.get(label, empty), attr)))
    for name, attr, doc in _HISTOGRAMS:
        t.family(name, doc, "histogram")
        for label in labels:
            t.histogram(name, lab[label], getattr(figures.get(label, empty), attr))
    gauges: tuple[tuple[str, str, Callable[[FeedStatus], float]], ...] = (
        (
            "changefeed_max_behind_nanos",
            "The most any changefeed's persisted checkpoint is behind the present",
            _lag,
        ),
        (
            "changefeed_aggregator_progress",
            "The earliest timestamp up to which any aggregator is guaranteed to have emitted all values for",
            _high_water,
        ),
        (
            "changefeed_checkpoint_progress",
            "The earliest timestamp of any changefeed's persisted checkpoint (values prior to this "
            "timestamp will never need to be re-emitted)",
            _high_water,
        ),
    )
    for name, doc, value in gauges:
        t.family(name, doc, "gauge")
        for label in labels:
            st = by_label.get(label)
            if st is not None:
                t.sample(name, lab[label], value(st))
    t.family("changefeed_backfill_count", "Number of changefeeds currently executing backfill", "gauge")
    for label in labels:
        fig = figures.get(label, empty)
        busy = scanning(by_label.get(label)) or fig.backfill_pending_ranges > 0
        t.sample("changefeed_backfill_count", lab[label], 1.0 if busy else 0.0)
    t.family(
        "changefeed_backfill_pending_ranges",
        "Number of ranges in an ongoing backfill that are yet to be fully emitted",
        "gauge",
    )
    for label in labels:
        st = by_label.get(label)
        ranges = figures.get(label, empty).backfill_pending_ranges
        if not ranges and st is not None and st.scan is not None and scanning(st):
            ranges = max(0, int(st.scan.get("total", 0)) - int(st.scan.get("scanned", 0)))
        t.sample("changefeed_backfill_pending_ranges", lab[label], float(ranges))
    jobs = [s for s in statuses if s.kind == "crdb job"]
    for status, name, doc in (
        (
            J.RUNNING,
            "jobs_changefeed_currently_running",
            "Number of changefeed jobs currently running in Resume or OnFailOrCancel state",
        ),
        (
            J.PAUSED,
            "jobs_changefeed_currently_paused",
            "Number of changefeed jobs currently considered Paused",
        ),
    ):
        t.family(name, doc, "gauge")
        t.sample(name, "", float(sum(1 for s in jobs if s.state == status)))


def endpoint_text(t: Text, metrics: Metrics) -> None:
    """The endpoints' own counters, by ``endpoint`` label."""
    eps = metrics.endpoint_snapshot()
    for name, attr, typ, doc in (
        ("endpoint_connections", "connections", "gauge", "Connections open now"),
        ("endpoint_new_connections", "connections_total", "counter", "Connections accepted"),
        (
            "endpoint_requests",
            "requests",
            "counter",
            "Requests served (statements, Kafka requests, HTTP requests)",
        ),
        (
            "endpoint_errors",
            "errors",
            "counter",
            "Requests answered with an error and connections closed for a protocol error",
        ),
    ):
        t.family(name, doc, typ)
        for ep in sorted(eps):
            t.sample(name, f'endpoint="{_escape(ep)}"', float(getattr(eps[ep], attr)))


def process_families() -> list[Metric]:
    return list(ProcessCollector(registry=None).collect())
