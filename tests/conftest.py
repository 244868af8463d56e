"""Shared fixtures. One Spark session serves the whole test run (it costs ~8 s to start)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    pytest.importorskip("pyspark")
    from changefeed.pipeline.spark.session import get_spark

    session = get_spark("changefeed-tests")
    yield session
    session.stop()
