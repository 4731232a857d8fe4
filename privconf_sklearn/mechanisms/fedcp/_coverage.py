"""The coverage table of the quantile-of-quantiles estimator: certified and fast values.

Humbert, Le Bars, Bellet and Arlot (ICML 2023), Theorem 3.2 and Appendix A.1: when
agent ``j`` sends the ``l_j``-th smallest of its ``n_j`` scores (``+inf``, the top of
the range, when ``l_j > n_j``) and the server keeps the ``k``-th smallest message, a
fresh score is covered with probability at least (exactly, for continuous scores)

``M_k = integral_0^1 P(sum_j Bernoulli(G_j(t)) < k) dt``,
``G_j(t) = P(Bin(n_j, t) >= l_j)``,

a polynomial integrand of degree ``D = sum_j n_j``. The user guide's FedCP-QQ page
derives it and explains the evaluations:

- exact rationals for ``D <= EXACT_MAX_DEGREE`` (:func:`exact_coverage_column`);
- exact Gauss-Legendre quadrature (``D // 2 + 1`` nodes, only those in the window where
  the integrand is not within ``TAIL`` of 0 or 1): :func:`qq_coverage` (equal sizes),
  :func:`unequal_coverage_column`; certificates allow :data:`ROUNDING_ALLOWANCE` for
  the rounding of the special functions (:class:`Certified`);
- fast values for searching, with 48-node rules: :func:`approximate_coverage` (equal
  sizes) and :class:`FastColumns`. Every decision a fast value within
  :data:`DECISION_MARGIN` could get wrong is taken on certified values.

Probabilities are regularised incomplete beta functions evaluated on the side that
keeps full precision (``1 - G`` from ``1 - t``). Unequal-size evaluations count their
work on a :class:`WorkBudget`.
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
    "Certified",
    "FastColumns",
    "OverBudget",
    "WorkBudget",
    "approximate_coverage",
    "certify_column",
    "certify_equal",
    "exact_coverage_column",
    "qq_coverage",
    "unequal_coverage_column",
]

#: Integrand mass ignored on each side of an evaluation window (at most 2 TAIL in all).
TAIL = 1e-18

#: Largest degree ``D = sum_j n_j`` evaluated in exact rational arithmetic.
EXACT_MAX_DEGREE = 400

#: Subtracted from (added to) a quadrature value to certify a lower (upper) bound: covers
#: the rounding of the double-precision special functions (observed below 1e-13) and
#: the ignored tails (2e-18).
ROUNDING_ALLOWANCE = 1e-12

#: Certified coverages closer than this are ties (exact rational values only if equal).
TIE_TOLERANCE = 1e-12

#: A fast value this close to the level, or to the best candidate, is re-decided on
#: certified values (the fast values are accurate to about 1e-14).
DECISION_MARGIN = 1e-9

#: Nodes of the fast Gauss-Legendre rule on one window (or one panel of it).
APPROXIMATE_NODES = 48

_LEGENDRE_X, _LEGENDRE_W = roots_legendre(APPROXIMATE_NODES)

#: Nodes of the fast rule on each panel of :class:`FastColumns` (24 are as accurate as
#: 48 there, about 3e-15, at half the cost).
PANEL_NODES = 24

_PANEL_X, _PANEL_W = roots_legendre(PANEL_NODES)

#: Groups of at most this many agents enter the Poisson binomial one agent at a time.
_BERNOULLI_STEPS = 8

#: Nodes evaluated at once (bounds the memory of an integrand with many columns).
_BLOCK = 4096

#: Work charged, in the cells of :class:`WorkBudget`, per Poisson-binomial step besides
#: its cells (the call itself, about 8 us), and per node of a new ``G_j`` (two incomplete
#: beta functions, about 280 ns; a cell takes about 2 ns).
CALL_CELLS, G_CELLS = 4000, 140


class OverBudget(Exception):
    """An unequal-size evaluation would exceed its :class:`WorkBudget`."""


class WorkBudget:
    """A deterministic bound on the work of unequal-size evaluations.

    Work is counted in cells: one node times one entry of the Poisson-binomial
    distribution updated. :meth:`spend` raises :class:`OverBudget` before an evaluation
    that would exceed the budget, so the bound does not depend on the machine.
    """

    def __init__(self, cells: float):
        self.left = float(cells)
        #: Whether an evaluation was refused.
        self.exhausted = False

    def spend(self, cells: float) -> None:
        """Take ``cells`` from the budget, or raise :class:`OverBudget` (taking nothing)."""
        if cells > self.left:
            self.exhausted = True
            raise OverBudget
        self.left -= cells


def _cells(counts, width: int) -> int:
    """Cells per node to add groups of ``counts`` agents to ``width`` distribution entries."""
    return sum(
        width * (count if count <= _BERNOULLI_STEPS else min(count + 1, width)) for count in counts
    )


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
    """``M_k`` for ``k = 1..m`` in exact rational arithmetic (``sum n_j <= 400``).

    In the basis ``t^r (1 - t)^(d - r)``, ``G_j`` and ``1 - G_j`` have non-negative
    integer coefficients and multiply by convolution, done as products of integers
    (Kronecker substitution); agents with equal ``(n_j, l_j)`` form one binomial group,
    and ``integral t^r (1 - t)^(D - r) dt = r! (D - r)! / (D + 1)!``.

    Parameters
    ----------
    agent_sizes, local_ranks : tuple of int
        ``n_j >= 1`` and ``l_j >= 1`` (``l_j > n_j``: the message is ``+inf``).

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


# ------------------------------------------------------------------ equal sizes
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


def _equal_window(local_rank, server_rank, m: int, n: int):
    """Broadcast ranks (checked), ``t_low``, ``1 - t_high`` and the result's shape."""
    l_arr, k_arr = np.broadcast_arrays(np.asarray(local_rank), np.asarray(server_rank))
    shape = l_arr.shape
    l_arr, k_arr = l_arr.ravel().astype(np.int64), k_arr.ravel().astype(np.int64)
    if l_arr.size and (l_arr.min() < 1 or l_arr.max() > n):
        raise ValueError(f"local ranks must lie in 1..{n}; got {np.unique(l_arr).tolist()[:10]}.")
    if k_arr.size and (k_arr.min() < 1 or k_arr.max() > m):
        raise ValueError(f"server ranks must lie in 1..{m}; got {np.unique(k_arr).tolist()[:10]}.")
    g_low, one_minus_g_high = (side[k_arr - 1] for side in _server_window(m))
    # G_l(t) = I_t(l, n - l + 1) and 1 - G_l(t) = I_{1-t}(n - l + 1, l), both increasing.
    t_low = betaincinv(l_arr, n - l_arr + 1, g_low)
    one_minus_t_high = betaincinv(n - l_arr + 1, l_arr, one_minus_g_high)
    return l_arr, k_arr, t_low, one_minus_t_high, shape


def qq_coverage(local_rank, server_rank, n_agents: int, n_per_agent: int) -> np.ndarray:
    """``M(l, k)`` of Theorem 3.2 (equal sizes) by exact quadrature, for arrays of pairs.

    Gauss-Legendre with ``m n // 2 + 1`` nodes integrates ``h - H`` exactly, with the
    reference ``H(t) = P(Bin(m n, t) < r)`` (known integral ``r / (m n + 1)``, its
    transition inside the window): only the nodes of the window are evaluated.

    Parameters
    ----------
    local_rank, server_rank : int or array-like of int
        ``l`` in ``1..n`` and ``k`` in ``1..m`` (broadcast together).
    n_agents, n_per_agent : int
        ``m`` and ``n``.

    Returns
    -------
    ndarray of float
        ``M(l, k)``, up to the rounding of the incomplete beta functions (below 1e-13).
    """
    m, n = int(n_agents), int(n_per_agent)
    l_arr, k_arr, t_low, one_minus_t_high, shape = _equal_window(local_rank, server_rank, m, n)
    t_high = 1.0 - one_minus_t_high
    degree = m * n
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
        last = first + max(int(np.searchsorted(np.cumsum(lengths[first:]), _BLOCK, "right")), 1)
        pairs = np.arange(first, last)
        count = lengths[pairs]
        owner = np.repeat(pairs, count)
        index = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
        if index.size:
            _, one_minus_t, weights = nodes(n_nodes, index + starts[owner])
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
    """Fast ``M(l, k)`` (equal sizes, not certified): a 48-node rule on each window."""
    m, n = int(n_agents), int(n_per_agent)
    l_arr, k_arr, t_low, one_minus_t_high, shape = _equal_window(local_rank, server_rank, m, n)
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


def _finite_groups(agent_sizes, local_ranks) -> dict[tuple[int, int], int]:
    """``{(n_j, l_j): count}`` of the finite messages, in agent order."""
    groups: dict[tuple[int, int], int] = {}
    for size, rank in zip(agent_sizes, local_ranks, strict=True):
        if rank <= size:
            groups[(int(size), int(rank))] = groups.get((int(size), int(rank)), 0) + 1
    return groups


@dataclass(frozen=True)
class _Quadrature:
    """The exact quadrature of an unequal-size column: groups, degree, window, reference."""

    groups: tuple[tuple[int, int, int], ...]  # (n_j, l_j, count), largest count first
    degree: int
    reference_rank: int
    low: float
    high: float

    @property
    def n_finite(self) -> int:
        return sum(count for _, _, count in self.groups)

    def cells(self) -> float:
        """Work of the integration (see :class:`WorkBudget`)."""
        n_nodes = self.degree // 2 + 1
        starts, stops = node_ranges(n_nodes, self.low, self.high)
        counts = [count for _, _, count in self.groups]
        per_node = _cells(counts, self.n_finite + 1) + G_CELLS * len(counts)
        return float(stops[0] - starts[0]) * per_node


@lru_cache(maxsize=256)
def _quadrature(agent_sizes: tuple[int, ...], local_ranks: tuple[int, ...]) -> _Quadrature | None:
    found = _finite_groups(agent_sizes, local_ranks)
    if not found:
        return None
    groups = tuple((*key, found[key]) for key in sorted(found, key=lambda key: (-found[key], key)))
    group_n, group_l, counts = np.array(groups, dtype=np.int64).T
    tail = TAIL / int(counts.sum())
    t_low = float(betaincinv(group_l, group_n - group_l + 1, tail).min())
    t_high = 1.0 - float(betaincinv(group_n - group_l + 1, group_l, tail).min())
    degree = int(np.sum(group_n * counts))
    middle = 0.5 * (t_low + t_high)
    r = min(max(round(degree * middle), 1), degree)
    low = min(t_low, float(betaincinv(r, degree - r + 1, TAIL)))
    high = max(t_high, 1.0 - float(betaincinv(degree - r + 1, r, TAIL)))
    return _Quadrature(groups, degree, r, low, high)


@lru_cache(maxsize=256)
def unequal_coverage_column(agent_sizes: tuple[int, ...], local_ranks: tuple[int, ...]):
    """``M_k`` for ``k = 1..m``, any local sizes, by exact quadrature (Appendix A.1).

    As :func:`qq_coverage`, with the reference ``H(t) = P(Bin(D, t) < r)`` centred in
    the union of the agents' windows; agents with equal ``(n_j, l_j)`` form one
    binomial.

    Parameters
    ----------
    agent_sizes, local_ranks : tuple of int
        ``n_j >= 1`` and ``l_j >= 1`` (``l_j > n_j``: the message is ``+inf``).

    Returns
    -------
    ndarray of shape (m,)
        ``M_k`` (read-only); ``1`` when fewer than ``k`` messages are finite.
    """
    column = np.ones(len(agent_sizes))
    plan = _quadrature(agent_sizes, local_ranks)
    if plan is not None:
        degree, r = plan.degree, plan.reference_rank
        total = np.float64(r / (degree + 1))
        for t, one_minus_t, weights in node_blocks(degree // 2 + 1, plan.low, plan.high, _BLOCK):
            distribution: np.ndarray | None = None
            for size, rank, count in plan.groups:
                one_minus_g = betainc(size - rank + 1, rank, one_minus_t)
                g = betainc(rank, size - rank + 1, t)
                distribution = _add_group(distribution, count, g, one_minus_g)
            values = np.cumsum(np.asarray(distribution), axis=1)[:, : plan.n_finite]  # P(S < k)
            reference = betainc(degree - r + 1, r, one_minus_t)  # P(Bin(D, t) < r)
            total = total + weights @ (values - reference[:, None])
        column[: plan.n_finite] = total
    column.flags.writeable = False
    return column


@lru_cache(maxsize=256)
def _panel_nodes(width: float, first: int, last: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gauss-Legendre rules on ``[p width, (p + 1) width] & [0, 1]``, ``p = first..last``."""
    low = np.arange(first, last + 1) * width
    high = np.minimum(np.arange(first + 1, last + 2) * width, 1.0)
    half = (0.5 * np.maximum(high - low, 0.0))[:, None]
    offset = half * (_PANEL_X + 1.0)
    rule = (
        (low[:, None] + offset).ravel(),
        ((1.0 - low)[:, None] - offset).ravel(),
        (half * _PANEL_W).ravel(),
    )
    for array in rule:
        array.flags.writeable = False
    return rule


class FastColumns:
    """Fast (not certified) ``M_k`` for any ranks of agents of fixed sizes, for searching.

    ``P(S < k)`` is integrated by a composite 24-node rule on panels no wider than
    eight standard deviations of the steepest agent's order statistic (a power of two,
    aligned on its multiples) covering ``[a_k, b_k]``: left of ``a_k`` fewer than ``k``
    agents, and right of ``b_k`` more than ``n_finite - k`` agents, have ``G_j`` within
    ``TAIL / m`` of 0, respectively of 1, so ``P(S < k)`` is within ``TAIL`` of 1,
    respectively 0. On each panel only the agents whose own window meets it enter the
    Poisson binomial; the agents whose window lies left of the panel count as one sure
    message each (``G_j`` within ``TAIL / m`` of 1), the others as none. The
    distribution is kept to its first ``k`` entries, and ``G_j`` is cached per
    ``(n_j, l_j)`` across the calls of a search. Accurate to about 1e-14 against the
    exact quadrature (tests).

    Parameters
    ----------
    agent_sizes : tuple of int
        ``n_j``.
    budget : WorkBudget
        Charged for every evaluation (:data:`CALL_CELLS` per Poisson-binomial step on
        a panel, plus its cells).
    """

    def __init__(self, agent_sizes: tuple[int, ...], budget: WorkBudget):
        self.agent_sizes = tuple(int(s) for s in agent_sizes)
        self.budget = budget
        self._windows: dict[tuple[int, int], tuple[float, float, float]] = {}
        self._values: dict[tuple[float, int, int], tuple[int, np.ndarray, np.ndarray]] = {}
        self._cache: dict[tuple[tuple[int, ...], int], float] = {}

    def _window(self, size: int, rank: int) -> tuple[float, float, float]:
        """``G``'s window ``(low, high)`` and the standard deviation of its transition."""
        if (size, rank) not in self._windows:
            tail = TAIL / len(self.agent_sizes)
            self._windows[(size, rank)] = (
                float(betaincinv(rank, size - rank + 1, tail)),
                1.0 - float(betaincinv(size - rank + 1, rank, tail)),
                math.sqrt(rank * (size - rank + 1.0) / ((size + 1.0) ** 2 * (size + 2.0))),
            )
        return self._windows[(size, rank)]

    def _missing(self, key: tuple[float, int, int], first: int, last: int) -> int:
        """Panels :meth:`_g` would evaluate to cover ``first..last`` (its run stays contiguous)."""
        start, values, _ = self._values.get(key, (first, np.empty(0), None))
        stop = start + values.size // PANEL_NODES
        return (
            (last - first + 1) if stop == start else max(start - first, 0) + max(last + 1 - stop, 0)
        )

    def _g(self, key: tuple[float, int, int], first: int, last: int):
        """``G`` and ``1 - G`` at the nodes of panels ``first..last``.

        Each ``(n_j, l_j)`` keeps its values on one contiguous run of panels, extended
        (only the new panels evaluated) when a call needs more.
        """
        width, size, rank = key
        start, g, one_minus_g = self._values.get(key, (first, np.empty(0), np.empty(0)))
        stop = start + g.size // PANEL_NODES
        for low, high, before in ((first, start - 1, True), (stop, last, False)):
            if low > high:
                continue
            t, one_minus_t, _ = _panel_nodes(width, low, high)
            new = betainc(rank, size - rank + 1, t), betainc(size - rank + 1, rank, one_minus_t)
            g = np.concatenate([new[0], g] if before else [g, new[0]])
            one_minus_g = np.concatenate([new[1], one_minus_g] if before else [one_minus_g, new[1]])
            start = min(start, low)
        self._values[key] = (start, g, one_minus_g)
        rows = slice((first - start) * PANEL_NODES, (last - start + 1) * PANEL_NODES)
        return g[rows], one_minus_g[rows]

    def __call__(self, local_ranks, k: int) -> float:
        """``M_k`` at these ranks (``l_j > n_j``: ``+inf``)."""
        key = (tuple(int(r) for r in local_ranks), int(k))
        if key not in self._cache:
            self._cache[key] = self._evaluate(*key)
        return self._cache[key]

    def _plan(self, local_ranks: tuple[int, ...], k: int):
        """Mesh ``(width, first, last)``, the steps ``(key, count, p0, p1)`` and their cost.

        None when fewer than ``k`` messages are finite (``M_k = 1``).
        """
        groups = _finite_groups(self.agent_sizes, local_ranks)
        if k > sum(groups.values()):
            return None
        windows = sorted(self._window(*key) for key in groups for _ in range(groups[key]))
        start, stop = windows[k - 1][0], sorted(high for _, high, _ in windows)[k - 1]
        width = 2.0 ** math.floor(math.log2(8.0 * min(spread for _, _, spread in windows)))
        first, last = math.floor(start / width), math.floor(stop / width)
        steps, cost = [], 0.0
        for (size, rank), count in groups.items():
            low, high, _ = self._window(size, rank)
            p0, p1 = max(math.floor(low / width), first), min(math.floor(high / width), last)
            if p0 <= p1:
                key = (width, size, rank)
                steps.append((key, count, p0, p1))
                cost += CALL_CELLS + (p1 - p0 + 1) * PANEL_NODES * _cells([count], k)
                cost += self._missing(key, p0, p1) * PANEL_NODES * G_CELLS
        return (width, first, last), steps, cost

    def cost(self, local_ranks, k: int) -> float:
        """The cells :meth:`__call__` would charge for these ranks (0 when cached)."""
        key = (tuple(int(r) for r in local_ranks), int(k))
        found = None if key in self._cache else self._plan(*key)
        return 0.0 if found is None else found[2]

    def _evaluate(self, local_ranks: tuple[int, ...], k: int) -> float:
        found = self._plan(local_ranks, k)
        if found is None:
            return 1.0
        (width, first, last), steps, cost = found
        self.budget.spend(cost)
        nodes = (last - first + 1) * PANEL_NODES
        below = np.zeros((nodes, k))
        below[:, 0] = 1.0
        sure = np.zeros(nodes, dtype=np.int64)  # agents whose window is left of the node
        for (size, rank), count in _finite_groups(self.agent_sizes, local_ranks).items():
            high = self._window(size, rank)[1]
            sure[max(math.floor(high / width) + 1 - first, 0) * PANEL_NODES :] += count
        for key, count, p0, p1 in steps:
            rows = slice((p0 - first) * PANEL_NODES, (p1 + 1 - first) * PANEL_NODES)
            below[rows] = _truncated_add(below[rows], count, *self._g(key, p0, p1))
        # P(S < k) = P(S_active < k - sure): the (k - 1 - sure)-th cumulative entry.
        cumulative = np.cumsum(below, axis=1)
        column = k - 1 - sure
        inside = np.where(column >= 0, cumulative[np.arange(nodes), np.maximum(column, 0)], 0.0)
        weights = _panel_nodes(width, first, last)[2]
        return float(first * width + weights @ inside)


def _truncated_add(below: np.ndarray, count: int, g: np.ndarray, one_minus_g: np.ndarray):
    """``P(S = s)``, ``s < k``, after adding ``Bin(count, G)`` to ``S`` (rows: nodes)."""
    if count <= _BERNOULLI_STEPS:
        for _ in range(count):
            shifted = below[:, :-1] * g[:, None]
            below *= one_minus_g[:, None]
            below[:, 1:] += shifted
        return below
    pmf = _binomial_pmf(count, g, one_minus_g)[:, : below.shape[1]]
    combined = np.zeros_like(below)
    for u in range(pmf.shape[1]):
        combined[:, u:] += below[:, : below.shape[1] - u] * pmf[:, u : u + 1]
    return combined


# ------------------------------------------------------------ certified values
@dataclass(frozen=True)
class Certified:
    """A coverage value certified for decisions and reports.

    Attributes
    ----------
    key : Fraction
        The exact value, or the quadrature value minus :data:`ROUNDING_ALLOWANCE`: a
        certified lower bound, compared exactly with the level.
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
        """``key`` rounded to the nearest float (monotone: ``key >= 1 - alpha`` survives)."""
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
    allowance = Fraction(ROUNDING_ALLOWANCE)
    return Certified(exact - allowance, False, exact + allowance)


def certify_column(
    agent_sizes: tuple[int, ...], local_ranks: tuple[int, ...], budget: WorkBudget
) -> list[Certified]:
    """Certified ``M_k`` for ``k = 1..m`` (exact for small degrees, quadrature otherwise).

    Raises
    ------
    OverBudget
        If the quadrature would exceed ``budget`` (charged whether or not it is cached).
    """
    if sum(agent_sizes) <= EXACT_MAX_DEGREE:
        return [Certified(v, True, v) for v in exact_coverage_column(agent_sizes, local_ranks)]
    plan = _quadrature(agent_sizes, local_ranks)
    budget.spend(0.0 if plan is None else plan.cells())
    return [_from_quadrature(float(v)) for v in unequal_coverage_column(agent_sizes, local_ranks)]


@lru_cache(maxsize=4096)
def certify_equal(local_rank: int, server_rank: int, n_agents: int, n_per_agent: int) -> Certified:
    """Certified ``M(l, k)`` for equal sizes."""
    if n_agents * n_per_agent <= EXACT_MAX_DEGREE:
        sizes, ranks = (n_per_agent,) * n_agents, (local_rank,) * n_agents
        value = exact_coverage_column(sizes, ranks)[server_rank - 1]
        return Certified(value, True, value)
    return _from_quadrature(float(qq_coverage(local_rank, server_rank, n_agents, n_per_agent)))
