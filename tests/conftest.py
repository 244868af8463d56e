"""Shared fixtures. One Spark session serves the whole test run (it costs ~8 s to start)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from changefeed.testing.kafka_broker import KafkaBroker


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from changefeed.pipeline.spark.session import get_spark

    session = get_spark("changefeed-tests")
    yield session
    session.stop()


#: SASL users of the test broker: ``admin`` is a super user, ``alice`` gets ACLs from the tests
#: that need them, ``bob`` never has any (his requests get TOPIC_AUTHORIZATION_FAILED).
KAFKA_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """Apache Kafka 4.4 (KRaft, one node) shared by the whole test run: PLAINTEXT, SASL_PLAINTEXT
    (SCRAM-SHA-256/512, PLAIN), SSL and SASL_SSL listeners on free loopback ports, the
    StandardAuthorizer, auto-created topics with 3 partitions, retention checked every second
    (as the conformance suite's endpoint checks it) and, unless a topic sets ``retention.ms``,
    none: the sink tests write records stamped years ago, which Kafka's default of 7 days would
    delete at the next check. Fails loudly when `make setup` did not fetch the jars."""
    from changefeed.testing.kafka_broker import KafkaBroker, TlsFiles
    from tests.sink_servers import make_ca

    ca = make_ca()
    broker = KafkaBroker(
        tmp_path_factory.mktemp("kafka-broker"),
        users=KAFKA_USERS,
        tls=TlsFiles(ca.cert_pem, ca.key_pem, ca.ca_pem),
        partitions=3,
        extra={
            "log.retention.check.interval.ms": "1000",
            "log.initial.task.delay.ms": "1000",
            "log.retention.ms": "-1",
        },
    )
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A skipped test fails: a tool or library a test needs is installed by ``make setup``, and a
    test that cannot run says so loudly instead of passing by absence."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped, which this suite does not allow (run make setup): {report.longrepr}"
