"""The values the topic log's appenders and the Kafka endpoint exchange with
:class:`changefeed.topics.store.TopicStore` (which re-exports them): records as slices of one
buffer, a column-wise read, and what an append did."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
import numpy.typing as npt

__all__ = ["Appended", "Int64s", "RecordColumns", "RecordSlices"]


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """A column-wise slice of one partition (:meth:`TopicStore.read_columns`)."""

    earliest: int  #: the partition's earliest available offset
    next_offset: int  #: the offset the next append gets (the high watermark)
    offsets: Sequence[int]
    keys: Sequence[bytes | None]
    values: Sequence[bytes]
    timestamps: Sequence[int]


Int64s = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class RecordSlices:
    """Records whose keys and values are slices of one buffer (a Kafka record batch), appended by
    :meth:`TopicStore.append_slices` without a Python object per record. Starts are 0-based byte
    positions in ``data``; a key length of -1 is a null key; values are never null. All five
    arrays have one element per record."""

    data: bytes
    key_starts: Int64s
    key_lengths: Int64s
    value_starts: Int64s
    value_lengths: Int64s
    timestamps: Int64s  #: in the ``ts_unit_ns`` the records are appended with

    def __len__(self) -> int:
        return len(self.value_lengths)

    @property
    def keys(self) -> list[bytes | None]:
        d = self.data
        return [
            None if n < 0 else d[s : s + n]
            for s, n in zip(self.key_starts.tolist(), self.key_lengths.tolist(), strict=True)
        ]

    @property
    def values(self) -> list[bytes]:
        d = self.data
        return [
            d[s : s + n] for s, n in zip(self.value_starts.tolist(), self.value_lengths.tolist(), strict=True)
        ]

    @classmethod
    def from_lists(
        cls, keys: Sequence[bytes | None], values: Sequence[bytes], timestamps: Sequence[int]
    ) -> RecordSlices:
        """The records joined into one buffer (for small batches and tests)."""
        kl = np.array([-1 if k is None else len(k) for k in keys], dtype=np.int64)
        vl = np.array([len(v) for v in values], dtype=np.int64)
        ends = np.cumsum(np.maximum(kl, 0) + vl)
        ks = ends - vl - np.maximum(kl, 0)
        data = b"".join(chain.from_iterable((k or b"", v) for k, v in zip(keys, values, strict=True)))
        return cls(data, ks, kl, ks + np.maximum(kl, 0), vl, np.array(timestamps, dtype=np.int64))


@dataclass(frozen=True, slots=True)
class Appended:
    """What :meth:`TopicStore.append_slices` did, all read in its transaction."""

    start: int  #: the first offset written (the next offset when nothing was)
    written: int
    earliest: int  #: the partition's earliest available offset afterwards
    committed: int | None  #: the writer's committed batch id before this append
