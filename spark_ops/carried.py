"""The rows a key's columnar window carries from one Arrow batch to the next.

Each push reads the carried rows and the new batch as one array.
Concatenating them would copy every carried row again at every push:
O(W) per batch for a window of W rows, which at W = 10^5 and batches of
10^4 rows is ten copies per row.  :class:`Carried` keeps them in one buffer
that grows by doubling, so a push copies its batch in and the carried rows
move only when the batch does not fit after them: O(batch) amortized.
"""

from __future__ import annotations

import numpy as np


class Carried:
    """A key's carried rows (one NumPy array's, plain or structured) and
    each new batch after them, in one buffer."""

    __slots__ = ("_buf", "_lo", "_hi")

    def __init__(self) -> None:
        self._buf: np.ndarray | None = None
        self._lo = self._hi = 0  # the carried rows are _buf[_lo:_hi]

    def __len__(self) -> int:
        return self._hi - self._lo

    def append(self, batch: np.ndarray) -> np.ndarray:
        """The carried rows then ``batch``, as one array: a view of the
        buffer, valid until the next :meth:`append` (read it, never keep
        it).  O(len(batch)) amortized: when the batch does not fit after
        the carried rows, they move to the front of the buffer if it is at
        least twice what they and the batch need, else to a new buffer of
        twice that (so it holds at most twice the most rows carried and
        appended at once).  The array has the batch's type, or, while rows
        of another are carried, the type NumPy makes of both."""
        n, c, buf = len(batch), self._hi - self._lo, self._buf
        if buf is None or buf.dtype != batch.dtype or self._hi + n > len(buf):
            # a batch's own type unless carried rows of another one need both
            dtype = batch.dtype if buf is None or not c else np.result_type(buf.dtype, batch.dtype)
            if buf is None or dtype != buf.dtype or 2 * (c + n) > len(buf):
                grown = np.empty(max(2 * (c + n), 16), dtype=dtype)
            else:
                grown = buf
            if c:
                grown[:c] = buf[self._lo:self._hi]  # NumPy copies overlapping ranges as if through a temporary
            self._buf, self._lo, self._hi = grown, 0, c
        self._buf[self._hi:self._hi + n] = batch
        self._hi += n
        return self._buf[self._lo:self._hi]

    def keep_from(self, at: int) -> None:
        """Drop the first ``at`` of the rows :meth:`append` returned last.  O(1)."""
        self._lo = min(self._lo + at, self._hi)

    def clear(self) -> None:
        """Drop every row and the buffer.  O(1)."""
        self._buf, self._lo, self._hi = None, 0, 0
