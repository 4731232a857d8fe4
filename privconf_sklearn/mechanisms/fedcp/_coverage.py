"""The coverage table of the quantile-of-quantiles estimator: exact values and fast search.

Humbert, Le Bars, Bellet and Arlot (ICML 2023), Theorem 3.2: when each of ``m`` agents
sends the ``l``-th smallest of its ``n`` scores and the server keeps the ``k``-th
smallest message, a fresh score is covered with probability at least (equal to, for
continuous scores)

``M(l, k) = integral_0^1 h(t) dt``,  ``h(t) = P(Bin(m, G_l(t)) < k)``,
``G_l(t) = P(Bin(n, t) >= l)``

(the proof in their Appendix C.1, before the multinomial sums of Eq. (5)). With unequal
sizes (their Appendix A.1) agent ``j`` has its own ``G_j`` and ``h`` is the
Poisson-binomial ``P(sum_j Bernoulli(G_j(t)) < k)``. ``h`` is a polynomial of degree
``D = sum_j n_j`` and, being the survival function of the ``k``-th smallest message
(a log-concave density for every ``k``), decreases from 1 to 0.

Three evaluations, from exact to fast:

- **Exact rationals** (:func:`exact_coverage_column`, ``D <= EXACT_MAX_DEGREE``):
  ``h`` in the Bernstein basis, products as integer convolutions (Kronecker
  substitution into Python integers) and
  ``integral t^r (1 - t)^(D - r) dt = r! (D - r)! / (D + 1)!``. Ties, e.g.
  ``M(3, 3) = 1/2`` at ``m = n = 5``, are then decided exactly.
- **Exact quadrature** (:func:`qq_coverage`, :func:`unequal_coverage_column`):
  Gauss-Legendre with ``D // 2 + 1`` nodes integrates a degree-``D`` polynomial
  exactly. Outside a window ``[a, b]`` the integrand is within ``TAIL`` of 1 (left)
  or 0 (right); only the nodes inside are evaluated (:func:`gauss_legendre_window`).
  The nodes left of the window are not summed: the integral is taken of ``h - H``,
  where ``H(t) = P(Bin(D, t) < r)`` (same degree, transition inside the window) has
  the known integral ``r / (D + 1)`` and is also within ``TAIL`` of 1 left of the
  window and of 0 right of it. Memory and time grow with the window's nodes (about
  ``m sqrt(n)``), not with ``D``. Values carry the rounding of double-precision
  incomplete beta functions (below 1e-13); certificates subtract
  :data:`ROUNDING_ALLOWANCE` from them.
- **Fast approximation** (:func:`approximate_coverage`): a 48-node Gauss-Legendre rule
  on the window, accurate to about 1e-15 in every case checked against the exact
  quadrature (the tests), used only to *search*; every decision that a value within
  :data:`DECISION_MARGIN` of the level or of another candidate could change is taken
  on certified values.

All probabilities are regularised incomplete beta functions evaluated on the side that
keeps full precision (``1 - G`` from ``1 - t``), so no tail is a difference of numbers
close to 1 (the authors' code does that and returns NaN).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
from scipy.special import betainc, betaincinv, gammaln, roots_legendre, xlogy

from ._quadrature import node_blocks, node_ranges, nodes

__all__ = [
    "DECISION_MARGIN",
    "EXACT_MAX_DEGREE",
    "ROUNDING_ALLOWANCE",
    "TAIL",
    "TIE_TOLERANCE",
    "Certified",
    "UnequalColumns",
    "approximate_coverage",
    "approximate_unequal_column",
    "certify_column",
    "certify_equal",
    "exact_coverage_column",
    "qq_coverage",
    "unequal_coverage_column",
]

#: Integrand mass ignored on each side of an evaluation window: the integrand is within
#: TAIL of 1 left of it and of 0 right of it, so the ignored error is at most 2 TAIL.
TAIL = 1e-18

#: Largest degree ``D = sum_j n_j`` evaluated in exact rational arithmetic.
EXACT_MAX_DEGREE = 400

#: Subtracted from (added to) a quadrature value to certify a lower (upper) bound: covers
#: the rounding of the double-precision special functions (observed below 1e-13) and
#: the ignored tails (2e-18).
ROUNDING_ALLOWANCE = 1e-12

#: Certified coverages closer than this are ties, going to the smaller local rank
#: (then the smaller server rank). Exact rational values tie only when equal.
TIE_TOLERANCE = 1e-12

#: A fast value this close to the level, or to the best candidate, is re-decided on
#: certified values (the fast values are accurate to about 1e-14).
DECISION_MARGIN = 1e-9

#: Nodes of the fast Gauss-Legendre rule on one window (or one panel of it).
APPROXIMATE_NODES = 48

_LEGENDRE_X, _LEGENDRE_W = roots_legendre(APPROXIMATE_NODES)

#: Groups of at most this many agents enter the Poisson binomial one agent at a time.
_BERNOULLI_STEPS = 8

#: Nodes evaluated at once (bounds the memory of an integrand with many columns).
_BLOCK = 4096


# ------------------------------------------------------------------ exact rationals
def _pack(coefficients: list[int], slot: int) -> int:
    """``sum_r c_r 2^(slot r)``: a polynomial as one integer (Kronecker substitution)."""
    return int.from_bytes(b"".join(c.to_bytes(slot // 8, "little") for c in coefficients), "little")


def _unpack(packed: int, slot: int, count: int) -> list[int]:
    """Inverse of :func:`_pack` for ``count`` coefficients."""
    raw = packed.to_bytes(slot // 8 * count, "little")
    width = slot // 8
    return [int.from_bytes(raw[i * width : (i + 1) * width], "little") for i in range(count)]


def _group_distribution(size: int, rank: int, count: int, slot: int) -> list[int]:
    """Packed ``C(count, s) G^s (1 - G)^(count - s)``, ``s = 0..count``, for one group."""
    up = _pack([math.comb(size, i) if i >= rank else 0 for i in range(size + 1)], slot)
    low = _pack([math.comb(size, i) if i < rank else 0 for i in range(size + 1)], slot)
    up_powers, low_powers = [1], [1]
    for _ in range(count):
        up_powers.append(up_powers[-1] * up)
        low_powers.append(low_powers[-1] * low)
    return [math.comb(count, s) * up_powers[s] * low_powers[count - s] for s in range(count + 1)]


@lru_cache(maxsize=64)
def exact_coverage_column(
    agent_sizes: tuple[int, ...], local_ranks: tuple[int, ...]
) -> tuple[Fraction, ...]:
    """``M_k`` for ``k = 1..m`` in exact rational arithmetic (small tables only).

    Agent ``j`` sends its ``l_j``-th smallest of ``n_j`` scores (``+inf`` when
    ``l_j > n_j``). In the basis ``t^r (1 - t)^(d - r)`` the polynomials
    ``G_j = sum_{i >= l_j} C(n_j, i) t^i (1 - t)^(n_j - i)`` and ``1 - G_j`` have
    non-negative integer coefficients and multiply by convolution, done as products of
    integers (Kronecker substitution). Agents with equal ``(n_j, l_j)`` form a binomial
    group, groups are combined by convolution over the count ``S`` of messages below the
    test score, and ``integral t^r (1 - t)^(D - r) dt = r! (D - r)! / (D + 1)!``.

    Parameters
    ----------
    agent_sizes, local_ranks : tuple of int
        ``n_j >= 1`` and ``l_j >= 1``, with ``sum_j n_j <= EXACT_MAX_DEGREE``.

    Returns
    -------
    tuple of Fraction
        ``M_k``, ``k = 1..m`` (``1`` when fewer than ``k`` messages are finite).
    """
    degree = sum(agent_sizes)
    if degree > EXACT_MAX_DEGREE:
        raise ValueError(f"exact coverage is computed for sum(n_j) <= {EXACT_MAX_DEGREE}.")
    # Every coefficient of every product is at most prod_j 2^(n_j) = 2^D: no carries.
    slot = 8 * ((degree + 2) // 8 + 1)
    groups: dict[tuple[int, int], int] = {}
    for size, rank in zip(agent_sizes, local_ranks, strict=True):
        key = (size, min(rank, size + 1))
        groups[key] = groups.get(key, 0) + 1
    distribution = [1]  # distribution[s]: P(S = s) as a packed polynomial
    for (size, rank), count in sorted(groups.items()):
        group = _group_distribution(size, rank, count, slot)
        combined = [0] * (len(distribution) + count)
        for s, poly in enumerate(distribution):
            if poly:
                for u, part in enumerate(group):
                    combined[s + u] += poly * part
        distribution = combined
    weights = [math.factorial(r) * math.factorial(degree - r) for r in range(degree + 1)]
    total = math.factorial(degree + 1)
    column, below = [], 0
    for s in range(len(agent_sizes)):
        if distribution[s]:
            coefficients = _unpack(distribution[s], slot, degree + 1)
            below += sum(c * w for c, w in zip(coefficients, weights, strict=True) if c)
        column.append(Fraction(below, total))
    return tuple(column)


# ------------------------------------------------------------ exact quadrature
def _integral_with_reference(degree: int, t_low: float, t_high: float, integrand) -> np.ndarray:
    """``integral_0^1 h`` for a polynomial ``h`` of degree <= ``degree``, exactly.

    ``h`` must lie within ``TAIL`` of 1 on ``[0, t_low]`` and of 0 on ``[t_high, 1]``
    (for every column it returns). Gauss-Legendre with ``degree // 2 + 1`` nodes
    integrates ``h - H`` exactly, ``H(t) = P(Bin(degree, t) < r)`` with
    ``integral H = r / (degree + 1)``; ``H`` is within ``TAIL`` of 1 / 0 outside its own
    window, so only the nodes in the union of the windows are evaluated.

    Parameters
    ----------
    degree : int
        Degree bound ``D``.
    t_low, t_high : float
        The integrand's window.
    integrand : callable
        ``integrand(t, one_minus_t)`` returning ``h`` at the nodes, shape ``(nodes,)``
        or ``(nodes, columns)``.

    Returns
    -------
    ndarray
        The integral of each column.
    """
    middle = 0.5 * (t_low + t_high)
    r = min(max(round(degree * middle), 1), degree)
    reference_low = float(betaincinv(r, degree - r + 1, TAIL))
    reference_high = 1.0 - float(betaincinv(degree - r + 1, r, TAIL))
    total = np.float64(r / (degree + 1))
    for t, one_minus_t, weights in node_blocks(
        degree // 2 + 1, min(t_low, reference_low), max(t_high, reference_high), _BLOCK
    ):
        reference = betainc(degree - r + 1, r, one_minus_t)  # P(Bin(D, t) < r)
        values = np.asarray(integrand(t, one_minus_t), dtype=np.float64)
        total = total + weights @ (values - (reference[:, None] if values.ndim == 2 else reference))
    return np.asarray(total)


@lru_cache(maxsize=64)
def _server_window(m: int) -> tuple[np.ndarray, np.ndarray]:
    """For ``k = 1..m``: ``P(Bin(m, G) >= k) < TAIL`` below ``g_low``, ``< k`` above ``g_high``.

    Returns ``g_low`` and ``1 - g_high`` (read-only).
    """
    k = np.arange(1, m + 1)
    g_low = betaincinv(k, m - k + 1, TAIL)
    one_minus_g_high = betaincinv(m - k + 1, k, TAIL)
    for array in (g_low, one_minus_g_high):
        array.flags.writeable = False
    return g_low, one_minus_g_high


def _equal_window(l_arr, k_arr, m, n):
    """``t_low`` and ``1 - t_high`` of ``h`` for equal sizes (see module docstring)."""
    g_low_all, one_minus_g_high_all = _server_window(m)
    g_low = g_low_all[k_arr - 1]
    one_minus_g_high = one_minus_g_high_all[k_arr - 1]
    # G_l(t) = I_t(l, n - l + 1) and 1 - G_l(t) = I_{1-t}(n - l + 1, l), both increasing.
    t_low = betaincinv(l_arr, n - l_arr + 1, g_low)
    one_minus_t_high = betaincinv(n - l_arr + 1, l_arr, one_minus_g_high)
    return t_low, one_minus_t_high


def _check_equal_ranks(local_rank, server_rank, m: int, n: int):
    l_arr, k_arr = np.broadcast_arrays(np.asarray(local_rank), np.asarray(server_rank))
    shape = l_arr.shape
    l_arr = l_arr.ravel().astype(np.int64)
    k_arr = k_arr.ravel().astype(np.int64)
    if l_arr.size and (l_arr.min() < 1 or l_arr.max() > n):
        raise ValueError(f"local ranks must lie in 1..{n}; got {np.unique(l_arr).tolist()[:10]}.")
    if k_arr.size and (k_arr.min() < 1 or k_arr.max() > m):
        raise ValueError(f"server ranks must lie in 1..{m}; got {np.unique(k_arr).tolist()[:10]}.")
    return l_arr, k_arr, shape


def qq_coverage(local_rank, server_rank, n_agents: int, n_per_agent: int) -> np.ndarray:
    """``M(l, k)`` of Theorem 3.2 by exact quadrature, for arrays of pairs ``(l, k)``.

    Parameters
    ----------
    local_rank : int or array-like of int
        ``l`` in ``1..n``: the rank of the score each agent sends.
    server_rank : int or array-like of int
        ``k`` in ``1..m``: the rank of the message the server keeps (broadcast against
        ``local_rank``).
    n_agents : int
        ``m >= 1``.
    n_per_agent : int
        ``n >= 1``, each agent's number of scores.

    Returns
    -------
    ndarray of float
        ``M(l, k)`` up to the rounding of double-precision incomplete beta functions
        (below 1e-13; the quadrature itself is exact).
    """
    m, n = int(n_agents), int(n_per_agent)
    l_arr, k_arr, shape = _check_equal_ranks(local_rank, server_rank, m, n)
    t_low, one_minus_t_high = _equal_window(l_arr, k_arr, m, n)
    t_high = 1.0 - one_minus_t_high
    degree = m * n
    # Reference H(t) = P(Bin(D, t) < r) per pair, its transition at the window's middle.
    r = np.clip(np.round(degree * 0.5 * (t_low + t_high)), 1, degree).astype(np.int64)
    low = np.minimum(t_low, betaincinv(r, degree - r + 1, TAIL))
    high = np.maximum(t_high, 1.0 - betaincinv(degree - r + 1, r, TAIL))
    n_nodes = degree // 2 + 1
    starts, stops = node_ranges(n_nodes, low, high)
    out = r / (degree + 1.0)
    lengths = stops - starts
    first = 0
    while first < l_arr.size:
        # Pairs whose windows hold at most _BLOCK nodes in all (at least one pair).
        total = np.cumsum(lengths[first:])
        last = first + max(int(np.searchsorted(total, _BLOCK, side="right")), 1)
        pairs = np.arange(first, last)
        count = lengths[pairs]
        owner = np.repeat(pairs, count)
        offsets = np.cumsum(count) - count
        index = np.arange(int(count.sum())) - np.repeat(offsets, count) + starts[owner]
        if index.size:
            _, one_minus_t, weights = nodes(n_nodes, index)
            ranks, ks, rs = l_arr[owner], k_arr[owner], r[owner]
            one_minus_g = betainc(n - ranks + 1, ranks, one_minus_t)
            values = betainc(m - ks + 1, ks, one_minus_g)  # P(Bin(m, G) < k)
            reference = betainc(degree - rs + 1, rs, one_minus_t)  # P(Bin(D, t) < r)
            out[first:last] += np.bincount(
                owner - first, weights=weights * (values - reference), minlength=last - first
            )
        first = last
    return out.reshape(shape)


def approximate_coverage(local_rank, server_rank, n_agents: int, n_per_agent: int) -> np.ndarray:
    """Fast ``M(l, k)`` (equal sizes) for searching: a 48-node rule on each window.

    Same arguments and result as :func:`qq_coverage`; accurate to about 1e-14 but not
    certified. Vectorised over the pairs.
    """
    m, n = int(n_agents), int(n_per_agent)
    l_arr, k_arr, shape = _check_equal_ranks(local_rank, server_rank, m, n)
    t_low, one_minus_t_high = _equal_window(l_arr, k_arr, m, n)
    width = (1.0 - one_minus_t_high) - t_low
    offset = 0.5 * width[:, None] * (_LEGENDRE_X[None, :] + 1.0)
    one_minus_t = (1.0 - t_low)[:, None] - offset
    ranks, ks = l_arr[:, None], k_arr[:, None]
    one_minus_g = betainc(n - ranks + 1, ranks, one_minus_t)
    inside = betainc(m - ks + 1, ks, one_minus_g) @ _LEGENDRE_W
    return (t_low + 0.5 * width * inside).reshape(shape)


# --------------------------------------------------------------- unequal sizes
def _binomial_pmf(count: int, g: np.ndarray, one_minus_g: np.ndarray) -> np.ndarray:
    """``P(Bin(count, g) = s)`` for ``s = 0..count``, shape ``(len(g), count + 1)``."""
    s = np.arange(count + 1)
    log_choose = gammaln(count + 1) - gammaln(s + 1) - gammaln(count - s + 1)
    return np.exp(log_choose + xlogy(s, g[:, None]) + xlogy(count - s, one_minus_g[:, None]))


def _finite_groups(agent_sizes, local_ranks):
    """Distinct ``(n_j, l_j)`` of the finite messages, their counts and the total."""
    sizes = np.asarray(agent_sizes, dtype=np.int64)
    ranks = np.asarray(local_ranks, dtype=np.int64)
    finite = ranks <= sizes
    groups, counts = np.unique(
        np.stack([sizes[finite], ranks[finite]], axis=1), axis=0, return_counts=True
    )
    return groups[:, 0], groups[:, 1], counts, int(finite.sum())


def _add_group(distribution, count: int, g: np.ndarray, one_minus_g: np.ndarray):
    """Convolve the distribution of ``S`` (rows: nodes) with ``Bin(count, G)``.

    The first group (``distribution`` None) enters as its binomial; small groups one
    agent (one Bernoulli) at a time; large groups by convolution with their binomial.
    """
    if distribution is None:
        return _binomial_pmf(count, g, one_minus_g)
    if count <= _BERNOULLI_STEPS:
        for _ in range(count):
            width = distribution.shape[1]
            step = np.empty((distribution.shape[0], width + 1))
            step[:, :width] = distribution * one_minus_g[:, None]
            step[:, width] = 0.0
            step[:, 1:] += distribution * g[:, None]
            distribution = step
        return distribution
    pmf = _binomial_pmf(count, g, one_minus_g)
    width = distribution.shape[1]
    combined = np.zeros((distribution.shape[0], width + count))
    for s in range(width):
        combined[:, s : s + count + 1] += distribution[:, s : s + 1] * pmf
    return combined


def _poisson_binomial_below(t, one_minus_t, group_n, group_l, counts, n_finite):
    """``P(S < k)`` for ``k = 1..n_finite`` at each node, ``S = sum_j Bernoulli(G_j)``."""
    distribution = None
    for position in np.argsort(-counts, kind="stable"):
        size, rank, count = int(group_n[position]), int(group_l[position]), int(counts[position])
        one_minus_g = betainc(size - rank + 1, rank, one_minus_t)
        g = betainc(rank, size - rank + 1, t)
        distribution = _add_group(distribution, count, g, one_minus_g)
    if distribution is None:
        raise ValueError("the Poisson-binomial sum needs at least one group of agents.")
    return np.cumsum(distribution, axis=1)[:, :n_finite]


def _unequal_window(group_n, group_l, n_finite):
    """``[t_low, t_high]``: outside, ``sum_j G_j < TAIL`` (left) / ``sum_j (1 - G_j) < TAIL``."""
    t_low = float(betaincinv(group_l, group_n - group_l + 1, TAIL / n_finite).min())
    one_minus_t_high = float(betaincinv(group_n - group_l + 1, group_l, TAIL / n_finite).min())
    return t_low, 1.0 - one_minus_t_high


@lru_cache(maxsize=256)
def unequal_coverage_column(agent_sizes: tuple[int, ...], local_ranks: tuple[int, ...]):
    """Coverage of the quantile of quantiles for every server rank, any local sizes.

    Appendix A.1 of Humbert et al. (2023): agent ``j`` sends its ``l_j``-th smallest
    of ``n_j`` scores (``+inf``, i.e. the top of the range, when ``l_j > n_j``), the
    server keeps the ``k``-th smallest message. Following the proof of Theorem 3.2 with
    independent, non-identical messages,
    ``M_k = integral_0^1 P(sum_j Bernoulli(G_j(t)) < k) dt`` with
    ``G_j(t) = P(Bin(n_j, t) >= l_j)``, a polynomial of degree ``sum n_j`` integrated
    exactly (module docstring). Agents with equal ``(n_j, l_j)`` are grouped into one
    binomial.

    Parameters
    ----------
    agent_sizes : tuple of int
        ``n_j >= 1``.
    local_ranks : tuple of int
        ``l_j >= 1``.

    Returns
    -------
    ndarray of shape (m,)
        ``M_k`` for ``k = 1..m`` (read-only); ``M_k = 1`` when fewer than ``k`` agents
        can send a finite message.
    """
    m = len(agent_sizes)
    group_n, group_l, counts, n_finite = _finite_groups(agent_sizes, local_ranks)
    column = np.ones(m)
    if n_finite:
        t_low, t_high = _unequal_window(group_n, group_l, n_finite)

        def integrand(t, one_minus_t):
            return _poisson_binomial_below(t, one_minus_t, group_n, group_l, counts, n_finite)

        column[:n_finite] = _integral_with_reference(
            int(np.sum(group_n * counts)), t_low, t_high, integrand
        )
    column.flags.writeable = False
    return column


class UnequalColumns:
    """Fast (not certified) unequal-size coverage columns, for searching over ranks.

    Every column is integrated with a composite 48-node Gauss-Legendre rule on panels no
    wider than eight standard deviations of the steepest agent's order statistic (a
    power of two, aligned on its multiples), covering the column's own window, so that
    ``G_j = P(Bin(n_j, t) >= l_j)`` can be cached per ``(n_j, l_j, panel)`` across the
    columns of a search; each ``(n_j, l_j)`` keeps its values on one contiguous run of
    panels, extended when a column needs more, and evaluated at once. Accurate to about
    1e-14 against the exact quadrature (tests).

    Parameters
    ----------
    agent_sizes : tuple of int
        ``n_j``.
    """

    def __init__(self, agent_sizes: tuple[int, ...]):
        self.agent_sizes = tuple(int(s) for s in agent_sizes)
        self._windows: dict[tuple[int, int], tuple[float, float]] = {}
        # (width, n_j, l_j) -> (first panel, G, 1 - G) on a contiguous run of panels
        self._values: dict[tuple[float, int, int], tuple[int, np.ndarray, np.ndarray]] = {}

    def _window(self, size: int, rank: int) -> tuple[float, float]:
        key = (size, rank)
        if key not in self._windows:
            tail = TAIL / len(self.agent_sizes)
            self._windows[key] = (
                float(betaincinv(rank, size - rank + 1, tail)),
                1.0 - float(betaincinv(size - rank + 1, rank, tail)),
            )
        return self._windows[key]

    def _g(self, width: float, size: int, rank: int, first: int, last: int):
        """``G`` and ``1 - G`` at the nodes of panels ``first..last``."""
        key = (width, size, rank)
        if key in self._values:
            start, g, one_minus_g = self._values[key]
            stop = start + g.size // APPROXIMATE_NODES  # panels start..stop - 1 are known
        else:
            start, stop = first, first
        if first < start or last >= stop:
            start, stop = min(first, start), max(last + 1, stop)
            t, one_minus_t, _ = _panel_nodes(width, start, stop - 1)
            g = betainc(rank, size - rank + 1, t)
            one_minus_g = betainc(size - rank + 1, rank, one_minus_t)
            self._values[key] = (start, g, one_minus_g)
        nodes = slice((first - start) * APPROXIMATE_NODES, (last - start + 1) * APPROXIMATE_NODES)
        return g[nodes], one_minus_g[nodes]

    def __call__(self, local_ranks) -> np.ndarray:
        """``M_k`` for ``k = 1..m`` at these ranks (fast values)."""
        m = len(self.agent_sizes)
        groups: dict[tuple[int, int], int] = {}
        for size, rank in zip(self.agent_sizes, local_ranks, strict=True):
            if rank <= size:
                groups[(size, int(rank))] = groups.get((size, int(rank)), 0) + 1
        column = np.ones(m)
        n_finite = sum(groups.values())
        if not n_finite:
            return column
        windows = [self._window(size, rank) for size, rank in groups]
        # Standard deviation of Beta(l, n - l + 1), the steepest G_j's transition width.
        spread = min(
            math.sqrt(rank * (size - rank + 1.0) / ((size + 1.0) ** 2 * (size + 2.0)))
            for size, rank in groups
        )
        width = 2.0 ** math.floor(math.log2(8.0 * spread))
        first = math.floor(min(w[0] for w in windows) / width)
        last = math.floor(max(w[1] for w in windows) / width)
        weights = _panel_nodes(width, first, last)[2]
        ordered = sorted(groups.items(), key=lambda item: -item[1])
        distribution: np.ndarray | None = None
        for (size, rank), count in ordered:
            g, one_minus_g = self._g(width, size, rank, first, last)
            distribution = _add_group(distribution, count, g, one_minus_g)
        below = np.cumsum(np.asarray(distribution), axis=1)[:, :n_finite]
        column[:n_finite] = first * width + weights @ below
        return column


@lru_cache(maxsize=256)
def _panel_nodes(width: float, first: int, last: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """48-node Gauss-Legendre rules on ``[p width, (p + 1) width] & [0, 1]``, ``p = first..last``.

    Node ``i`` of panel ``p`` is at index ``(p - first) 48 + i`` (read-only arrays).
    """
    low = np.arange(first, last + 1) * width
    high = np.minimum(np.arange(first + 1, last + 2) * width, 1.0)
    half = (0.5 * np.maximum(high - low, 0.0))[:, None]
    offset = half * (_LEGENDRE_X + 1.0)
    t = (low[:, None] + offset).ravel()
    one_minus_t = ((1.0 - low)[:, None] - offset).ravel()
    weights = (half * _LEGENDRE_W).ravel()
    for array in (t, one_minus_t, weights):
        array.flags.writeable = False
    return t, one_minus_t, weights


def approximate_unequal_column(agent_sizes: tuple[int, ...], local_ranks: tuple[int, ...]):
    """Fast version of :func:`unequal_coverage_column` (one-off; see :class:`UnequalColumns`)."""
    return UnequalColumns(agent_sizes)(local_ranks)


# ------------------------------------------------------------ certified values
@dataclass(frozen=True)
class Certified:
    """A coverage value certified for decisions and reports.

    Attributes
    ----------
    key : Fraction
        The exact value (rational arithmetic), or the quadrature value minus
        :data:`ROUNDING_ALLOWANCE`: a certified lower bound, compared exactly with the
        level.
    exact : bool
        Whether ``key`` is the exact coverage.
    upper : Fraction
        A certified upper bound (``key`` if exact, the quadrature value plus the
        allowance otherwise).
    """

    key: Fraction
    exact: bool
    upper: Fraction

    @property
    def lower_float(self) -> float:
        """``key`` rounded to the nearest float.

        Rounding is monotone, so ``key >= 1 - alpha`` (exactly, for the float ``alpha``)
        gives ``lower_float >= 1 - alpha`` in floating point as well.
        """
        return float(self.key)

    @property
    def upper_float(self) -> float:
        """``upper`` rounded to the nearest float, capped at 1."""
        return min(float(self.upper), 1.0)

    def ties_with(self, other: Certified) -> bool:
        """Equal (exact values) or within :data:`TIE_TOLERANCE` (quadrature values)."""
        if self.exact and other.exact:
            return self.key == other.key
        return abs(self.key - other.key) <= TIE_TOLERANCE


def _from_quadrature(value: float) -> Certified:
    exact = Fraction(value)
    return Certified(
        exact - Fraction(ROUNDING_ALLOWANCE), False, exact + Fraction(ROUNDING_ALLOWANCE)
    )


def certify_column(agent_sizes: tuple[int, ...], local_ranks: tuple[int, ...]) -> list[Certified]:
    """Certified ``M_k`` for ``k = 1..m`` (exact for small degrees, quadrature otherwise)."""
    if sum(agent_sizes) <= EXACT_MAX_DEGREE:
        return [
            Certified(value, True, value)
            for value in exact_coverage_column(agent_sizes, local_ranks)
        ]
    return [_from_quadrature(float(v)) for v in unequal_coverage_column(agent_sizes, local_ranks)]


@lru_cache(maxsize=4096)
def certify_equal(local_rank: int, server_rank: int, n_agents: int, n_per_agent: int) -> Certified:
    """Certified ``M(l, k)`` for equal sizes."""
    if n_agents * n_per_agent <= EXACT_MAX_DEGREE:
        value = exact_coverage_column((n_per_agent,) * n_agents, (local_rank,) * n_agents)[
            server_rank - 1
        ]
        return Certified(value, True, value)
    return _from_quadrature(float(qq_coverage(local_rank, server_rank, n_agents, n_per_agent)))
