"""What the pipeline and the endpoints report about themselves, below both in the layering.

The pipeline calls a :class:`~changefeed.observe.metrics.PipelineMetrics` and the endpoints an
:class:`~changefeed.observe.metrics.EndpointMetrics`; a node (``changefeed start``) serves what
they report on its http endpoint (``/metrics``, the console), ``changefeed run`` shows it on the
terminal. Neither side imports the other: both import this package.
"""

from __future__ import annotations

from changefeed.observe.metrics import (
    NULL_ENDPOINT_METRICS,
    NULL_PIPELINE_METRICS,
    EndpointMetrics,
    Metrics,
    PipelineMetrics,
    default_metrics,
)
from changefeed.observe.readiness import Readiness

__all__ = [
    "NULL_ENDPOINT_METRICS",
    "NULL_PIPELINE_METRICS",
    "EndpointMetrics",
    "Metrics",
    "PipelineMetrics",
    "Readiness",
    "default_metrics",
]
