"""Registry of changefeed's PySpark Python data sources (each module adds itself here)."""

from __future__ import annotations

from typing import Any


def all_sources() -> list[type[Any]]:
    """Every DataSource class to register on a session. Imports are lazy (pyspark is optional)."""
    found: list[type[Any]] = []
    try:
        from changefeed.pipeline.sources.topics import TopicDataSource
    except ImportError:  # pragma: no cover - module not written yet
        pass
    else:
        found.append(TopicDataSource)
    try:
        from changefeed.pipeline.sources.journal import JournalDataSource
    except ImportError:  # pragma: no cover - module not written yet
        pass
    else:
        found.append(JournalDataSource)
    try:  # Apache Phoenix CDC (issue 11)
        from changefeed.pipeline.sources.phoenix import PhoenixCdcDataSource
    except ImportError:  # pragma: no cover
        pass
    else:
        found.append(PhoenixCdcDataSource)
    return found
