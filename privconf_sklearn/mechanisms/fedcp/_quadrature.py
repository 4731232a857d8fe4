"""Gauss-Legendre nodes on [0, 1] by index, for rules of any size.

Scipy's for small rules, Bogaert's (2014, SIAM J. Sci. Comput. 36(3), Sec. 3) for large
ones (the user guide's FedCP-QQ page says why); ``t`` and ``1 - t`` are computed
separately, so that probabilities near both ends of [0, 1] keep their precision.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache

import numpy as np
from scipy.special import j1, jn_zeros, roots_legendre

#: Largest rule taken from :func:`scipy.special.roots_legendre`.
SCIPY_MAX_NODES = 150

#: Extra nodes taken on each side of a window (the index estimate is within 2).
_INDEX_PAD = 3

#: ``J_0`` zeros taken from :func:`scipy.special.jn_zeros`; McMahon's expansion beyond.
_TABULATED_BESSEL_ZEROS = 20

Nodes = tuple[np.ndarray, np.ndarray, np.ndarray]


def _bessel_j0_zeros(index: np.ndarray) -> np.ndarray:
    """The ``index``-th positive zeros of ``J_0`` (Abramowitz and Stegun 9.5.12 beyond 20)."""
    zeros = np.empty(index.shape[0])
    tabulated = index <= _TABULATED_BESSEL_ZEROS
    zeros[tabulated] = jn_zeros(0, _TABULATED_BESSEL_ZEROS)[index[tabulated] - 1]
    beta = np.pi * (index[~tabulated] - 0.25)
    r = 1.0 / beta
    r2 = r * r
    zeros[~tabulated] = beta + r * (
        1.0 / 8.0 + r2 * (-31.0 / 384.0 + r2 * (3779.0 / 15360.0 - r2 * (6277237.0 / 3440640.0)))
    )
    return zeros


def _bogaert(n_nodes: int, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``theta_k`` and the weight on [-1, 1] of node ``k`` (1-based from ``x = 1``).

    Bogaert (2014), Sec. 3: ``theta = a + v^2 F_1 + v^4 F_2`` and
    ``w = 2 v sin(a) / (j_k J_1(j_k)^2) / (1 + v^2 W_1 + v^4 W_2)``, ``a = v j_k``,
    ``v = 1 / (N + 1/2)``, ``u = cot a``.
    """
    j = _bessel_j0_zeros(k)
    v = 1.0 / (n_nodes + 0.5)
    a = v * j
    u = 1.0 / np.tan(a)
    a2 = a * a
    f1 = (u * a - 1.0) / (8.0 * a)
    f2 = (6.0 * a2 * (1.0 + u * u) + 25.0 - u * (31.0 * u * u + 33.0) * a2 * a) / (384.0 * a2 * a)
    theta = a + v * v * f1 + v**4 * f2
    w1 = (u * a + a2 - 1.0) / (8.0 * a2)
    w2 = (
        81.0
        - 31.0 * u * a
        - (3.0 - 6.0 * u * u) * a2
        + 6.0 * u * a2 * a
        - (27.0 + 84.0 * u * u + 56.0 * u**4) * a2 * a2
    ) / (384.0 * a2 * a2)
    weights = 2.0 * v * np.sin(a) / (j * j1(j) ** 2) / (1.0 + v * v * w1 + v**4 * w2)
    return theta, weights


@lru_cache(maxsize=32)
def _scipy_rule(n_nodes: int) -> Nodes:
    """Scipy's rule mapped to [0, 1], in increasing ``t`` (read-only arrays)."""
    x, w = roots_legendre(n_nodes)
    rule = ((1.0 + x) / 2.0, (1.0 - x) / 2.0, w / 2.0)
    for array in rule:
        array.flags.writeable = False
    return rule


def nodes(n_nodes: int, index) -> Nodes:
    """``t``, ``1 - t`` and the weights (on [0, 1]) of the nodes with 0-based ``index``.

    Nodes are numbered in increasing ``t``; the ``N``-node rule integrates polynomials of
    degree at most ``2 N - 1`` exactly.
    """
    index = np.asarray(index, dtype=np.int64)
    if n_nodes <= SCIPY_MAX_NODES:
        t, one_minus_t, weights = _scipy_rule(n_nodes)
        return t[index], one_minus_t[index], weights[index]
    lower = index < (n_nodes + 1) // 2
    theta, weights = _bogaert(n_nodes, np.where(lower, index + 1, n_nodes - index))
    # x = cos(theta): t = (1 + x)/2 = cos^2(theta/2), 1 - t = sin^2(theta/2), or mirrored.
    sin_half, cos_half = np.sin(theta / 2.0) ** 2, np.cos(theta / 2.0) ** 2
    return np.where(lower, sin_half, cos_half), np.where(lower, cos_half, sin_half), weights / 2.0


def _node_position(n_nodes: int, t: np.ndarray) -> np.ndarray:
    """Index of the node nearest ``t`` within 2, from ``theta_k ~ pi (k - 1/4) / (N + 1/2)``."""
    theta = 2.0 * np.arcsin(np.sqrt(np.clip(np.minimum(t, 1.0 - t), 0.0, 0.5)))
    k = theta * (n_nodes + 0.5) / np.pi + 0.25
    return np.where(t <= 0.5, k - 1.0, n_nodes - k)


def node_ranges(n_nodes: int, t_low, t_high) -> tuple[np.ndarray, np.ndarray]:
    """Index ranges ``[start, stop)`` holding the nodes of the windows ``[t_low, t_high]``.

    Large rules: estimated from the nodes' asymptotic positions, then widened until the
    nodes at both ends lie outside the window.
    """
    t_low = np.atleast_1d(np.asarray(t_low, dtype=np.float64))
    t_high = np.atleast_1d(np.asarray(t_high, dtype=np.float64))
    if n_nodes <= SCIPY_MAX_NODES:
        t = _scipy_rule(n_nodes)[0]
        return np.searchsorted(t, t_low, side="left"), np.searchsorted(t, t_high, side="right")
    starts = np.maximum(np.floor(_node_position(n_nodes, t_low)).astype(np.int64) - _INDEX_PAD, 0)
    stops = np.minimum(
        np.ceil(_node_position(n_nodes, t_high)).astype(np.int64) + _INDEX_PAD + 1, n_nodes
    )
    stops = np.maximum(stops, starts)
    while (wide := (starts > 0) & (nodes(n_nodes, starts)[0] > t_low)).any():
        starts[wide] = np.maximum(starts[wide] - 4 * _INDEX_PAD, 0)
    while (
        short := (stops < n_nodes) & (nodes(n_nodes, np.maximum(stops - 1, 0))[0] < t_high)
    ).any():
        stops[short] = np.minimum(stops[short] + 4 * _INDEX_PAD, n_nodes)
    return starts, stops


def node_blocks(n_nodes: int, t_low: float, t_high: float, block: int) -> Iterator[Nodes]:
    """The nodes of :func:`node_ranges` for one window, ``block`` nodes at a time."""
    starts, stops = node_ranges(n_nodes, t_low, t_high)
    for first in range(int(starts[0]), int(stops[0]), block):
        yield nodes(n_nodes, np.arange(first, min(first + block, int(stops[0]))))
