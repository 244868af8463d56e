"""CockroachDB's webhook sink: HTTPS POSTs of message batches, retried until acknowledged.

One request per batch: ``{"payload":[m1,m2,...],"length":N}`` with the encoded messages copied
as they are (CSV: the records, one per line, ``text/csv``); a resolved timestamp is its own POST
whose body is the bare resolved message. Batches are cut by ``webhook_sink_config``'s
``Flush.Messages`` and ``Flush.Bytes`` (both zero, CockroachDB's default: one message per
request); a micro-batch's records always go out before ``append`` returns, so
``Flush.Frequency`` never holds messages back.

Delivery is at least once and in per-key order: a topic partition's records (every key lives in
one partition) are sent one request after the other, each retried on any failure (non-2xx
status, time-out, refused connection) with exponential back-off (``Retry.Backoff`` doubling up
to 30 s, ``Retry.Max`` retries, ``inf`` for ever) before the next is sent. When the retries are
exhausted the append raises, the micro-batch fails before its checkpoint is written, and the job
replays it: duplicates come only from replayed or retried requests, nothing is dropped.
Partitions are sent in parallel, one per Spark task.
"""

from __future__ import annotations

import gzip
import os
import ssl
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any

import httpx

from changefeed.exceptions import SinkError
from changefeed.feeds.sinks import INFINITE_RETRIES, MAX_RETRY_BACKOFF_NS, RETRY_MULTIPLIER, WebhookConfig
from changefeed.pipeline.sinks.base import SinkWriter

if TYPE_CHECKING:
    import pyarrow as pa

    from changefeed.engine.clock import CommitTs

_CLIENTS: dict[WebhookConfig, httpx.Client] = {}
_LOCK = threading.Lock()


def _ssl_context(cfg: WebhookConfig) -> ssl.SSLContext | bool:
    if cfg.insecure_tls_skip_verify:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif cfg.ca_cert is not None:
        ctx = ssl.create_default_context(cadata=cfg.ca_cert.decode())
    else:
        ctx = ssl.create_default_context()
    if cfg.client_cert is not None and cfg.client_key is not None:
        with tempfile.TemporaryDirectory() as d:
            cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
            with open(cert, "wb") as f:
                f.write(cfg.client_cert)
            with open(key, "wb") as f:
                f.write(cfg.client_key)
            ctx.load_cert_chain(cert, key)
    return ctx


def client_for(cfg: WebhookConfig) -> httpx.Client:
    """One keep-alive HTTPS client per sink configuration and process."""
    with _LOCK:
        c = _CLIENTS.get(cfg)
        if c is None:
            c = httpx.Client(verify=_ssl_context(cfg), timeout=cfg.client_timeout_s)
            _CLIENTS[cfg] = c
        return c


def batch_body(values: list[bytes], csv: bool = False) -> bytes:
    """The request body of a batch of encoded messages, as CockroachDB's webhook sink writes it."""
    if csv:
        return b"".join(v + b"\n" for v in values)
    return b'{"payload":[' + b",".join(values) + b'],"length":' + str(len(values)).encode() + b"}"


class WebhookWriter(SinkWriter):
    def __init__(self, config: WebhookConfig) -> None:
        self.config = config

    # ------------------------------------------------------------------ batching
    def batches(self, values: list[bytes]) -> list[list[bytes]]:
        cfg = self.config
        if cfg.flush_messages <= 0 and cfg.flush_bytes <= 0:
            return [[v] for v in values]
        out: list[list[bytes]] = []
        cur: list[bytes] = []
        size = 0
        for v in values:
            cur.append(v)
            size += len(v)
            if (cfg.flush_messages > 0 and len(cur) >= cfg.flush_messages) or (
                cfg.flush_bytes > 0 and size >= cfg.flush_bytes
            ):
                out.append(cur)
                cur, size = [], 0
        if cur:
            out.append(cur)
        return out

    # ------------------------------------------------------------------ SinkWriter
    def append(self, topic: str, partition: int, writer: str, batch_id: int, records: pa.Table) -> None:
        keys = records.column("key").to_pylist()
        values = [v for k, v in zip(keys, records.column("value").to_pylist(), strict=True) if k is not None]
        for batch in self.batches(values):
            self.post(batch_body(batch, self.config.csv))

    def emit_resolved(self, topic: str, writer: str, batch_id: int, payload: bytes, ts: CommitTs) -> None:
        self.post(payload, resolved=True)

    # ------------------------------------------------------------------ HTTP
    def headers(self) -> dict[str, str]:
        cfg = self.config
        h = {"Content-Type": "text/csv" if cfg.csv else "application/json"}
        if cfg.auth_header is not None:
            h["Authorization"] = cfg.auth_header
        if cfg.compression is not None:
            h["Content-Encoding"] = cfg.compression
            h["Accept-Encoding"] = cfg.compression
        return h

    def compress(self, body: bytes) -> bytes:
        if self.config.compression == "gzip":
            return gzip.compress(body, mtime=0)
        if self.config.compression == "zstd":
            import zstandard

            return zstandard.ZstdCompressor().compress(body)
        return body

    def post(self, body: bytes, resolved: bool = False) -> None:
        """POST ``body``, retrying until a 2xx or the retry budget is spent (then SinkError)."""
        cfg = self.config
        client = client_for(cfg)
        data = self.compress(body)
        headers = self.headers()
        if resolved and cfg.csv:
            headers["Content-Type"] = "application/json"
        backoff = cfg.retry_backoff_s
        attempt = 0
        while True:
            error: str
            try:
                resp = client.post(cfg.url, content=data, headers=headers)
                if 200 <= resp.status_code < 300:
                    return
                error = f"{resp.status_code} {resp.reason_phrase}: {resp.text}"
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"
            if cfg.retry_max != INFINITE_RETRIES and attempt >= cfg.retry_max:
                raise SinkError(f"webhook sink {_redacted(cfg.url)}: {error} (after {attempt} retries)")
            attempt += 1
            time.sleep(backoff)
            backoff = min(backoff * RETRY_MULTIPLIER, MAX_RETRY_BACKOFF_NS / 1e9)

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.config = state["config"]


def _redacted(url: str) -> str:
    return url.split("?", 1)[0]
