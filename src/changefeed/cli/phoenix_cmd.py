"""``changefeed cdc-poll``: the Apache Phoenix CDC application loop of the PHOENIX-7001 design.

It runs the CDC query for successive time ranges ``[from, end)`` where ``end`` is the safety
margin ``s`` (``--safety-ms``, default 1,000 ms) behind the clock and never past a closed
timestamp, printing each change once, as soon as it is safe to read; then it sleeps until the
next range is due. ``--until`` stops after that time (exit 0); without it the loop runs until
Ctrl-C or SIGTERM (exit 0). Rows print as ``PHOENIX_ROW_TIMESTAMP()<TAB>key...<TAB>CDC JSON``, or
with ``--json`` one object per change keyed by the CDC table's column names.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from changefeed.cli.render import error_line
from changefeed.engine import phoenix
from changefeed.engine.database import Database
from changefeed.exceptions import ChangefeedError, InvalidOption, PhoenixTableUndefined
from changefeed.formats import phoenix_batch, phoenix_json
from changefeed.stop_signals import stop_on_signals

__all__ = ["cdc_poll", "poll"]


def _fmt_ts(v: dt.datetime) -> str:
    """Phoenix's display format for DATE: ``yyyy-MM-dd HH:mm:ss.SSS`` (GMT)."""
    return v.strftime("%Y-%m-%d %H:%M:%S.") + f"{v.microsecond // 1000:03d}"


def poll(
    db: Database,
    name: str,
    *,
    start_ms: int | None,
    until_ms: int | None = None,
    scopes: frozenset[str] | None = None,
    safety_ms: int = 1000,
    interval_ms: int = 1000,
    sleep: Callable[[float], bool | None] = time.sleep,
) -> Iterator[tuple[Any, ...]]:
    """CDC rows of CDC object ``name`` from ``start_ms`` (default: its creation), each once, in
    change order, as their time ranges become safe to read, pausing ``sleep(interval)`` between
    polls; a ``sleep`` that returns True (``threading.Event.wait`` once set) ends the rows."""
    db.refresh_catalog()
    table = phoenix.find_cdc_table(db.tables(), name)
    if table is None:
        raise PhoenixTableUndefined(f" tableName={name}")
    cdc = phoenix.cdc_of(table)
    assert cdc is not None
    lo = cdc.created_ms if start_ms is None else start_ms
    if until_ms is not None and until_ms < lo:
        raise InvalidOption(f"--until is before --from: the time range is reversed ({lo} > {until_ms})")
    chosen = frozenset(cdc.include) if scopes is None else scopes
    while True:
        hi = phoenix.safe_upper_ms(db, safety_ms)
        if until_ms is not None:
            hi = min(hi, until_ms)
        if hi > lo:
            with db.lock:
                db.conn.execute("BEGIN")
                try:
                    rows = list(phoenix_batch.cdc_rows(db.conn, table, chosen, lo, hi))
                finally:
                    db.conn.execute("ROLLBACK")
            yield from rows
            lo = hi
        if until_ms is not None and lo >= until_ms:
            return
        if sleep(interval_ms / 1000):  # a ``threading.Event.wait`` that returns True: stop
            return


def _time(text: str | None, option: str) -> int | None:
    if text is None:
        return None
    from changefeed.pipeline.sources.phoenix import parse_time

    return parse_time(option, text)


@click.command("cdc-poll")
@click.option(
    "--db",
    "db_dir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Database directory.",
)
@click.argument("cdc")
@click.option(
    "--from", "start", help="Start time: epoch ms or a TO_DATE string (GMT); default: the CDC's creation."
)
@click.option("--until", "until", help="Stop at this time (exclusive), then exit 0.")
@click.option("--include", help="Change scopes, e.g. PRE,POST,CHANGE (the CDC_INCLUDE hint).")
@click.option("--safety-ms", default=1000, show_default=True, help="The safety margin s behind the clock.")
@click.option("--interval-ms", default=1000, show_default=True, help="Pause between polls.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per change.")
def cdc_poll(
    db_dir: Path,
    cdc: str,
    start: str | None,
    until: str | None,
    include: str | None,
    safety_ms: int,
    interval_ms: int,
    as_json: bool,
) -> None:
    """Poll Apache Phoenix CDC object CDC from a time on, printing changes as they become safe to read."""
    try:
        scopes = phoenix_json.parse_scopes(include.split(",")) if include is not None else None
    except ValueError as exc:
        click.echo(f"ERROR: unknown change scope {exc}; use PRE, POST, CHANGE", err=True)
        raise SystemExit(1) from None

    try:
        db = Database(db_dir, create=False)
    except ChangefeedError as exc:
        click.echo(error_line(exc), err=True)
        raise SystemExit(1) from None
    try:
        db.refresh_catalog()
        table = phoenix.find_cdc_table(db.tables(), cdc)
        keys = [c.name for c in table.key] if table is not None else []
        names = [phoenix_json.ROW_TIMESTAMP, *keys, phoenix_json.CDC_JSON]
        stopped = threading.Event()
        rows = poll(
            db,
            cdc,
            start_ms=_time(start, "--from"),
            until_ms=_time(until, "--until"),
            scopes=scopes,
            safety_ms=safety_ms,
            interval_ms=interval_ms,
            sleep=stopped.wait,
        )
        with stop_on_signals(stopped.set):  # Ctrl-C or SIGTERM: stop at the next pause, exit 0
            for row in rows:
                shown = [_fmt_ts(row[0]), *row[1:]]
                if as_json:
                    obj = dict(zip(names, shown, strict=True))
                    obj[phoenix_json.CDC_JSON] = json.loads(row[-1])
                    click.echo(json.dumps(obj, default=str, separators=(",", ":")))
                else:
                    click.echo("\t".join(str(x) for x in shown))
    except KeyboardInterrupt:
        pass
    except ChangefeedError as exc:
        click.echo(error_line(exc), err=True)
        raise SystemExit(1) from None
    finally:
        db.close()


def render_sqlline(result: Any) -> str:
    """A result as Phoenix's sqlline prints it: a boxed table, headers centred, DATE values as
    ``yyyy-MM-dd HH:mm:ss.SSS``, then ``N rows selected``."""

    def cell(v: Any) -> str:
        if v is None:
            return "null"
        if isinstance(v, dt.datetime):
            return _fmt_ts(v)
        if isinstance(v, bool):
            return "true" if v else "false"
        return str(v)

    rows = [[cell(v) for v in r] for r in result.rows]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(result.columns)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    head = "|" + "|".join(f" {h.center(w)} " for h, w in zip(result.columns, widths, strict=True)) + "|"
    body = ["|" + "|".join(f" {v.ljust(w)} " for v, w in zip(r, widths, strict=True)) + "|" for r in rows]
    n = len(rows)
    return "\n".join([rule, head, rule, *body, rule, f"{n} row{'' if n == 1 else 's'} selected"])
