"""The Apache Phoenix CDC loop on Spark: a CDC object's changes, exactly once, into a Spark sink.

``python -m changefeed.pipeline.phoenix_loop --db DIR --cdc NAME --out PATH --checkpoint CK``
reads ``format("phoenix-cdc")`` as a stream (micro-batches are successive time ranges ending
``--safety-ms`` behind now) and writes it with Spark's own file sink (Parquet by default), whose
checkpoint and metadata log make delivery exactly once across crashes: a restarted query replays
the last uncommitted time range, which holds the same rows. ``--until-idle`` delivers everything
safe to read at start (``Trigger.AvailableNow``) and exits 0; otherwise it runs until Ctrl-C or
SIGTERM.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from changefeed.stop_signals import stop_on_signals


def start_stream(
    spark: Any,
    db: str | Path,
    cdc: str,
    out: str | Path,
    checkpoint: str | Path,
    *,
    safety_ms: int = 1000,
    trigger_ms: int = 1000,
    until_idle: bool = False,
    fmt: str = "parquet",
    include: str | None = None,
) -> Any:
    """Start the streaming query; returns Spark's ``StreamingQuery``."""
    reader = (
        spark.readStream.format("phoenix-cdc")
        .option("path", str(Path(db).absolute()))
        .option("cdc", cdc)
        .option("safetyMarginMs", str(safety_ms))
    )
    if include is not None:
        reader = reader.option("include", include)
    writer = (
        reader.load()
        .writeStream.format(fmt)
        .option("path", str(Path(out).absolute()))
        .option("checkpointLocation", str(Path(checkpoint).absolute()))
        .outputMode("append")
    )
    writer = (
        writer.trigger(availableNow=True)
        if until_idle
        else writer.trigger(processingTime=f"{trigger_ms} milliseconds")
    )
    return writer.start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m changefeed.pipeline.phoenix_loop", description=__doc__)
    parser.add_argument("--db", required=True)
    parser.add_argument("--cdc", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--format", default="parquet")
    parser.add_argument("--include")
    parser.add_argument("--safety-ms", type=int, default=1000)
    parser.add_argument("--trigger-ms", type=int, default=1000)
    parser.add_argument("--until-idle", action="store_true")
    args = parser.parse_args(argv)
    from changefeed.pipeline.spark.session import get_spark

    spark = get_spark("changefeed-phoenix-cdc")
    query = start_stream(
        spark,
        args.db,
        args.cdc,
        args.out,
        args.checkpoint,
        safety_ms=args.safety_ms,
        trigger_ms=args.trigger_ms,
        until_idle=args.until_idle,
        fmt=args.format,
        include=args.include,
    )

    with stop_on_signals(query.stop):  # Ctrl-C or SIGTERM: the query stops, awaitTermination returns
        query.awaitTermination()
    exc = query.exception()
    if exc is not None:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
