"""Random words, and the uniform integers and bits computed exactly from them."""

from __future__ import annotations

import os

import numpy as np

__all__ = ["BitSource"]


def _words_to_integers(words: np.ndarray) -> np.ndarray:
    """Rows of 64-bit words (most significant first) as Python ints (object array)."""
    values = np.zeros(words.shape[0], dtype=object)
    for column in range(words.shape[1]):
        values = (values << 64) | words[:, column].astype(object)
    return values


class BitSource:
    """Independent uniform 64-bit words and exact uniform integers built on them.

    Parameters
    ----------
    generator : numpy.random.Generator or numpy.random.RandomState or None
        ``None`` reads the operating system's cryptographic generator; otherwise the
        numpy generator is used (reproducible, not for production).
    """

    def __init__(self, generator=None):
        self._generator = generator

    @property
    def cryptographic(self) -> bool:
        """Whether draws come from the operating system's cryptographic generator."""
        return self._generator is None

    def random_words(self, size: int) -> np.ndarray:
        """``size`` independent uniform 64-bit words.

        From :func:`os.urandom`, or the numpy generator's ``bytes`` (the same words for
        the same seed, run to run).

        Returns
        -------
        ndarray of shape (size,), dtype uint64
        """
        n_bytes = 8 * int(size)
        raw = os.urandom(n_bytes) if self._generator is None else self._generator.bytes(n_bytes)
        return np.frombuffer(raw, dtype=np.uint64)

    def random_bits(self, n_bits: int) -> int:
        """A uniform integer in ``[0, 2**n_bits)``: ``n_bits`` independent fair bits."""
        if n_bits <= 0:
            return 0
        n_words = -(-n_bits // 64)
        value = int(_words_to_integers(self.random_words(n_words)[None, :])[0])
        return value >> (64 * n_words - n_bits)

    def integers_below(self, bound: int, size: int) -> np.ndarray:
        """``size`` independent uniform integers in ``[0, bound)``, exactly.

        Rejection sampling: the top ``ceil(log2(bound))`` bits of fresh words are kept
        when they fall below ``bound`` (probability above 1/2 per try).

        Parameters
        ----------
        bound : int
            Any integer >= 1 (Python ints of any size).
        size : int
            Number of draws.

        Returns
        -------
        ndarray of shape (size,)
            int64 when ``bound <= 2**63``, else an object array of Python ints.
        """
        bound = int(bound)
        n_bits = (bound - 1).bit_length()
        if n_bits == 0:
            return np.zeros(size, dtype=np.int64)
        draws = self._top_bits(n_bits, size)
        rejected = np.flatnonzero(np.asarray(draws >= bound, dtype=bool))
        while rejected.size:
            redrawn = self._top_bits(n_bits, rejected.size)
            draws[rejected] = redrawn
            rejected = rejected[np.asarray(redrawn >= bound, dtype=bool)]
        return draws

    def _top_bits(self, n_bits: int, size: int) -> np.ndarray:
        """``size`` uniform integers of ``n_bits`` bits: int64 up to 63 bits, else objects."""
        if n_bits <= 63:
            return (self.random_words(size) >> np.uint64(64 - n_bits)).astype(np.int64)
        n_words = -(-n_bits // 64)
        rows = self.random_words(n_words * size).reshape(size, n_words)
        return _words_to_integers(rows) >> (64 * n_words - n_bits)
