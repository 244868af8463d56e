"""Kafka's record batch compression codecs (the batch attributes' low three bits).

A compressed batch keeps its 61-byte header as is and compresses its records, in each codec's
stream format as Kafka's clients write it:

- 1 gzip: a gzip stream (members may be concatenated);
- 2 snappy: the snappy-java ("xerial") framing Kafka's Java client and librdkafka write, a
  16-byte header (magic ``\\x82SNAPPY\\x00``, version, compatible version) then blocks, each a
  big-endian length and a raw snappy block; without that magic, one raw snappy block (snappy-java's
  reader, which Kafka uses, and librdkafka accept both);
- 3 lz4: LZ4 frames (KIP-57: the standard frame format);
- 4 zstd: Zstandard frames (a Produce request needs version 7 or later to carry them).

The topic log stores a produced batch as it came, compressed, so a Fetch returns it compressed
(as Kafka does); the log's own readers decompress through :func:`decompress`. Compression here
(:func:`compress`) is for tests and tools that frame batches like a client.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import cramjam
import lz4.frame
import zstandard

__all__ = ["CODECS", "ZSTD", "Codec", "CodecError", "codec_name", "compress", "decompress"]

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4


#: The most bytes a batch's records may decompress to. Kafka's default ``max.message.bytes`` is
#: 1 MiB of compressed records; a batch that expands past this is refused (a compression bomb
#: would otherwise be expanded whole in memory).
MAX_DECOMPRESSED = 64 * 1024 * 1024


class CodecError(Exception):
    """Compressed records that do not decompress (the batch's caller turns it into its own
    error: CORRUPT_MESSAGE for a Produce request, CorruptFile for a stored batch)."""


@dataclass(frozen=True, slots=True)
class Codec:
    """One compression codec: its id in the batch attributes, Kafka's name for it (the
    ``compression.type`` value) and its stream format's two directions."""

    id: int
    name: str
    decompress: Callable[[bytes], bytes]
    compress: Callable[[bytes], bytes]


def _too_large(codec: str) -> CodecError:
    return CodecError(f"{codec} records decompress to more than {MAX_DECOMPRESSED} bytes")


def _gunzip(data: bytes) -> bytes:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            out = f.read(MAX_DECOMPRESSED + 1)
    except (OSError, EOFError, ValueError, zlib.error) as exc:
        raise CodecError(f"gzip records do not decompress: {exc}") from None
    if len(out) > MAX_DECOMPRESSED:
        raise _too_large("gzip")
    return out


XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
#: Uncompressed bytes per block when framing: snappy-java's default block size.
_XERIAL_BLOCK = 32 * 1024


def _snappy_length(data: bytes | memoryview) -> int:
    """A raw snappy block's uncompressed length: its leading varint."""
    n = shift = 0
    for i in range(min(5, len(data))):
        b = data[i]
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n
        shift += 7
    raise CodecError("snappy records: a block without its length")


def _snappy_block(data: bytes | memoryview, room: int = MAX_DECOMPRESSED) -> bytes:
    if _snappy_length(data) > room:
        raise _too_large("snappy")
    try:
        return bytes(cramjam.snappy.decompress_raw(data))
    except cramjam.DecompressionError as exc:
        raise CodecError(f"snappy records do not decompress: {exc}") from None


def _unsnappy(data: bytes) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_block(data)
    if len(data) < len(_XERIAL_HEADER):
        raise CodecError("snappy records: truncated snappy-java stream header")
    view = memoryview(data)
    out: list[bytes] = []
    total = 0
    pos = len(_XERIAL_HEADER)
    end = len(data)
    while pos < end:
        if end - pos < 4:
            raise CodecError("snappy records: truncated snappy-java block length")
        n = int.from_bytes(view[pos : pos + 4], "big")
        pos += 4
        if n > end - pos:
            raise CodecError("snappy records: a snappy-java block runs past the batch")
        out.append(_snappy_block(view[pos : pos + n], MAX_DECOMPRESSED - total))
        total += len(out[-1])
        pos += n
    return b"".join(out)


def _snappy(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER]
    for i in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + _XERIAL_BLOCK]))
        parts += (len(block).to_bytes(4, "big"), block)
    return b"".join(parts)


def _unlz4(data: bytes) -> bytes:
    out: list[bytes] = []
    total = 0
    rest = data
    try:
        while True:
            d = lz4.frame.LZ4FrameDecompressor()
            chunk = d.decompress(rest, max_length=MAX_DECOMPRESSED - total + 1)
            while True:
                out.append(chunk)
                total += len(chunk)
                if total > MAX_DECOMPRESSED:
                    raise _too_large("lz4")
                if d.eof or d.needs_input:
                    break
                chunk = d.decompress(b"", max_length=MAX_DECOMPRESSED - total + 1)
            if not d.eof:
                raise CodecError("lz4 records: truncated LZ4 frame")
            rest = d.unused_data
            if not rest:
                return b"".join(out)
    except RuntimeError as exc:
        raise CodecError(f"lz4 records do not decompress: {exc}") from None


def _lz4(data: bytes) -> bytes:
    return bytes(lz4.frame.compress(data))


def _unzstd(data: bytes) -> bytes:
    out: list[bytes] = []
    rest = data
    dctx = zstandard.ZstdDecompressor()
    try:
        # the size first, bounded (a frame's decompressobj has no output limit)
        reader = dctx.stream_reader(data, read_across_frames=True)
        total = 0
        while chunk := reader.read(1 << 20):
            total += len(chunk)
            if total > MAX_DECOMPRESSED:
                raise _too_large("zstd")
        while True:
            d = dctx.decompressobj()
            out.append(d.decompress(rest))
            if not d.eof:
                raise CodecError("zstd records: truncated Zstandard frame")
            rest = d.unused_data
            if not rest:
                return b"".join(out)
    except zstandard.ZstdError as exc:
        raise CodecError(f"zstd records do not decompress: {exc}") from None


def _zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data)


def _identity(data: bytes) -> bytes:
    return data


#: Codec id (batch attributes & 7) -> codec: the five Kafka defines.
CODECS: dict[int, Codec] = {
    c.id: c
    for c in (
        Codec(NONE, "none", _identity, _identity),
        Codec(GZIP, "gzip", _gunzip, gzip.compress),
        Codec(SNAPPY, "snappy", _unsnappy, _snappy),
        Codec(LZ4, "lz4", _unlz4, _lz4),
        Codec(ZSTD, "zstd", _unzstd, _zstd),
    )
}


def codec_name(codec: int) -> str:
    c = CODECS.get(codec)
    return c.name if c is not None else f"codec {codec}"


def _codec(codec: int) -> Codec:
    c = CODECS.get(codec)
    if c is None:
        raise CodecError(f"compression codec {codec} is not one Kafka defines (0-4)")
    return c


def decompress(codec: int, data: bytes) -> bytes:
    """The records a batch compressed with ``codec`` holds."""
    return _codec(codec).decompress(data)


def compress(codec: int, data: bytes) -> bytes:
    """Records compressed with ``codec`` as Kafka's clients frame them."""
    return _codec(codec).compress(data)
