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
from typing import cast

from prometheus_client import ProcessCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from changefeed.feeds import jobs as J
from changefeed.feeds.status import FeedStatus
from changefeed.observe.metrics import FeedFigures, Histogram, Metrics

#: prometheus_client's float rendering (``+Inf``, ``1000.0``), typed
_fmt = cast(Callable[[float], str], floatToGoString)

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


def render(families: Iterable[Metric]) -> bytes:
    """The text format, each family under its own name (a counter keeps its name as given)."""
    out: list[str] = []
    for m in families:
        mtype = "untyped" if m.type == "unknown" else m.type
        doc = m.documentation.replace("\\", "\\\\").replace("\n", "\\n")
        out.append(f"# HELP {m.name} {doc}\n# TYPE {m.name} {mtype}\n")
        for s in m.samples:
            if s.name.endswith("_created"):
                continue
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(s.labels.items()))
            out.append(f"{s.name}{{{labels}}} {_fmt(s.value)}\n" if labels else f"{s.name} {_fmt(s.value)}\n")
    return "".join(out).encode()


def _family(name: str, doc: str, typ: str) -> Metric:
    return Metric(name, doc, typ)


def _add_histogram(m: Metric, labels: dict[str, str], h: Histogram) -> None:
    for le, count in h.cumulative():
        m.add_sample(m.name + "_bucket", {**labels, "le": le}, float(count))
    m.add_sample(m.name + "_sum", labels, float(h.total))
    m.add_sample(m.name + "_count", labels, float(h.n))


def pipeline_families(figures: dict[str, FeedFigures], statuses: Sequence[FeedStatus]) -> list[Metric]:
    """Per feed label: counters and histograms from ``figures``; state gauges from ``statuses``
    (every feed and job of the database, whether or not it emitted in this process)."""
    labels = sorted({s.label for s in statuses} | set(figures))
    empty = FeedFigures()
    fams: list[Metric] = []
    running = _family(
        "changefeed_running", "Number of currently running changefeeds, including sinkless", "gauge"
    )
    behind = _family(
        "changefeed_max_behind_nanos",
        "The most any changefeed's persisted checkpoint is behind the present",
        "gauge",
    )
    aggregator = _family(
        "changefeed_aggregator_progress",
        "The earliest timestamp up to which any aggregator is guaranteed to have emitted all values for",
        "gauge",
    )
    checkpoint = _family(
        "changefeed_checkpoint_progress",
        "The earliest timestamp of any changefeed's persisted checkpoint (values prior to this timestamp will never need to be re-emitted)",
        "gauge",
    )
    backfill = _family(
        "changefeed_backfill_count", "Number of changefeeds currently executing backfill", "gauge"
    )
    pending = _family(
        "changefeed_backfill_pending_ranges",
        "Number of ranges in an ongoing backfill that are yet to be fully emitted",
        "gauge",
    )
    by_label = {s.label: s for s in statuses}
    for label in labels:
        lab = {"feed": label}
        st = by_label.get(label)
        fig = figures.get(label, empty)
        active = st is not None and st.held and st.state in ("running", "scanning")
        running.add_sample("changefeed_running", lab, 1.0 if active else 0.0)
        if st is not None:
            behind.add_sample("changefeed_max_behind_nanos", lab, float(st.lag_ns))
            aggregator.add_sample("changefeed_aggregator_progress", lab, float(st.high_water.wall))
            checkpoint.add_sample("changefeed_checkpoint_progress", lab, float(st.high_water.wall))
        scanning = st is not None and st.scan is not None and st.scan.get("scanned") != st.scan.get("total")
        backfill.add_sample(
            "changefeed_backfill_count", lab, 1.0 if scanning or fig.backfill_pending_ranges else 0.0
        )
        ranges = fig.backfill_pending_ranges
        if not ranges and scanning and st is not None and st.scan is not None:
            ranges = max(0, int(st.scan.get("total", 0)) - int(st.scan.get("scanned", 0)))
        pending.add_sample("changefeed_backfill_pending_ranges", lab, float(ranges))
    fams += [running]
    for name, attr, doc in _COUNTERS:
        m = _family(name, doc, "counter")
        for label in labels:
            m.add_sample(name, {"feed": label}, float(getattr(figures.get(label, empty), attr)))
        fams.append(m)
    for name, attr, doc in _HISTOGRAMS:
        m = _family(name, doc, "histogram")
        for label in labels:
            _add_histogram(m, {"feed": label}, getattr(figures.get(label, empty), attr))
        fams.append(m)
    fams += [behind, aggregator, checkpoint, backfill, pending]
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
        g = _family(name, doc, "gauge")
        g.add_sample(name, {}, float(sum(1 for s in jobs if s.state == status)))
        fams.append(g)
    return fams


def endpoint_families(metrics: Metrics) -> list[Metric]:
    """The endpoints' own counters, by ``endpoint`` label."""
    eps = metrics.endpoint_snapshot()
    spec = (
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
    )
    fams = []
    for name, attr, typ, doc in spec:
        m = _family(name, doc, typ)
        for ep in sorted(eps):
            m.add_sample(name, {"endpoint": ep}, float(getattr(eps[ep], attr)))
        fams.append(m)
    return fams


def process_families() -> list[Metric]:
    return list(ProcessCollector(registry=None).collect())
