"""Scores rounded up to a uniform public grid: the counts the binned mechanisms use.

ExponQ, DP-APS and the FedCP2-QQ agents all discretise scores in [0, 1] on the grid
``e_j = j / m``; this module is the one place that decides which bin a score falls in.
"""

from __future__ import annotations

import numpy as np

__all__ = ["bin_counts"]


def bin_counts(scores: np.ndarray, n_bins: int) -> np.ndarray:
    """Counts of discretised scores on the uniform grid ``e_j = j / n_bins``.

    Paper 000 Sec. 2: bins ``I_1 = [0, e_1]`` and ``I_j = (e_{j-1}, e_j]``, each score
    rounded up to the right edge of its bin. The bin index ``j`` of ``s`` is the smallest
    ``j >= 1`` with ``s <= e_j`` in floating point, so it agrees exactly with the
    prediction-time test ``score <= e_j``.

    Parameters
    ----------
    scores : ndarray of shape (n,)
        Scores in [0, 1].
    n_bins : int
        Number of bins ``m``.

    Returns
    -------
    ndarray of shape (n_bins,), dtype int64
        ``counts[j - 1] = #{i : [s_i] = e_j}``.
    """
    m = int(n_bins)
    edges = np.arange(m + 1, dtype=np.float64) / m
    index = np.ceil(scores * m).astype(np.int64)
    np.clip(index, 1, m, out=index)
    # ceil(s * m) can be off by one from rounding of the product; fix both ways.
    index -= (index > 1) & (scores <= edges[index - 1])
    index += scores > edges[index]
    return np.bincount(index, minlength=m + 1)[1:]
