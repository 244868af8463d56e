"""YDB changefeed barriers (issue 20): ``BARRIERS_INTERVAL`` on ADD CHANGEFEED, with
``RESOLVED_TIMESTAMPS`` its older name; ``{"resolved":[step,0]}`` with the step a whole number of
intervals (YDB's ``AdjustVersion``), so feeds with one interval put their barriers on the same steps."""

from __future__ import annotations

from pathlib import Path

import pytest

import changefeed
from changefeed.engine.clock import CommitTs
from changefeed.exceptions import InvalidOption
from changefeed.feeds.spec import barrier_of
from changefeed.feeds.store import all_feeds


@pytest.mark.parametrize(
    ("option", "ns"),
    [
        ("BARRIERS_INTERVAL = Interval('PT10S')", 10_000_000_000),
        ('RESOLVED_TIMESTAMPS = Interval("PT1S")', 1_000_000_000),
        ("BARRIERS_INTERVAL = Interval('PT0.05S')", 50_000_000),
        ("barriers_interval = Interval('PT0.001S')", 1_000_000),
    ],
)
def test_barriers_interval_option(tmp_path: Path, option: str, ns: int) -> None:
    c = changefeed.connect(tmp_path / "db")
    c.execute("CREATE TABLE series (id Uint64, v Utf8, PRIMARY KEY (id))")
    c.execute(
        f"ALTER TABLE `series` ADD CHANGEFEED `updates_feed` WITH (FORMAT = 'JSON', MODE = 'UPDATES',"
        f" VIRTUAL_TIMESTAMPS = TRUE, {option})"
    )
    (feed,) = all_feeds(c.db.conn)
    assert feed.spec.resolved_ns == ns
    c.close()


@pytest.mark.parametrize(
    ("option", "text"),
    [
        (
            "BARRIERS_INTERVAL = Interval('PT0.0001S')",
            "BARRIERS_INTERVAL must be an interval of at least 1 millisecond",
        ),
        (
            "BARRIERS_INTERVAL = Interval('-PT1S')",
            "BARRIERS_INTERVAL must be an interval of at least 1 millisecond",
        ),
        ("BARRIERS_INTERVAL = 'often'", "changefeed option BARRIERS_INTERVAL takes an Interval"),
        (
            "BARRIERS_INTERVAL = Interval('PT1S'), RESOLVED_TIMESTAMPS = Interval('PT1S')",
            "BARRIERS_INTERVAL and RESOLVED_TIMESTAMPS are one option",
        ),
    ],
)
def test_bad_barriers_interval(tmp_path: Path, option: str, text: str) -> None:
    c = changefeed.connect(tmp_path / "db")
    c.execute("CREATE TABLE series (id Uint64, v Utf8, PRIMARY KEY (id))")
    with pytest.raises(InvalidOption, match=__import__("re").escape(text)):
        c.execute(f"ALTER TABLE series ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES', {option})")
    assert all_feeds(c.db.conn) == []
    c.close()


def test_barrier_of_rounds_down_to_the_interval() -> None:
    ms = 1_000_000
    assert barrier_of(CommitTs(1670792509_999 * ms + 5, 3), 10_000 * ms) == CommitTs(1670792500_000 * ms, 0)
    assert barrier_of(CommitTs(1670792500_000 * ms, 0), 10_000 * ms) == CommitTs(1670792500_000 * ms, 0)
    assert barrier_of(CommitTs(1670792500_123 * ms + 999, 7), ms) == CommitTs(1670792500_123 * ms, 0)
    # two closes an interval apart never share a barrier
    a, b = CommitTs(1000 * ms + 999, 0), CommitTs(1050 * ms + 999, 0)
    assert barrier_of(a, 50 * ms) < barrier_of(b, 50 * ms)
