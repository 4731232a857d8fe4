"""Scores rounded up to a uniform public grid: the counts the binned mechanisms use.

ExponQ, DP-APS and the FedCP2-QQ agents all discretise scores in [0, 1] on the grid
``e_j = j / m``; this module is the one place that decides which bin a score falls in.

The scores are read once, in blocks small enough to stay in the processor's cache, and
the edges are computed by division where they are needed (no table, no random gather):
the binning runs close to the memory bandwidth and holds at most a few blocks besides
the counts, whatever the number of scores.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MAX_BINS", "bin_counts"]

#: Largest grid ``bin_counts`` accepts (2**24 bins: 128 MiB of counts). Far beyond any
#: useful grid (ExponQ's automatic choice stops at 10**6), and far below 2**53, where
#: ``j / m`` would stop being computed from an exact ``j``.
MAX_BINS = 2**24

#: Scores per block: 2**16 float64 values (512 KiB) per temporary, cache-resident.
_BLOCK = 2**16


def bin_counts(scores: np.ndarray, n_bins: int) -> np.ndarray:
    """Counts of discretised scores on the uniform grid ``e_j = j / n_bins``.

    Angelopoulos et al. (2022), Sec. 2: bins ``I_1 = [0, e_1]`` and
    ``I_j = (e_{j-1}, e_j]``, each score rounded up to the right edge of its bin. The bin
    index ``j`` of ``s`` is the smallest ``j >= 1`` with ``s <= e_j`` in floating point,
    where ``e_j`` is the correctly rounded quotient ``fl(j / m)``, so it agrees exactly
    with the prediction-time test ``score <= e_j``.

    The index is computed as ``c = ceil(fl(s m))``. It is exact unless ``fl(s m)``
    lies within ``T = 2^-50 m`` of an integer: the product and the edges ``fl(j / m)``
    carry relative errors of at most ``2^-53``, so ``s m`` is within ``2^-53 m`` of
    ``fl(s m)`` and ``s <= fl(j / m)`` agrees with ``s m <= j`` unless ``s m`` is
    within ``2^-53 m`` of ``j``; at distance above ``T`` (``8 x 2^-53 m``) from every
    integer neither error can move the bin. The rare scores within ``2 T`` (a safety
    factor for the rounding of the test itself; about ``2^-48 m`` of uniform scores,
    and every score on or next to an edge) are corrected by one step either way against
    the two neighbouring edges ``fl((c - 1) / m)`` and ``fl(c / m)``: the same
    correctly rounded quotients as the table ``np.arange(m + 1) / m``, so the bins are
    exactly those of the comparisons with that table, including scores on an edge or one
    ulp to either side of it, 0, 1 and subnormal scores. For ``m`` a power of two the
    product is exact and no score is checked.

    Parameters
    ----------
    scores : ndarray of shape (n,)
        Scores in [0, 1] (validated by the caller).
    n_bins : int
        Number of bins ``m``, ``1 <= m <= MAX_BINS``.

    Returns
    -------
    ndarray of shape (n_bins,), dtype int64
        ``counts[j - 1] = #{i : [s_i] = e_j}``.

    Raises
    ------
    ValueError
        If ``n_bins`` is outside ``[1, MAX_BINS]``.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.mechanisms.expon_q import bin_counts
    >>> bin_counts(np.array([0.0, 0.25, 0.26, 1.0]), 4)
    array([2, 1, 0, 1])
    """
    m = int(n_bins)
    if not 1 <= m <= MAX_BINS:
        raise ValueError(f"n_bins must be an integer in [1, {MAX_BINS}]; got {n_bins!r}.")
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    n = scores.shape[0]
    # Bin indices are collected for ``chunk`` scores before one bincount, so that the
    # O(m) cost of each bincount is spread over at least 4 (m + 1) scores (the index
    # buffer is then at most 32 bytes per bin, and never larger than the scores).
    chunk = max(_BLOCK, min(n, 4 * (m + 1)))
    counts = np.zeros(m + 1, dtype=np.int64)
    index = np.empty(min(chunk, n), dtype=np.intp)
    ceiling = np.empty(_BLOCK)
    product = np.empty(_BLOCK)
    flag = np.empty(_BLOCK, dtype=bool)
    size = float(m)
    # For m a power of two, s * m is exact, so c = ceil(s * m) is already the smallest
    # j with s <= j / m and no correction can apply.
    exact_product = m & (m - 1) == 0
    # Scores whose product is within 2 T of an integer are checked against the edges.
    near_integer = 0.5 - 2.0 * 2.0**-50 * size
    for chunk_start in range(0, n, chunk):
        chunk_stop = min(chunk_start + chunk, n)
        for start in range(chunk_start, chunk_stop, _BLOCK):
            stop = min(start + _BLOCK, chunk_stop)
            block = scores[start:stop]
            c, p, f = ceiling[: stop - start], product[: stop - start], flag[: stop - start]
            i = index[start - chunk_start : stop - chunk_start]
            np.multiply(block, size, out=p)
            np.ceil(p, out=c)  # in [0, m] for scores in [0, 1]; 0 only for s = 0
            np.copyto(i, c, casting="unsafe")
            if exact_product:
                continue
            # |(c - s m) - 1/2| >= 1/2 - 2 T: s m within 2 T of an integer.
            np.subtract(c, p, out=p)
            np.subtract(p, 0.5, out=p)
            np.abs(p, out=p)
            np.greater_equal(p, near_integer, out=f)
            if f.any():
                _correct(block, c, i, np.flatnonzero(f), size)
        counts += np.bincount(index[: chunk_stop - chunk_start], minlength=m + 1)
    # Index 0 is reached only by s = 0 (ceil(0) = 0, and 0 > e_0 is false): bin I_1.
    counts[1] += counts[0]
    return counts[1:]


def _correct(block: np.ndarray, ceiling: np.ndarray, index: np.ndarray, rows, size: float):
    """Bin indices of ``rows`` moved one step down if ``s <= e_{c-1}``, up if ``s > e_c``.

    At most one applies, since ``e_{c-1} <= e_c`` (:func:`bin_counts`).
    """
    scores, c = block[rows], ceiling[rows]
    index[rows] += (scores > c / size).astype(np.intp) - (scores <= (c - 1.0) / size)
