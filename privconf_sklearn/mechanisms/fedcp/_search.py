"""FedCP-QQ's ranks from public sizes only (Humbert, Le Bars, Bellet and Arlot, ICML 2023).

Equal sizes: ``argmin {M(l, k) : M(l, k) >= level}`` of Eq. (6); unequal sizes: the agents'
ranks are searched too (their Appendix A.1 fixes them), within a work budget. Decisions a
fast value could get wrong are taken on certified values (user guide, FedCP-QQ page).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache, partial
from operator import attrgetter

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

#: Work budgets of one unequal-size search and of certifying its results, in the cells of
#: :class:`~._coverage.WorkBudget` (about 2 ns each: 0.5 and 0.4 s of CPU).
SEARCH_CELLS, CERTIFY_CELLS = 2.5e8, 2e8

_REFINED_SERVER_RANKS = 3  # server ranks (the best family starts) refined by local moves
_EXCHANGE_GROUPS, _STAIRCASE_STEPS = 6, 24  # staircases: at most 6 groups, 24 steps each
_ALL_SERVER_RANKS = 16  # above this many agents, only ranks near the frontier's best
_REFINED_AGENTS = 64  # above this many agents, family starts only (no local moves)
_BISECTION_STEPS = 64  # on the common relative rank: double precision is exhausted by then
_DESCENT_GROUPS, _DESCENT_STEPS = 16, 64  # descents: the 16 largest groups, 64 steps each


@dataclass(frozen=True)
class Table:
    """Agent ``j`` sends the ``l_j``-th smallest of ``n'_j`` scores, the server the ``k``-th.

    ``l_j > n'_j`` sends ``+inf``; ``coverage`` is the certified ``M_k`` (Theorem 3.2).
    """

    sample_sizes: tuple[int, ...]
    local_ranks: tuple[int, ...]
    server_rank: int
    coverage: Certified


@dataclass(frozen=True)
class QQFrontier:
    """``ranks[k - 1]``: the smallest ``l`` with fast ``M(l, k) >= level`` (``n + 1`` if none).

    ``values`` and ``below``: fast ``M`` there and one rank below (1.0 or 0.0 if none).
    """

    n_agents: int
    n_per_agent: int
    level: Fraction
    ranks: tuple[int, ...]
    values: tuple[float, ...]
    below: tuple[float, ...]


def _rank_guess(m: int, n: int, level: float) -> np.ndarray:
    """For each ``k``, the smallest ``l`` with ``P(Beta(l, n - l + 1) <= level) <= k/(m+1)``."""
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
    """Brackets ``(low, high]`` of ``l_min(k)``; ``M`` is monotone in both ranks (App. A.2)."""

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
        # A feasible (l, k) is feasible for every k' >= k, an infeasible one for no k' <= k.
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
    """``l_min(k)`` for every ``k``: galloping from a guess, then bisecting, all ``k`` at once."""
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
    """Sorted ``(fast M, l, k)``, ``l <= limit``: the frontier and its doubtful neighbours.

    One rank below where that is within ``DECISION_MARGIN`` of the level, one above where
    the frontier is (a pair with a larger ``k`` and the same ``l`` is never better).
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


def _least_certified(candidates, certify, tie_break) -> Table | None:
    """The certified table of least coverage, ties to the least ``tie_break(table)``.

    ``certify(*candidate)`` (a table or None) runs in the order of the fast values (the
    candidates' first entries) until one exceeds the best certified by ``DECISION_MARGIN``.
    """
    best: Table | None = None
    for candidate in candidates:
        if best is not None and candidate[0] > float(best.coverage.key) + DECISION_MARGIN:
            break
        table = certify(*candidate)
        if table is None:
            continue
        if best is None or table.coverage.ties_with(best.coverage):
            best = table if best is None else min(best, table, key=tie_break)
        elif table.coverage.key < best.coverage.key:
            best = table
    return best


def equal_table(m: int, n: int, level: Fraction, max_rank: int | None = None) -> Table | None:
    """The table of Eq. (6) with ``l <= max_rank`` (ties to the least ``(l, k)``), or None."""

    def certified(fast: float, rank: int, k: int) -> Table | None:
        table = Table((n,) * m, (rank,) * m, k, certify_equal(rank, k, m, n))
        return table if table.coverage.key >= level else None

    limit = n if max_rank is None else min(int(max_rank), n)
    candidates = _candidates(qq_frontier(m, n, level), limit)
    return _least_certified(candidates, certified, attrgetter("local_ranks", "server_rank"))


class _GroupedRanks:
    """The agents' ranks at server rank ``k``, one monotone index per group of equal size.

    Group ``g`` (``c_g`` agents of size ``s_g``) at index ``i_g`` gives rank
    ``i_g // c_g + 1`` to ``i_g % c_g`` of its agents and ``i_g // c_g`` to the others
    (``s_g + 1``, the ``+inf`` message, above the group's limit): raising an index by one
    raises one agent's rank by one, so ``M_k`` is non-decreasing in every index. The
    family of common relative ranks ``x`` (:meth:`at`) sets ``i_g = ceil(x c_g (s_g + 1))``
    and includes the Appendix A.1 ranks of Humbert et al. (2023) at ``x = level``.
    """

    def __init__(self, sizes, max_ranks, columns: FastColumns, k: int, level: float):
        self.agent_sizes, self.columns, self.k, self.level = sizes, columns, k, level
        distinct = sorted(set(sizes))
        self.members = [[j for j, s in enumerate(sizes) if s == size] for size in distinct]
        self.group_sizes = np.asarray(distinct, dtype=np.int64)
        self.counts = np.asarray([len(g) for g in self.members], dtype=np.int64)
        limits = [
            size if max_ranks is None else min(max_ranks[g[0]], size)
            for size, g in zip(distinct, self.members, strict=True)
        ]
        self.limits = np.asarray(limits, dtype=np.int64)  # at most the sizes
        self.lowest, self.highest = self.counts, self.counts * (self.limits + 1)
        self.best: tuple[float, np.ndarray] | None = None  # the least feasible M_k, its index

    def _found(self, index: np.ndarray) -> np.ndarray:
        """Record a feasible ``index`` the search moved to (each move lowers ``M_k``)."""
        self.best = (self.value(index), index)
        return index

    def ranks(self, index) -> tuple[int, ...]:
        """Every agent's rank, in agent order, at the groups' ``index``."""
        out = [0] * len(self.agent_sizes)
        for group_index, count, size, limit, members in zip(
            index, self.counts, self.group_sizes, self.limits, self.members, strict=True
        ):
            base, extra = divmod(int(group_index), int(count))
            for position, agent in enumerate(members):
                rank = base + 1 if position < extra else base
                out[agent] = rank if rank <= limit else int(size) + 1
        return tuple(out)

    def value(self, index) -> float:
        """Fast ``M_k`` at the groups' ``index``."""
        return self.columns(self.ranks(index), self.k)

    def start_cost(self) -> float:
        """About the work of :meth:`start`: one evaluation per step of its bisection."""
        steps = math.log2(float(np.sum(self.counts * (self.group_sizes + 1)))) + 2
        return self.columns.cost(self.ranks(self.at(0.5)), self.k) * steps

    def finite(self, index) -> int:
        """Number of agents sending a finite message at ``index``."""
        over = np.maximum(np.asarray(index) - self.counts * self.limits, 0)
        return int(np.sum(self.counts - over))

    def at(self, x: float) -> np.ndarray:
        """The groups' index at the common relative rank ``x`` (clipped to each range)."""
        raw = np.ceil(x * self.counts * (self.group_sizes + 1.0)).astype(np.int64)
        return np.clip(raw, self.lowest, self.highest)

    def start(self) -> np.ndarray | None:
        """The least family index with ``M_k >= level``, by bisection in ``x``.

        ``M_k`` is non-decreasing in ``x`` while ``k`` messages are finite: up to ``top``.
        """
        if self.finite(self.at(0.0)) < self.k:
            return None
        top = 1.0
        if self.finite(self.at(1.0)) < self.k:
            low = 0.0
            for _ in range(_BISECTION_STEPS):
                middle = 0.5 * (low + top)
                enough = self.finite(self.at(middle)) >= self.k
                low, top = (middle, top) if enough else (low, middle)
            top = low
        low, high, low_index, high_index = 0.0, top, self.at(0.0), self.at(top)
        if self.value(high_index) < self.level:
            return None
        if self.value(low_index) >= self.level:
            return self._found(low_index)
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
        movable = np.argsort(self.group_sizes)[::-1][:_DESCENT_GROUPS]
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
            middle = trial[group] = (low + high) // 2
            low, high = (low, middle) if self.value(trial) >= self.level else (middle, high)
        trial[group] = high

    def staircase(self, index: np.ndarray) -> np.ndarray:
        """The best of the moves raising one group step by step, another as low as feasible."""
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
    """All server ranks, or the 3 best at the median size (with neighbours up to 64 agents)."""
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
    """The searched table of least certified ``M_k >= level``, and whether no budget ran out.

    Agent ``j``'s rank is at most ``max_ranks[j]`` (``+inf`` above); ties go to the first
    found. The table is None when no configuration reaches (or could certify) the level.
    """
    search, budget = WorkBudget(SEARCH_CELLS), WorkBudget(CERTIFY_CELLS)
    found = _searched(sizes, level, max_ranks, FastColumns(sizes, search))
    certify = partial(_certified, level=level, budget=budget)
    best = _least_certified(found, certify, lambda table: 0)  # ties go to the first found
    return best, not (search.exhausted or budget.exhausted)


def _searched(sizes, level: Fraction, max_ranks, columns: FastColumns):
    """``(fast M_k, family, index)`` of the best configuration found for each ``k``, by value.

    Family starts, then descents and staircases for the three best, within the budget.
    """
    families: list[_GroupedRanks] = []

    def found():
        return sorted((f.best[0], f.k, f, f.best[1]) for f in families if f.best is not None)

    try:
        for k in _server_ranks(sizes, level):
            family = _GroupedRanks(sizes, max_ranks, columns, k, float(level))
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


def _certified(fast: float, family: _GroupedRanks, index, *, level: Fraction, budget: WorkBudget):
    """``index`` certified; if just below the level, the largest group one rank higher."""
    last = len(index) - 1  # groups are sorted by size
    try:
        for _ in range(2):
            ranks = family.ranks(index)
            certified = certify_column(family.agent_sizes, ranks, budget)[family.k - 1]
            if certified.key >= level:
                return Table(family.agent_sizes, ranks, family.k, certified)
            if fast > float(level) + DECISION_MARGIN or index[last] >= family.highest[last]:
                return None
            index = index.copy()
            index[last] += 1
    except OverBudget:
        pass
    return None


def threshold_sizes(sizes: tuple[int, ...]) -> list[int]:
    """The smallest size, and the ``s`` keeping the most scores (ties to the smaller)."""
    ordered = np.sort(np.asarray(sizes))
    kept = ordered * (ordered.size - np.arange(ordered.size))  # s times #{n_j >= s}
    return sorted({int(ordered[0]), int(ordered[np.argmax(kept)])})


def thresholded_table(sizes: tuple[int, ...], size: int, table: Table) -> Table:
    """``table`` (equal) for the agents of ``size`` scores or more, ``+inf`` for the others.

    Those use a random subset of ``size``, the others do not read their data; ``k`` is at
    most the kept agents' number, so ``M_k`` is the equal table's.
    """
    rank = table.local_ranks[0]
    kept = [n >= size for n in sizes]
    return Table(
        tuple(size if keep else n for n, keep in zip(sizes, kept, strict=True)),
        tuple(rank if keep else n + 1 for n, keep in zip(sizes, kept, strict=True)),
        table.server_rank,
        table.coverage,
    )
