"""Gauss-Legendre quadrature on [0, 1] with double-precision nodes for any size.

The federated coverage table (Humbert et al. 2023, Theorem 3.2) integrates polynomials
of degree ``m n`` exactly with ``ceil((m n + 1) / 2)`` Gauss-Legendre nodes, i.e. five
million nodes at ``(m, n) = (100, 10^5)``, of which only those in a short window are
needed (:func:`gauss_legendre_window`). Eigenvalue methods
(``scipy.special.roots_legendre``) cost O(N^2) (about a minute at N = 50 001, with
relative weight errors up to 1e-8 near the ends), so nodes and weights come from:

- N <= 150: Newton's method in ``theta`` (``x = cos theta``) on the Legendre
  recurrence written for ``1 - x``, started from the asymptotic nodes below; weights
  ``2 sin^2 theta / (N P_{N-1}(x))^2``.
- N > 150: the iteration-free asymptotic expansions of Bogaert (2014, SIAM J. Sci.
  Comput. 36(3), A1008-A1026, Sec. 3): with ``v = 1 / (N + 1/2)``, ``j_k`` the k-th
  zero of ``J_0``, ``a = v j_k`` and ``u = cot a``,
  ``theta_k = a + v^2 F_1(a) + v^4 F_2(a)`` and
  ``w_k = 2 v / (j_k J_1(j_k)^2 / sin a) / (1 + v^2 W_1(a) + v^4 W_2(a))``,
  accurate to O(v^6): relative errors below 1e-13 for N > 150 and 1e-15 for N > 400
  (checked against extended-precision Newton iterates while developing, and by exact
  integration of Bernstein polynomials in the tests).

Nodes are returned both as ``t`` and as ``1 - t`` computed directly
(``cos^2(theta/2)``, ``sin^2(theta/2)``), so that probabilities near both ends of [0, 1]
keep full relative precision.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy.special import j1, jn_zeros

__all__ = [
    "gauss_legendre_blocks",
    "gauss_legendre_nodes",
    "gauss_legendre_ranges",
    "gauss_legendre_window",
    "unit_gauss_legendre",
]

#: Largest number of nodes computed by Newton iterations on the recurrence.
NEWTON_MAX_NODES = 150

#: Extra nodes computed on each side of a window (the index estimate is within 2).
_INDEX_PAD = 3

#: Number of ``J_0`` zeros taken from ``scipy.special.jn_zeros``; beyond it McMahon's
#: expansion (Abramowitz and Stegun 9.5.12) is exact to double precision.
_TABULATED_BESSEL_ZEROS = 20


def _bessel_j0_zeros(index: np.ndarray) -> np.ndarray:
    """The ``index``-th positive zeros of ``J_0`` (``index >= 1``)."""
    index = np.asarray(index, dtype=np.int64)
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


def _asymptotic_half(n_nodes: int, index: np.ndarray | None = None):
    """Bogaert's ``theta_k`` and weights (on [-1, 1]) for ``k`` in ``index``.

    ``index`` defaults to ``1..ceil(N/2)`` (the nodes with ``x = cos theta >= 0``).

    Bogaert (2014), Sec. 3, with ``a = v j_k``, ``u = cot a``:
    ``F_1 = (u a - 1) / (8 a)``,
    ``F_2 = (6 a^2 (1 + u^2) + 25 - u (31 u^2 + 33) a^3) / (384 a^3)``,
    ``W_1 = (u a + a^2 - 1) / (8 a^2)``,
    ``W_2 = (81 - 31 u a - (3 - 6 u^2) a^2 + 6 u a^3 - (27 + 84 u^2 + 56 u^4) a^4)
    / (384 a^4)``.
    """
    if index is None:
        index = np.arange(1, (n_nodes + 1) // 2 + 1)
    j = _bessel_j0_zeros(index)
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


def _legendre_pair(n_nodes: int, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(P_N, P_{N-1})`` at ``x = cos theta`` for ``theta`` in [0, pi/2].

    The recurrence runs on the differences ``D_k = P_k - P_{k-1}`` with
    ``d = 1 - x = 2 sin^2(theta/2)``:
    ``D_k = (-(2k - 1) d P_{k-1} + (k - 1) D_{k-1}) / k``, which keeps full relative
    precision near ``x = 1`` where the plain three-term recurrence in ``x`` does not.
    """
    d = 2.0 * np.sin(theta / 2.0) ** 2
    p = 1.0 - d  # P_1
    diff = -d  # D_1 = P_1 - P_0
    p_prev = np.ones_like(theta)
    for degree in range(2, n_nodes + 1):
        diff = (-(2 * degree - 1) * d * p + (degree - 1) * diff) / degree
        p_prev, p = p, p + diff
    return p, p_prev


def _newton_half(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Newton-refined ``theta_k`` and weights (on [-1, 1]) for ``k = 1..ceil(N/2)``.

    Started from the asymptotic nodes (relative error below 1e-4 for every N >= 2),
    four Newton steps reach double precision (quadratic convergence).
    """
    theta, _ = _asymptotic_half(n_nodes)
    for _ in range(4):
        p, p_prev = _legendre_pair(n_nodes, theta)
        # d/dtheta P_N(cos theta) = N (x P_N - P_{N-1}) / sin(theta)
        theta = theta - p * np.sin(theta) / (n_nodes * (np.cos(theta) * p - p_prev))
    _, p_prev = _legendre_pair(n_nodes, theta)
    weights = 2.0 * np.sin(theta) ** 2 / (n_nodes * p_prev) ** 2
    return theta, weights


@lru_cache(maxsize=32)
def unit_gauss_legendre(n_nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights for integrals over [0, 1].

    ``sum(weights * p(t))`` equals ``integral_0^1 p(t) dt`` for every polynomial ``p``
    of degree at most ``2 n_nodes - 1`` (up to rounding).

    Parameters
    ----------
    n_nodes : int
        Number of nodes ``N >= 1``.

    Returns
    -------
    t : ndarray of shape (N,)
        Nodes in increasing order, in (0, 1).
    one_minus_t : ndarray of shape (N,)
        ``1 - t``, computed without cancellation.
    weights : ndarray of shape (N,)
        Positive weights summing to 1.

    Notes
    -----
    The arrays are cached and read-only.
    """
    n_nodes = int(n_nodes)
    if n_nodes < 1:
        raise ValueError(f"n_nodes must be a positive integer; got {n_nodes}.")
    if n_nodes == 1:
        t, one_minus_t, weights = np.array([0.5]), np.array([0.5]), np.array([1.0])
    else:
        half = _newton_half if n_nodes <= NEWTON_MAX_NODES else _asymptotic_half
        theta, weights = half(n_nodes)
        weights = weights / 2.0  # [-1, 1] -> [0, 1]
        # x = cos(theta) near 1 for small theta: t = (1 + x)/2 = cos^2(theta/2).
        low = np.sin(theta / 2.0) ** 2  # the mirror nodes 1 - t, increasing in k
        high = np.cos(theta / 2.0) ** 2
        mirror = slice(-2, None, -1) if n_nodes % 2 else slice(None, None, -1)
        t = np.concatenate([low, high[mirror]])
        one_minus_t = np.concatenate([high, low[mirror]])
        weights = np.concatenate([weights, weights[mirror]])
    for array in (t, one_minus_t, weights):
        array.flags.writeable = False
    return t, one_minus_t, weights


def _node_position(n_nodes: int, t: np.ndarray) -> np.ndarray:
    """Approximate 0-based index (in increasing ``t``) of the node nearest ``t``.

    From ``theta_k ~ pi (k - 1/4) / (N + 1/2)`` with ``t = sin^2(theta / 2)`` below 1/2
    and ``1 - t = sin^2(theta / 2)`` above; exact to within one node or two.
    """
    t = np.asarray(t, dtype=np.float64)
    low = np.minimum(t, 1.0 - t)
    theta = 2.0 * np.arcsin(np.sqrt(np.clip(low, 0.0, 0.5)))
    k = theta * (n_nodes + 0.5) / np.pi + 0.25  # 1-based index on its half
    return np.where(t <= 0.5, k - 1.0, n_nodes - k)


def _nodes_by_index(n_nodes: int, index: np.ndarray):
    """``t``, ``1 - t`` and weights of the nodes with 0-based ``index`` (increasing ``t``)."""
    half = (n_nodes + 1) // 2
    lower = index < half
    k = np.where(lower, index + 1, n_nodes - index)  # 1-based index on its half
    theta, weights = _asymptotic_half(n_nodes, k)
    sin_half = np.sin(theta / 2.0) ** 2
    cos_half = np.cos(theta / 2.0) ** 2
    t = np.where(lower, sin_half, cos_half)
    one_minus_t = np.where(lower, cos_half, sin_half)
    return t, one_minus_t, weights / 2.0


def gauss_legendre_ranges(n_nodes: int, t_low, t_high) -> tuple[np.ndarray, np.ndarray]:
    """Index ranges ``[start, stop)`` (increasing ``t``) covering the nodes of windows.

    Vectorised over the windows ``[t_low[p], t_high[p]]``: an estimate from the nodes'
    asymptotic positions, checked against the nodes at both ends and widened where it
    fell short.
    """
    n_nodes = int(n_nodes)
    t_low = np.atleast_1d(np.asarray(t_low, dtype=np.float64))
    t_high = np.atleast_1d(np.asarray(t_high, dtype=np.float64))
    if n_nodes <= NEWTON_MAX_NODES:
        t = unit_gauss_legendre(n_nodes)[0]
        return np.searchsorted(t, t_low, side="left"), np.searchsorted(t, t_high, side="right")
    starts = np.maximum(np.floor(_node_position(n_nodes, t_low)).astype(np.int64) - _INDEX_PAD, 0)
    stops = np.minimum(
        np.ceil(_node_position(n_nodes, t_high)).astype(np.int64) + _INDEX_PAD + 1, n_nodes
    )
    stops = np.maximum(stops, starts)
    while True:
        first = _nodes_by_index(n_nodes, starts)[0]
        wide = (starts > 0) & (first > t_low)
        if not wide.any():
            break
        starts[wide] = np.maximum(starts[wide] - 4 * _INDEX_PAD, 0)
    while True:
        last = _nodes_by_index(n_nodes, np.maximum(stops - 1, 0))[0]
        short = (stops < n_nodes) & (last < t_high)
        if not short.any():
            break
        stops[short] = np.minimum(stops[short] + 4 * _INDEX_PAD, n_nodes)
    return starts, stops


def gauss_legendre_nodes(n_nodes: int, index) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``t``, ``1 - t`` and weights of the nodes with 0-based ``index`` (increasing ``t``)."""
    n_nodes = int(n_nodes)
    index = np.asarray(index, dtype=np.int64)
    if n_nodes <= NEWTON_MAX_NODES:
        t, one_minus_t, weights = unit_gauss_legendre(n_nodes)
        return t[index], one_minus_t[index], weights[index]
    return _nodes_by_index(n_nodes, index)


def _window_range(n_nodes: int, t_low: float, t_high: float) -> tuple[int, int]:
    """Index range ``[start, stop)`` covering the nodes in one window."""
    starts, stops = gauss_legendre_ranges(n_nodes, t_low, t_high)
    return int(starts[0]), int(stops[0])


def gauss_legendre_blocks(n_nodes: int, t_low: float, t_high: float, block: int = 4096):
    """Yield the nodes of :func:`gauss_legendre_window` in blocks of at most ``block``.

    Memory stays bounded by the block size however many nodes the window holds.

    Yields
    ------
    t, one_minus_t, weights : ndarray
    """
    n_nodes = int(n_nodes)
    if n_nodes <= NEWTON_MAX_NODES:
        yield gauss_legendre_window(n_nodes, t_low, t_high)
        return
    start, stop = _window_range(n_nodes, t_low, t_high)
    for first in range(start, stop, block):
        yield _nodes_by_index(n_nodes, np.arange(first, min(first + block, stop)))


def gauss_legendre_window(
    n_nodes: int, t_low: float, t_high: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The nodes of the ``n_nodes``-point Gauss-Legendre rule on [0, 1] in a window.

    Returns every node ``t_i`` of :func:`unit_gauss_legendre` with
    ``t_low <= t_i <= t_high`` (and possibly a few nodes just outside), with ``1 - t_i``
    and the weights, computed directly from their index: memory and time grow with the
    number of nodes in the window, not with ``n_nodes``.

    Parameters
    ----------
    n_nodes : int
        Size ``N >= 1`` of the rule.
    t_low, t_high : float
        The window, ``0 <= t_low <= t_high <= 1``.

    Returns
    -------
    t, one_minus_t, weights : ndarray
        As for :func:`unit_gauss_legendre`, restricted to the window.
    """
    n_nodes = int(n_nodes)
    if n_nodes <= NEWTON_MAX_NODES:
        t, one_minus_t, weights = unit_gauss_legendre(n_nodes)
        keep = slice(
            int(np.searchsorted(t, t_low, side="left")),
            int(np.searchsorted(t, t_high, side="right")),
        )
        return t[keep], one_minus_t[keep], weights[keep]
    start, stop = _window_range(n_nodes, t_low, t_high)
    return _nodes_by_index(n_nodes, np.arange(start, stop))
