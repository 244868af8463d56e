"""``changefeed read``: print the records of an embedded topic.

Positioning is Kafka-like: without ``--from-beginning`` and without a committed group offset the
reader starts at the end (prints only records appended from now on, i.e. nothing unless
``--follow``). Without ``--follow`` it prints what is there and exits 0.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
from contextlib import suppress
from pathlib import Path
from typing import Any

import click

from changefeed.engine.database import Database
from changefeed.engine.privileges import ROOT, check_login, check_topic_read
from changefeed.exceptions import ChangefeedError
from changefeed.feeds.store import all_feeds
from changefeed.stop_signals import stop_on_signals
from changefeed.topics.consumer import Consumer
from changefeed.topics.store import Record, TopicStore

__all__ = ["format_record", "read"]

_BATCH = 1000
_FOLLOW_WAIT_S = 0.25  # a poll's longest wait while following: how soon Ctrl-C or SIGTERM ends it


def _text(data: bytes | None) -> str:
    if data is None:
        return "null"
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


def _json_or_base64(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return base64.b64encode(data).decode("ascii")


def format_record(rec: Record, as_json: bool) -> str:
    """One output line (without newline) for ``rec``."""
    if not as_json:
        return f"{rec.partition}:{rec.offset} {_text(rec.key)} {_text(rec.value)}"
    obj = {
        "topic": rec.topic,
        "partition": rec.partition,
        "offset": rec.offset,
        "key": _json_or_base64(rec.key),
        "value": _json_or_base64(rec.value),
        "ts": rec.ts,
    }
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


@click.command("read")
@click.option("--db", "db_dir", required=True, metavar="DIR", help="Database directory.")
@click.argument("topic")
@click.option(
    "--from-beginning", is_flag=True, help="Start at the earliest available offset (else at the end)."
)
@click.option(
    "--partition",
    "partitions",
    type=int,
    multiple=True,
    metavar="N",
    help="Read only partition N (repeatable; default: all partitions).",
)
@click.option(
    "--group",
    metavar="G",
    help="Consumer group: resume at its committed offsets and commit after printing.",
)
@click.option("--follow", is_flag=True, help="Keep waiting for new records until Ctrl-C or SIGTERM.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='One JSON object per record: {"topic","partition","offset","key","value","ts"}; key and value '
    "are the message parsed as JSON when it is UTF-8 JSON, else base64.",
)
@click.option("--max", "max_records", type=click.IntRange(min=1), metavar="N", help="Stop after N records.")
@click.option(
    "--user",
    default="root",
    show_default=True,
    help="Read as this user: it needs SELECT or CHANGEFEED on the tables of the feed writing TOPIC.",
)
def read(
    db_dir: str,
    topic: str,
    from_beginning: bool,
    partitions: tuple[int, ...],
    group: str | None,
    follow: bool,
    as_json: bool,
    max_records: int | None,
    user: str,
) -> None:
    """Print the records of TOPIC, one line each: PARTITION:OFFSET KEY VALUE (UTF-8 text, or base64
    when not UTF-8; a missing key prints as null)."""
    try:
        check_reader(db_dir, topic, user)
        _run(db_dir, topic, from_beginning, list(partitions) or None, group, follow, as_json, max_records)
    except ChangefeedError as exc:
        click.echo(f"ERROR: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:  # Ctrl-C before following starts, or a second one while it stops
        sys.exit(0)
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        with suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)


def check_reader(db_dir: str, topic: str, user: str) -> None:
    """Raise PermissionDenied unless ``user`` may read ``topic`` (root always may)."""
    if user == ROOT:
        return
    db = Database(Path(db_dir))
    try:
        check_login(db.conn, user)
        db.refresh_catalog()
        tables = [db.table_by_id(f.spec.table_id) for f in all_feeds(db.conn) if f.spec.topic == topic]
        check_topic_read(db.conn, user, topic, tables)
    finally:
        db.close()


def _run(
    db_dir: str,
    topic: str,
    from_beginning: bool,
    partitions: list[int] | None,
    group: str | None,
    follow: bool,
    as_json: bool,
    max_records: int | None,
) -> None:
    store = TopicStore(db_dir)
    consumer = Consumer(store, topic, group=group, partitions=partitions, from_beginning=from_beginning)
    left = max_records
    out = sys.stdout

    def emit(recs: list[Record]) -> None:
        nonlocal left
        if not recs:
            return
        out.write("".join(format_record(r, as_json) + "\n" for r in recs))
        out.flush()
        if group is not None:
            consumer.commit()
        if left is not None:
            left -= len(recs)

    with consumer:
        if not follow:
            # Everything present when we started, then exit (even if writers keep appending).
            snapshot = store.offsets(topic)
            while left is None or left > 0:
                recs = consumer.poll(_BATCH if left is None else min(_BATCH, left))
                emit(recs)
                if not recs or consumer.caught_up(snapshot):
                    break
            return
        stopped = threading.Event()
        with stop_on_signals(stopped.set):  # Ctrl-C or SIGTERM: stop after the records in hand
            while (left is None or left > 0) and not stopped.is_set():
                emit(consumer.poll(_BATCH if left is None else min(_BATCH, left), timeout=_FOLLOW_WAIT_S))


if __name__ == "__main__":  # pragma: no cover - standalone use: python -m changefeed.cli.read_cmd
    read()
