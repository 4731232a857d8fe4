"""Searching the ranks of the quantile-of-quantiles estimator, from public sizes only.

Humbert, Le Bars, Bellet and Arlot (ICML 2023). Equal local sizes
(:func:`equal_table`): ``(l*, k*) = argmin {M(l, k) : M(l, k) >= level}`` of their
Eq. (6), optionally with ``l <= max_rank`` (FedCP2-QQ agents must reach their corrected
rank within their data), found from the frontier ``l_min(k)`` (:func:`qq_frontier`).
Unequal sizes (:func:`unequal_table`): the agents' ranks are searched as well (their
Appendix A.1 fixes them at ``ceil((1 - alpha)(n_j + 1))`` and searches only ``k``),
within a :class:`~._coverage.WorkBudget`.

Searches use fast coverage values (:mod:`._coverage`); every decision a fast value
could get wrong (within ``DECISION_MARGIN`` of the level or of the best candidate) is
taken on certified values, and the returned coverage is certified.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
from scipy.special import betainc

from ._coverage import (
    APPROXIMATE_NODES,
    DECISION_MARGIN,
    Certified,
    FastColumns,
    OverBudget,
    WorkBudget,
    approximate_coverage,
    certify_column,
    certify_equal,
    qq_coverage,
)

__all__ = [
    "CERTIFY_CELLS",
    "SEARCH_CELLS",
    "QQFrontier",
    "Table",
    "equal_table",
    "qq_frontier",
    "threshold_sizes",
    "thresholded_table",
    "unequal_table",
]

#: Work budgets of one unequal-size search and of certifying its results, in the cells of
#: :class:`~._coverage.WorkBudget` (about 2 ns each: 0.5 and 0.4 s of CPU).
SEARCH_CELLS, CERTIFY_CELLS = 2.5e8, 2e8


@dataclass(frozen=True)
class Table:
    """Certified ranks: agent ``j`` sends the ``l_j``-th smallest of ``n'_j`` scores.

    Attributes
    ----------
    sample_sizes : tuple of int
        ``n'_j``, the scores each agent uses.
    local_ranks : tuple of int
        ``l_j``; ``l_j > n'_j`` means the message is ``+inf`` (the top of the range).
    server_rank : int
        ``k``: the server keeps the ``k``-th smallest message.
    coverage : Certified
        ``M_k`` at these ranks (Theorem 3.2, Appendix A.1), at least the level.
    """

    sample_sizes: tuple[int, ...]
    local_ranks: tuple[int, ...]
    server_rank: int
    coverage: Certified


# ------------------------------------------------------------------ equal sizes
@dataclass(frozen=True)
class QQFrontier:
    """For each server rank ``k``, the smallest local rank reaching the level.

    Attributes
    ----------
    n_agents, n_per_agent : int
        ``m`` and ``n``.
    level : Fraction
        The level, exactly.
    ranks : tuple of int
        ``l_min(k)`` for ``k = 1..m`` by the fast values; ``n + 1`` when no local rank
        reaches the level. Non-increasing in ``k``.
    values : tuple of float
        Fast ``M(l_min(k), k)`` (1.0 where none).
    below : tuple of float
        Fast ``M(l_min(k) - 1, k)`` (0.0 when ``l_min(k) = 1``).
    """

    n_agents: int
    n_per_agent: int
    level: Fraction
    ranks: tuple[int, ...]
    values: tuple[float, ...]
    below: tuple[float, ...]


def _rank_guess(m: int, n: int, level: float) -> np.ndarray:
    """For each ``k``, the smallest ``l`` with ``P(Beta(l, n - l + 1) <= level) <= k/(m+1)``.

    ``M(l, k)`` is the mean of the ``k``-th smallest of ``m`` such Beta variables, close
    to their ``k / (m + 1)`` quantile: the guess is usually within one rank.
    """
    target = np.arange(1, m + 1) / (m + 1.0)
    low, high = np.zeros(m, dtype=np.int64), np.full(m, n + 1, dtype=np.int64)
    while (open_ := high - low > 1).any():
        middle = (low + high) // 2
        ok = betainc(middle, n - middle + 1, level) <= target
        high = np.where(open_ & ok, middle, high)
        low = np.where(open_ & ~ok, middle, low)
    return high


def _fast_values(m: int, n: int):
    """The fast evaluator for ``(m, n)``: the quadrature itself when its window is tiny."""
    if m * n <= 2 * APPROXIMATE_NODES:
        return lambda ranks, ks: qq_coverage(ranks, ks, m, n)
    return lambda ranks, ks: approximate_coverage(ranks, ks, m, n)


class _Brackets:
    """``(low, high]`` brackets of ``l_min(k)`` for every ``k``, narrowed by probes.

    ``M`` is non-decreasing in ``l`` and in ``k`` (Appendix A.2 of Humbert et al.
    2023): a feasible ``(l, k)`` is feasible for every ``k' >= k``, an infeasible one
    for no ``k' <= k``, so each probe narrows the brackets of other server ranks too.
    """

    def __init__(self, m: int, n: int, level: float):
        self.m, self.n, self.level = m, n, level
        self.evaluate = _fast_values(m, n)
        self.low = np.zeros(m, dtype=np.int64)
        self.high = np.full(m, n + 1, dtype=np.int64)
        self.known: dict[tuple[int, int], float] = {}

    def probe(self, rows: np.ndarray, ranks: np.ndarray) -> None:
        values = self.evaluate(ranks, rows + 1)
        for row, rank, value in zip(rows.tolist(), ranks.tolist(), values.tolist(), strict=True):
            self.known[(rank, row + 1)] = value
        feasible = values >= self.level
        high_at = np.full(self.m, self.n + 1, dtype=np.int64)
        np.minimum.at(high_at, rows[feasible], ranks[feasible])
        low_at = np.zeros(self.m, dtype=np.int64)
        np.maximum.at(low_at, rows[~feasible], ranks[~feasible])
        np.minimum(self.high, np.minimum.accumulate(high_at), out=self.high)
        np.maximum(self.low, np.maximum.accumulate(low_at[::-1])[::-1], out=self.low)

    def gallop(self, step: np.ndarray) -> bool:
        """One round: probe every open bracket (galloping out while unbounded)."""
        rows = np.flatnonzero(self.high - self.low > 1)
        if rows.size == 0:
            return False
        lo, hi = self.low[rows], self.high[rows]
        up, down = hi == self.n + 1, lo == 0
        ranks = np.where(
            up & ~down,
            np.minimum(lo + step[rows], self.n),
            np.where(down & ~up, np.maximum(hi - step[rows], 1), (lo + hi) // 2),
        )
        self.probe(rows, np.clip(ranks, np.maximum(lo + 1, 1), np.minimum(hi - 1, self.n)))
        step[rows] *= 2
        return True

    def value(self, rank: int, k: int, default: float) -> float:
        return self.known[(rank, k)] if 1 <= rank <= self.n else default


@lru_cache(maxsize=256)
def qq_frontier(n_agents: int, n_per_agent: int, level: Fraction) -> QQFrontier:
    """``l_min(k)`` for every ``k`` (fast values), galloping from a guess, then bisecting.

    Each round evaluates one probe per ``k`` whose bracket is still open, all at once.
    """
    m, n = int(n_agents), int(n_per_agent)
    brackets = _Brackets(m, n, float(level))
    guess = np.clip(_rank_guess(m, n, float(level)), 1, n)
    rows = np.arange(m)
    brackets.probe(np.r_[rows, rows[guess > 1]], np.r_[guess, guess[guess > 1] - 1])
    step = np.full(m, 2, dtype=np.int64)
    while brackets.gallop(step):
        pass
    frontier = [(int(r), k) for k, r in enumerate(brackets.high, start=1)]
    # Bounds propagated from other server ranks were not evaluated at this k: do so.
    wanted = [(r, k) for r, k in frontier if r <= n] + [(r - 1, k) for r, k in frontier if r >= 2]
    missing = [pair for pair in wanted if pair not in brackets.known]
    if missing:
        brackets.probe(np.array([k - 1 for _, k in missing]), np.array([r for r, _ in missing]))
    values = tuple(brackets.value(r, k, 1.0) for r, k in frontier)
    below = tuple(brackets.value(r - 1, k, 0.0) for r, k in frontier)
    return QQFrontier(m, n, level, tuple(r for r, _ in frontier), values, below)


def _candidates(frontier: QQFrontier, limit: int) -> list[tuple[float, int, int]]:
    """``(fast value, l, k)`` worth certifying: the frontier, and its doubtful neighbours.

    A frontier pair with ``l <= limit``; the pair one rank below where its fast value is
    within ``DECISION_MARGIN`` of the level, and one rank above where the frontier value
    is (a pair with a larger ``k`` and the same ``l`` is never better).
    """
    level = float(frontier.level)
    candidates, above = [], []
    for k, (rank, value, below) in enumerate(
        zip(frontier.ranks, frontier.values, frontier.below, strict=True), start=1
    ):
        if 1 <= rank - 1 <= limit and below >= level - DECISION_MARGIN:
            candidates.append((below, rank - 1, k))
        if rank <= limit:
            candidates.append((value, rank, k))
            if rank < limit and value <= level + DECISION_MARGIN:
                above.append((rank + 1, k))
    if above:
        ranks, servers = np.array(above).T
        values = _fast_values(frontier.n_agents, frontier.n_per_agent)(ranks, servers)
        candidates += [(v, rank, k) for v, (rank, k) in zip(values.tolist(), above, strict=True)]
    return sorted(candidates)


def best_orders(frontier: QQFrontier, max_rank: int | None = None):
    """``(l, k, M)`` minimising the certified ``M(l, k) >= level`` with ``l <= max_rank``.

    Candidates (:func:`_candidates`) are certified in the order of their fast values,
    until a fast value exceeds the best certified one by ``DECISION_MARGIN``. Ties go
    to the smallest ``l``, then the smallest ``k``. None when no pair reaches the level.
    """
    m, n, level = frontier.n_agents, frontier.n_per_agent, frontier.level
    limit = n if max_rank is None else min(int(max_rank), n)
    best: tuple[int, int, Certified] | None = None
    for fast, rank, k in _candidates(frontier, limit):
        if best is not None and fast > float(best[2].key) + DECISION_MARGIN:
            break
        certified = certify_equal(rank, k, m, n)
        if certified.key < level:
            continue
        if best is None or (
            (rank, k) < best[:2] if certified.ties_with(best[2]) else certified.key < best[2].key
        ):
            best = (rank, k, certified)
    return best


def equal_table(m: int, n: int, level: Fraction, max_rank: int | None = None) -> Table | None:
    """The certified equal-size table (Eq. (6)), or None when no pair reaches ``level``."""
    best = best_orders(qq_frontier(m, n, level), max_rank)
    if best is None:
        return None
    rank, k, coverage = best
    return Table((n,) * m, (rank,) * m, k, coverage)


# ---------------------------------------------------------------- unequal sizes
#: Server ranks (the best by their family start) refined by descents and staircases.
_REFINED_SERVER_RANKS = 3

#: Staircase moves are tried with at most this many size groups, this many steps each.
_EXCHANGE_GROUPS, _STAIRCASE_STEPS = 6, 24

#: With more agents than this, only server ranks near the best ones of the equal-size
#: frontier (at the median size) are tried.
_ALL_SERVER_RANKS = 16

#: With more agents than this, only the family starts are used (no local moves).
_REFINED_AGENTS = 64

#: Bisection steps on the common relative rank (double precision is exhausted by then).
_BISECTION_STEPS = 64

#: At most this many groups (the largest sizes) move in descents, this many steps each.
_DESCENT_GROUPS, _DESCENT_STEPS = 16, 64


class _Family:
    """Agents grouped by size, each group's ranks one monotone index, at server rank ``k``.

    Group ``g`` (size ``s_g``, ``c_g`` agents) at index ``lam`` gives rank
    ``lam // c_g + 1`` to ``lam % c_g`` of its agents and ``lam // c_g`` to the others:
    raising ``lam`` by one raises one agent's rank by one, so ``M_k`` is non-decreasing
    in every index. Ranks above ``max_rank[g]`` become ``s_g + 1`` (``+inf``). The family
    of common relative ranks ``x`` (:meth:`at`) sets ``lam_g = ceil(x c_g (s_g + 1))``.
    """

    def __init__(self, sizes, max_ranks, columns: FastColumns, k: int, level: float):
        self.agent_sizes, self.columns, self.k, self.level = sizes, columns, k, level
        distinct = sorted(set(sizes))
        self.members = [[j for j, s in enumerate(sizes) if s == size] for size in distinct]
        self.sizes = np.asarray(distinct, dtype=np.int64)
        self.counts = np.asarray([len(g) for g in self.members], dtype=np.int64)
        self.limits = np.asarray(
            [
                size if max_ranks is None else min(max_ranks[group[0]], size)
                for size, group in zip(distinct, self.members, strict=True)
            ],
            dtype=np.int64,
        )
        self.lowest = self.counts
        self.highest = self.counts * (np.minimum(self.limits, self.sizes) + 1)
        #: The best index found so far (``M_k >= level``, smallest value) and its value.
        self.best: tuple[float, np.ndarray] | None = None

    def _found(self, index: np.ndarray) -> np.ndarray:
        """Record a feasible ``index`` the search moved to (each move lowers ``M_k``)."""
        self.best = (self.value(index), index)
        return index

    def ranks(self, index) -> tuple[int, ...]:
        out = [0] * len(self.agent_sizes)
        for lam, count, size, limit, members in zip(
            index, self.counts, self.sizes, self.limits, self.members, strict=True
        ):
            base, extra = divmod(int(lam), int(count))
            for position, agent in enumerate(members):
                rank = base + 1 if position < extra else base
                out[agent] = rank if rank <= min(limit, size) else int(size) + 1
        return tuple(out)

    def value(self, index) -> float:
        return self.columns(self.ranks(index), self.k)

    def start_cost(self) -> float:
        """About the work of :meth:`start`: one evaluation per step of its bisection."""
        steps = math.log2(float(np.sum(self.counts * (self.sizes + 1)))) + 2
        return self.columns.cost(self.ranks(self.at(0.5)), self.k) * steps

    def finite(self, index) -> int:
        """Number of agents sending a finite message at ``index``."""
        over = np.maximum(np.asarray(index) - self.counts * np.minimum(self.limits, self.sizes), 0)
        return int(np.sum(self.counts - over))

    def at(self, x: float) -> np.ndarray:
        raw = np.ceil(x * self.counts * (self.sizes + 1.0)).astype(np.int64)
        return np.clip(raw, self.lowest, self.highest)

    def _bisect(self, low: float, high: float, inside) -> float:
        """Largest ``x`` in ``[low, high]`` with ``inside(x)`` (``inside(low)`` holds)."""
        for _ in range(_BISECTION_STEPS):
            middle = 0.5 * (low + high)
            low, high = (middle, high) if inside(middle) else (low, middle)
        return low

    def start(self) -> np.ndarray | None:
        """Smallest family index with ``M_k >= level``, by bisection in ``x``.

        ``M_k`` is non-decreasing in ``x`` while at least ``k`` messages are finite,
        i.e. up to the largest such ``x`` (found first).
        """
        if self.finite(self.at(0.0)) < self.k:
            return None
        top = 1.0
        if self.finite(self.at(1.0)) < self.k:
            top = self._bisect(0.0, 1.0, lambda x: self.finite(self.at(x)) >= self.k)
        high_index, low_index = self.at(top), self.at(0.0)
        if self.value(high_index) < self.level:
            return None
        if self.value(low_index) >= self.level:
            return self._found(low_index)
        low, high = 0.0, top
        for _ in range(_BISECTION_STEPS):
            middle = 0.5 * (low + high)
            index = self.at(middle)
            if np.array_equal(index, low_index):
                low = middle  # no breakpoint on this side: move without evaluating
            elif np.array_equal(index, high_index):
                high = middle
            elif self.value(index) >= self.level:
                high, high_index = middle, index
            else:
                low, low_index = middle, index
        return self._found(high_index)

    def descend(self, index: np.ndarray) -> np.ndarray:
        """Lower single group indices while ``M_k`` stays at or above ``level`` (best first)."""
        movable = np.argsort(self.sizes)[::-1][:_DESCENT_GROUPS]
        for _ in range(_DESCENT_STEPS):
            best, best_value = None, self.value(index)
            for g in movable:
                if index[g] > self.lowest[g]:
                    trial = index.copy()
                    trial[g] -= 1
                    value = self.value(trial)
                    if self.level <= value < best_value:
                        best, best_value = trial, value
            if best is None:
                return index
            index = self._found(best)
        return index

    def _lowest_feasible(self, trial: np.ndarray, group: int) -> None:
        """Set ``trial[group]`` to its smallest feasible value (gallop down, then bisect)."""
        high, step = int(trial[group]), 1
        low = high - step
        while low >= self.lowest[group]:
            trial[group] = low
            if self.value(trial) < self.level:
                break
            high, step = low, 2 * step
            low = high - step
        low = max(low, int(self.lowest[group]) - 1)
        while high - low > 1:
            trial[group] = (low + high) // 2
            if self.value(trial) >= self.level:
                high = int(trial[group])
            else:
                low = int(trial[group])
        trial[group] = high

    def staircase(self, index: np.ndarray) -> np.ndarray:
        """Pairwise moves: ``g`` rises step by step, ``h`` falls as far as feasible.

        Tried for every ordered pair of groups; the best configuration found is kept.
        """
        best, best_value = index, self.value(index)
        if not 2 <= index.size <= _EXCHANGE_GROUPS:
            return best
        for g in range(index.size):
            for h in range(index.size):
                if g == h:
                    continue
                trial = best.copy()
                for _ in range(_STAIRCASE_STEPS):
                    if trial[g] >= self.highest[g] or trial[h] <= self.lowest[h]:
                        break
                    trial[g] += 1
                    if self.value(trial) < self.level:
                        break
                    self._lowest_feasible(trial, h)
                    value = self.value(trial)
                    if self.level <= value < best_value:
                        best, best_value = self._found(trial.copy()), value
        return best


def _server_ranks(sizes: tuple[int, ...], level: Fraction) -> tuple[int, ...]:
    """The server ranks tried: all of them, or the best of the equal-size frontier.

    With more than 16 agents, the three best of the frontier at the median size (and
    their neighbours while ``m <= 64``).
    """
    m = len(sizes)
    if m <= _ALL_SERVER_RANKS:
        return tuple(range(1, m + 1))
    frontier = qq_frontier(m, int(np.median(sizes)), level)
    feasible = [k for k, rank in enumerate(frontier.ranks, start=1) if rank <= frontier.n_per_agent]
    if not feasible:
        return tuple(range(max(m - 2, 1), m + 1))
    best = sorted(feasible, key=lambda k: frontier.values[k - 1])[:3]
    if m > _REFINED_AGENTS:
        return tuple(sorted(best))
    return tuple(sorted({c for k in best for c in (k - 1, k, k + 1) if 1 <= c <= m}))


def unequal_table(
    sizes: tuple[int, ...], level: Fraction, max_ranks: tuple[int, ...] | None = None
) -> tuple[Table | None, bool]:
    """Agents' ranks and server rank with the smallest certified coverage reaching ``level``.

    For every server rank ``k`` tried (:func:`_server_ranks`): the smallest configuration
    on the family of common relative ranks ``l_j ~ x (n_j + 1)`` (which includes the
    Appendix A.1 ranks of Humbert et al. 2023 at ``x = level``); for the three ``k``
    whose start is closest to the level (with at most 64 agents), descents and staircase
    moves while the coverage stays at or above the level. The search stops where its
    work budget (:data:`SEARCH_CELLS`) runs out, keeping the best configuration found
    for each ``k``; the best ones are certified within :data:`CERTIFY_CELLS` (ties go to
    the smaller ``k``).

    Parameters
    ----------
    sizes : tuple of int
        Public sizes ``n_j``.
    level : Fraction
        Target coverage.
    max_ranks : tuple of int or None
        Per-agent largest rank allowed; larger ranks send ``+inf``.

    Returns
    -------
    table : Table or None
        None when no configuration reaches the level (or none could be certified).
    complete : bool
        False when a budget ran out.
    """
    search, budget = WorkBudget(SEARCH_CELLS), WorkBudget(CERTIFY_CELLS)
    found = _searched(sizes, level, max_ranks, FastColumns(sizes, search))
    best: Table | None = None
    for fast, family, index in found:
        if best is not None and fast > float(best.coverage.key) + DECISION_MARGIN:
            break
        try:
            table = _certified(family, index, fast, level, budget)
        except OverBudget:
            continue
        if table is not None and (
            best is None
            or (
                table.coverage.key < best.coverage.key
                and not table.coverage.ties_with(best.coverage)
            )
        ):
            best = table
    return best, not (search.exhausted or budget.exhausted)


def _searched(sizes, level: Fraction, max_ranks, columns: FastColumns):
    """``(fast value, family, index)`` of the best configuration found for each ``k``.

    Sorted by value, then ``k``; as far as the budget of ``columns`` goes.
    """
    families: list[_Family] = []

    def found():
        return sorted((f.best[0], f.k, f, f.best[1]) for f in families if f.best is not None)

    try:
        for k in _server_ranks(sizes, level):
            family = _Family(sizes, max_ranks, columns, k, float(level))
            if family.start_cost() > columns.budget.left:  # it would be cut: do not start
                columns.budget.exhausted = True
                break
            families.append(family)
            family.start()
        refined = _REFINED_SERVER_RANKS if len(sizes) <= _REFINED_AGENTS else 0
        for _, _, family, index in found()[:refined]:
            family.descend(family.staircase(family.descend(index)))
    except OverBudget:
        pass
    return [(fast, family, index) for fast, _, family, index in found()]


def _certified(family: _Family, index, fast: float, level: Fraction, budget: WorkBudget):
    """The configuration ``index``, certified; one rank higher if it is just below.

    A fast value within ``DECISION_MARGIN`` of the level may sit on the wrong side of
    it: then the largest group's index is raised by one (the smallest step up).
    """
    for _ in range(2):
        ranks = family.ranks(index)
        certified = certify_column(family.agent_sizes, ranks, budget)[family.k - 1]
        if certified.key >= level:
            return Table(family.agent_sizes, ranks, family.k, certified)
        last = len(index) - 1  # groups are sorted by size
        if fast > float(level) + DECISION_MARGIN or index[last] >= family.highest[last]:
            return None
        index = index.copy()
        index[last] += 1
    return None


def threshold_sizes(sizes: tuple[int, ...]) -> list[int]:
    """The smallest size, and the size ``s`` keeping the most scores, ``s #{n_j >= s}``.

    Ties go to the smaller size (more agents).
    """
    ordered = np.sort(np.asarray(sizes))
    kept = ordered * (ordered.size - np.arange(ordered.size))  # s times #{n_j >= s}
    return sorted({int(ordered[0]), int(ordered[np.argmax(kept)])})


def thresholded_table(sizes: tuple[int, ...], size: int, table: Table) -> Table:
    """``table`` (equal, for the agents of at least ``size`` scores) for all agents.

    The agents of at least ``size`` scores use a uniformly random subset of ``size``
    and the table's rank; the others send ``+inf`` (the top of the range) without
    reading their data. ``+inf`` messages are never among the ``k`` smallest of the
    others' (``k`` is at most their number), so ``M_k`` is the equal table's.
    """
    rank = table.local_ranks[0]
    kept = [n >= size for n in sizes]
    return Table(
        tuple(size if keep else n for n, keep in zip(sizes, kept, strict=True)),
        tuple(rank if keep else n + 1 for n, keep in zip(sizes, kept, strict=True)),
        table.server_rank,
        table.coverage,
    )
