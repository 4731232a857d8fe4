"""The coverage table ``M_k`` of the quantile-of-quantiles estimator: certified and fast values.

Humbert, Le Bars, Bellet and Arlot (ICML 2023), Theorem 3.2 and Appendix A.1:
``M_k = integral_0^1 P(sum_j Bernoulli(G_j(t)) < k) dt`` with ``G_j(t) = P(Bin(n_j, t) >= l_j)``,
in exact rationals, by exact Gauss-Legendre quadrature (certified) or by fast rules (for
searching), as the user guide's FedCP-QQ page explains.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from itertools import accumulate
from operator import mul
from typing import NamedTuple

import numpy as np
from scipy.special import betainc, betaincinv, gammaln, roots_legendre, xlogy

from ._quadrature import node_blocks, node_ranges, nodes

#: Integrand mass ignored on each side of an evaluation window (at most 2 TAIL in all).
TAIL = 1e-18
#: Largest degree ``D = sum_j n_j`` evaluated in exact rational arithmetic.
EXACT_MAX_DEGREE = 400
#: Certifies a quadrature value (its rounding is below 1e-13, the ignored tails 2e-18).
ROUNDING_ALLOWANCE = 1e-12
#: Certified coverages closer than this are ties (exact rational values only if equal).
TIE_TOLERANCE = 1e-12
#: Fast values (accurate to about 1e-14) this close to a decision are re-decided certified.
DECISION_MARGIN = 1e-9
#: Nodes of the fast rule on an equal-size window, and on a panel of :class:`FastColumns`.
APPROXIMATE_NODES, PANEL_NODES = 48, 24
_LEGENDRE_X, _LEGENDRE_W = roots_legendre(APPROXIMATE_NODES)
_PANEL_X, _PANEL_W = roots_legendre(PANEL_NODES)
#: Groups of at most this many agents enter the Poisson binomial one agent at a time.
_BERNOULLI_STEPS = 8
#: Nodes evaluated at once (bounds the memory of an integrand with many columns).
_BLOCK = 4096
#: Cells charged per Poisson-binomial step (about 8 us) and per node of a new ``G_j`` (280 ns).
CALL_CELLS, G_CELLS = 4000, 140


class OverBudget(Exception):
    """An unequal-size evaluation would exceed its :class:`WorkBudget`."""


class WorkBudget:
    """Work left for unequal-size evaluations, in cells (a node times a distribution entry)."""

    def __init__(self, cells: float):
        self.left = float(cells)
        self.exhausted = False  # whether an evaluation was refused

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


def _read_only(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """``arrays``, made read-only (they are cached)."""
    for array in arrays:
        array.flags.writeable = False
    return arrays


@lru_cache(maxsize=64)
def exact_coverage_column(
    agent_sizes: tuple[int, ...], local_ranks: tuple[int, ...]
) -> tuple[Fraction, ...]:
    """``M_k``, ``k = 1..m``, in exact rationals (``sum n_j <= EXACT_MAX_DEGREE``)."""
    degree = sum(agent_sizes)
    if degree > EXACT_MAX_DEGREE:
        raise ValueError(f"exact coverage is computed for sum(n_j) <= {EXACT_MAX_DEGREE}.")
    # Every coefficient of every product is at most prod_j 2^(n_j) = 2^D: no carries.
    slot = 8 * ((degree + 2) // 8 + 1)
    groups = Counter(
        (size, min(rank, size + 1)) for size, rank in zip(agent_sizes, local_ranks, strict=True)
    )
    distribution = [1]  # distribution[s]: P(S = s) as a packed polynomial
    for (size, rank), count in sorted(groups.items()):
        # G and 1 - G as integers sum_i C(n, i) 2^(slot i) (Kronecker substitution).
        up = sum(math.comb(size, i) << (slot * i) for i in range(rank, size + 1))
        low = sum(math.comb(size, i) << (slot * i) for i in range(rank))
        up_powers = list(accumulate([up] * count, mul, initial=1))
        low_powers = list(accumulate([low] * count, mul, initial=1))
        group = [
            math.comb(count, u) * up_powers[u] * low_powers[count - u] for u in range(count + 1)
        ]
        combined = [0] * (len(distribution) + count)
        for s, poly in enumerate(distribution):
            for u, part in enumerate(group):
                combined[s + u] += poly * part
        distribution = combined
    # integral_0^1 t^r (1 - t)^(D - r) dt = r! (D - r)! / (D + 1)!
    weights = [math.factorial(r) * math.factorial(degree - r) for r in range(degree + 1)]
    width = slot // 8
    column, below = [], 0
    for s in range(len(agent_sizes)):
        raw = distribution[s].to_bytes(width * (degree + 1), "little")
        below += sum(
            int.from_bytes(raw[r * width : (r + 1) * width], "little") * weight
            for r, weight in enumerate(weights)
        )
        column.append(Fraction(below, math.factorial(degree + 1)))
    return tuple(column)


@lru_cache(maxsize=64)
def _server_window(m: int) -> tuple[np.ndarray, ...]:
    """For ``k = 1..m``: ``P(Bin(m, G) >= k) < TAIL`` below ``g_low``, ``< k`` above ``g_high``.

    Returns ``g_low`` and ``1 - g_high`` (read-only).
    """
    k = np.arange(1, m + 1)
    return _read_only(betaincinv(k, m - k + 1, TAIL), betaincinv(m - k + 1, k, TAIL))


def _equal_window(local_rank, server_rank, m: int, n: int):
    """Broadcast ranks (checked), ``t_low``, ``1 - t_high`` and the result's shape."""
    l_arr, k_arr = np.broadcast_arrays(np.asarray(local_rank), np.asarray(server_rank))
    shape = l_arr.shape
    l_arr, k_arr = l_arr.ravel().astype(np.int64), k_arr.ravel().astype(np.int64)
    for name, ranks, top in (("local", l_arr, n), ("server", k_arr, m)):
        if ranks.size and (ranks.min() < 1 or ranks.max() > top):
            raise ValueError(
                f"{name} ranks must lie in 1..{top}; got {np.unique(ranks).tolist()[:10]}."
            )
    g_low, one_minus_g_high = (side[k_arr - 1] for side in _server_window(m))
    # G_l(t) = I_t(l, n - l + 1) and 1 - G_l(t) = I_{1-t}(n - l + 1, l), both increasing.
    t_low = betaincinv(l_arr, n - l_arr + 1, g_low)
    one_minus_t_high = betaincinv(n - l_arr + 1, l_arr, one_minus_g_high)
    return l_arr, k_arr, t_low, one_minus_t_high, shape


def qq_coverage(local_rank, server_rank, n_agents: int, n_per_agent: int) -> np.ndarray:
    """``M(l, k)`` of Theorem 3.2 (equal sizes) by exact quadrature, for arrays of pairs.

    Only the window's nodes of the ``m n // 2 + 1``-node rule are evaluated, integrating
    ``h - H`` with ``H(t) = P(Bin(m n, t) < r)`` (integral ``r / (m n + 1)``).
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


def _add_group(distribution, count: int, g: np.ndarray, one_minus_g: np.ndarray, keep=None):
    """``P(S = s)`` (rows: nodes) after adding ``Bin(count, G)`` to ``S``, for ``s < keep``.

    The first group (``distribution`` None) enters as its binomial, small groups one
    Bernoulli at a time, large ones by convolution with their binomial.
    """
    if distribution is not None and count <= _BERNOULLI_STEPS:
        for _ in range(count):
            step = np.zeros((distribution.shape[0], distribution.shape[1] + 1))
            step[:, :-1] = distribution * one_minus_g[:, None]
            step[:, 1:] += distribution * g[:, None]
            distribution = step[:, :keep]
        return distribution
    s = np.arange(count + 1)
    log_choose = gammaln(count + 1) - gammaln(s + 1) - gammaln(count - s + 1)
    pmf = np.exp(log_choose + xlogy(s, g[:, None]) + xlogy(count - s, one_minus_g[:, None]))
    if distribution is None:
        return pmf
    if keep is None:
        combined = np.zeros((distribution.shape[0], distribution.shape[1] + count))
        for start in range(distribution.shape[1]):
            combined[:, start : start + count + 1] += distribution[:, start : start + 1] * pmf
        return combined
    combined = np.zeros_like(distribution)
    for u in range(min(count + 1, keep)):
        combined[:, u:] += distribution[:, : keep - u] * pmf[:, u : u + 1]
    return combined


def _finite_groups(agent_sizes, local_ranks) -> dict[tuple[int, int], int]:
    """``{(n_j, l_j): count}`` of the finite messages, in agent order."""
    groups: dict[tuple[int, int], int] = {}
    for size, rank in zip(agent_sizes, local_ranks, strict=True):
        if rank <= size:
            groups[(int(size), int(rank))] = groups.get((int(size), int(rank)), 0) + 1
    return groups


class _Quadrature(NamedTuple):
    """The exact quadrature of an unequal-size column."""

    groups: tuple[tuple[int, int, int], ...]  # (n_j, l_j, count), largest count first
    n_finite: int
    degree: int
    reference_rank: int
    low: float
    high: float
    cells: float  # the work of the integration (see WorkBudget)


@lru_cache(maxsize=256)
def _quadrature(agent_sizes: tuple[int, ...], local_ranks: tuple[int, ...]) -> _Quadrature | None:
    """As in :func:`qq_coverage`, ``H`` centred in the agents' windows (None: no finite message)."""
    found = _finite_groups(agent_sizes, local_ranks)
    if not found:
        return None
    groups = tuple((*key, found[key]) for key in sorted(found, key=lambda key: (-found[key], key)))
    group_n, group_l, counts = np.array(groups, dtype=np.int64).T
    n_finite = int(counts.sum())
    t_low = float(betaincinv(group_l, group_n - group_l + 1, TAIL / n_finite).min())
    t_high = 1.0 - float(betaincinv(group_n - group_l + 1, group_l, TAIL / n_finite).min())
    degree = int(np.sum(group_n * counts))
    r = min(max(round(degree * (0.5 * (t_low + t_high))), 1), degree)
    low = min(t_low, float(betaincinv(r, degree - r + 1, TAIL)))
    high = max(t_high, 1.0 - float(betaincinv(degree - r + 1, r, TAIL)))
    starts, stops = node_ranges(degree // 2 + 1, low, high)
    per_node = _cells(counts.tolist(), n_finite + 1) + G_CELLS * len(counts)
    return _Quadrature(
        groups, n_finite, degree, r, low, high, float(stops[0] - starts[0]) * per_node
    )


@lru_cache(maxsize=256)
def unequal_coverage_column(agent_sizes: tuple[int, ...], local_ranks: tuple[int, ...]):
    """``M_k``, ``k = 1..m``, by exact quadrature (Appendix A.1; read-only)."""
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
    return _read_only(column)[0]


@lru_cache(maxsize=256)
def _panel_nodes(width: float, first: int, last: int) -> tuple[np.ndarray, ...]:
    """Gauss-Legendre rules on ``[p width, (p + 1) width] & [0, 1]``, ``p = first..last``."""
    low = np.arange(first, last + 1) * width
    high = np.minimum(np.arange(first + 1, last + 2) * width, 1.0)
    half = (0.5 * np.maximum(high - low, 0.0))[:, None]
    offset = half * (_PANEL_X + 1.0)
    return _read_only(
        (low[:, None] + offset).ravel(),
        ((1.0 - low)[:, None] - offset).ravel(),
        (half * _PANEL_W).ravel(),
    )


class FastColumns:
    """Fast (not certified) ``M_k`` for any ranks of agents of fixed sizes, for searching.

    A composite 24-node rule on panels of the steepest agent's transition, each panel
    with only the agents whose window meets it (the user guide's FedCP-QQ page gives the
    scheme); ``G_j`` is cached per ``(n_j, l_j)`` and every evaluation is charged to
    ``budget`` (a :class:`WorkBudget`).
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

    def _missing(self, key: tuple[float, int, int], first: int, last: int):
        """The run of panels ``key`` keeps, and the ranges it lacks to cover ``first..last``."""
        start, g, one_minus_g = self._values.get(key, (first, np.empty(0), np.empty(0)))
        stop = start + g.size // PANEL_NODES
        ranges = ((first, start - 1, True), (stop, last, False))
        return (start, g, one_minus_g), [
            (low, high, before) for low, high, before in ranges if low <= high
        ]

    def _g(self, key: tuple[float, int, int], first: int, last: int) -> tuple[np.ndarray, ...]:
        """``G`` and ``1 - G`` on panels ``first..last`` (each key keeps one contiguous run)."""
        width, size, rank = key
        (start, g, one_minus_g), missing = self._missing(key, first, last)
        for low, high, before in missing:
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

    def cost(self, local_ranks, k: int) -> float:
        """The cells :meth:`__call__` would charge for these ranks (0 when cached)."""
        key = (tuple(int(r) for r in local_ranks), int(k))
        found = None if key in self._cache else self._plan(*key)
        return 0.0 if found is None else found[3]

    def _plan(self, local_ranks: tuple[int, ...], k: int):
        """Mesh, steps ``(key, count, p0, p1)``, sure messages ``(panel, count)`` and cost.

        None when fewer than ``k`` messages are finite (``M_k = 1``).
        """
        groups = _finite_groups(self.agent_sizes, local_ranks)
        if k > sum(groups.values()):
            return None
        windows = sorted(self._window(*key) for key in groups for _ in range(groups[key]))
        start, stop = windows[k - 1][0], sorted(high for _, high, _ in windows)[k - 1]
        width = 2.0 ** math.floor(math.log2(8.0 * min(spread for _, _, spread in windows)))
        first, last = math.floor(start / width), math.floor(stop / width)
        steps, sure, cost = [], [], 0.0
        for (size, rank), count in groups.items():
            low, high, _ = self._window(size, rank)
            sure.append((max(math.floor(high / width) + 1 - first, 0), count))
            p0, p1 = max(math.floor(low / width), first), min(math.floor(high / width), last)
            if p0 <= p1:
                key = (width, size, rank)
                steps.append((key, count, p0, p1))
                cost += CALL_CELLS + (p1 - p0 + 1) * PANEL_NODES * _cells([count], k)
                panels = sum(high - low + 1 for low, high, _ in self._missing(key, p0, p1)[1])
                cost += panels * PANEL_NODES * G_CELLS
        return (width, first, last), steps, sure, cost

    def _evaluate(self, local_ranks: tuple[int, ...], k: int) -> float:
        found = self._plan(local_ranks, k)
        if found is None:
            return 1.0
        (width, first, last), steps, sure_from, cost = found
        self.budget.spend(cost)
        n_nodes = (last - first + 1) * PANEL_NODES
        below = np.zeros((n_nodes, k))
        below[:, 0] = 1.0
        sure = np.zeros(n_nodes, dtype=np.int64)  # agents whose window is left of the node
        for panel, count in sure_from:
            sure[panel * PANEL_NODES :] += count
        for key, count, p0, p1 in steps:
            rows = slice((p0 - first) * PANEL_NODES, (p1 + 1 - first) * PANEL_NODES)
            g, one_minus_g = self._g(key, p0, p1)
            below[rows] = _add_group(below[rows], count, g, one_minus_g, keep=k)
        # P(S < k) = P(S_active < k - sure): the (k - 1 - sure)-th cumulative entry.
        cumulative = np.cumsum(below, axis=1)
        column = k - 1 - sure
        inside = np.where(column >= 0, cumulative[np.arange(n_nodes), np.maximum(column, 0)], 0.0)
        return float(first * width + _panel_nodes(width, first, last)[2] @ inside)


@dataclass(frozen=True)
class Certified:
    """A coverage certified for decisions and reports.

    ``key`` is the exact value (``exact``) or the quadrature value minus
    :data:`ROUNDING_ALLOWANCE`, a lower bound compared exactly with the level; ``upper``
    is ``key`` if exact, the quadrature value plus the allowance otherwise.
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
    """Certified ``M_k``, ``k = 1..m``; :class:`OverBudget` past ``budget`` (even if cached)."""
    if sum(agent_sizes) <= EXACT_MAX_DEGREE:
        return [Certified(v, True, v) for v in exact_coverage_column(agent_sizes, local_ranks)]
    plan = _quadrature(agent_sizes, local_ranks)
    budget.spend(0.0 if plan is None else plan.cells)
    return [_from_quadrature(float(v)) for v in unequal_coverage_column(agent_sizes, local_ranks)]


@lru_cache(maxsize=4096)
def certify_equal(local_rank: int, server_rank: int, n_agents: int, n_per_agent: int) -> Certified:
    """Certified ``M(l, k)`` for equal sizes."""
    if n_agents * n_per_agent <= EXACT_MAX_DEGREE:
        sizes, ranks = (n_per_agent,) * n_agents, (local_rank,) * n_agents
        value = exact_coverage_column(sizes, ranks)[server_rank - 1]
        return Certified(value, True, value)
    return _from_quadrature(float(qq_coverage(local_rank, server_rank, n_agents, n_per_agent)))
