"""Searching the ranks of the quantile-of-quantiles estimator, from public sizes only.

Humbert, Le Bars, Bellet and Arlot (ICML 2023). Equal local sizes: the pair
``(l*, k*) = argmin {M(l, k) : M(l, k) >= level}`` of their Eq. (6), optionally with
``l <= max_rank`` (FedCP2-QQ: the agents' corrected rank must stay within their data),
found from the *frontier* ``l_min(k)`` (:func:`qq_frontier`). Unequal sizes
(:func:`unequal_orders`): the agents' ranks are searched as well (their Appendix A.1
fixes them at ``ceil((1 - alpha)(n_j + 1))`` and searches only ``k``).

Searches use the fast coverage values of :mod:`._fedcp_coverage`; every decision a fast
value could get wrong (within ``DECISION_MARGIN`` of the level or of the best
candidate) is taken on certified values, and the returned coverage is certified.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
from scipy.special import betainc

from ._coverage import (
    APPROXIMATE_NODES,
    DECISION_MARGIN,
    Certified,
    UnequalColumns,
    approximate_coverage,
    certify_column,
    certify_equal,
    qq_coverage,
)

__all__ = [
    "QQFrontier",
    "QQOrders",
    "RankChoice",
    "best_orders",
    "fast_best_orders",
    "qq_frontier",
    "unequal_orders",
]


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
        Fast ``M(l_min(k) - 1, k)`` (0.0 when ``l_min(k) = 1``; ``M(n, k)`` when none).
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
    low = np.zeros(m, dtype=np.int64)
    high = np.full(m, n + 1, dtype=np.int64)
    while True:
        open_ = high - low > 1
        if not open_.any():
            return high
        middle = (low + high) // 2
        ok = betainc(middle, n - middle + 1, level) <= target
        high = np.where(open_ & ok, middle, high)
        low = np.where(open_ & ~ok, middle, low)


def _fast_values(m: int, n: int):
    """The fast evaluator for ``(m, n)``: quadrature itself when its window is tiny."""
    if m * n <= 2 * APPROXIMATE_NODES:
        return lambda ranks, ks: qq_coverage(ranks, ks, m, n)
    return lambda ranks, ks: approximate_coverage(ranks, ks, m, n)


@lru_cache(maxsize=256)
def qq_frontier(n_agents: int, n_per_agent: int, level: Fraction) -> QQFrontier:
    """``l_min(k)`` for every ``k`` (fast values), by galloping from a guess and bisecting.

    ``M`` is non-decreasing in ``l`` and in ``k`` (Appendix A.2 of Humbert et al. 2023),
    so ``l_min`` is non-increasing in ``k``; each round evaluates one probe per ``k``
    whose bracket is still open, all at once.

    Parameters
    ----------
    n_agents, n_per_agent : int
        ``m`` and ``n``.
    level : Fraction
        Target coverage.

    Returns
    -------
    QQFrontier
    """
    m, n = int(n_agents), int(n_per_agent)
    level_float = float(level)
    evaluate = _fast_values(m, n)
    guess = np.clip(_rank_guess(m, n, level_float), 1, n)
    # low: largest rank known infeasible (0: none); high: smallest known feasible (n + 1).
    low = np.zeros(m, dtype=np.int64)
    high = np.full(m, n + 1, dtype=np.int64)
    known: dict[tuple[int, int], float] = {}
    ks = np.arange(1, m + 1)

    def probe(rows: np.ndarray, ranks: np.ndarray) -> np.ndarray:
        values = evaluate(ranks, rows + 1)
        for row, rank, value in zip(rows.tolist(), ranks.tolist(), values.tolist(), strict=True):
            known[(rank, row + 1)] = value
        feasible = values >= level_float
        # A feasible (l, k) is feasible for every k' >= k; an infeasible one for no k' <= k.
        high_at = np.full(m, n + 1, dtype=np.int64)
        np.minimum.at(high_at, rows[feasible], ranks[feasible])
        low_at = np.zeros(m, dtype=np.int64)
        np.maximum.at(low_at, rows[~feasible], ranks[~feasible])
        np.minimum(high, np.minimum.accumulate(high_at), out=high)
        np.maximum(low, np.maximum.accumulate(low_at[::-1])[::-1], out=low)
        return feasible

    # Round 0: the guess and its left neighbour.
    rows = np.concatenate([ks - 1, (ks - 1)[guess > 1]])
    probe(rows, np.concatenate([guess, guess[guess > 1] - 1]))
    step = np.full(m, 2, dtype=np.int64)
    while True:
        open_rows = np.flatnonzero(high - low > 1)
        if open_rows.size == 0:
            break
        lo, hi = low[open_rows], high[open_rows]
        # Gallop away from the guess while the bracket is unbounded on that side.
        up = hi == n + 1
        down = lo == 0
        ranks = np.where(
            up & ~down,
            np.minimum(lo + step[open_rows], n),
            np.where(down & ~up, np.maximum(hi - step[open_rows], 1), (lo + hi) // 2),
        )
        ranks = np.clip(ranks, np.maximum(lo + 1, 1), np.minimum(hi - 1, n))
        step[open_rows] *= 2
        probe(open_rows, ranks)
    # Bounds propagated from other server ranks were not evaluated at this k: do so.
    frontier = [(int(r), int(k)) for r, k in zip(high, ks, strict=True)]
    wanted = [(r, k) for r, k in frontier if r <= n] + [(r - 1, k) for r, k in frontier if r >= 2]
    missing = [pair for pair in wanted if pair not in known]
    if missing:
        ranks, servers = (np.array(column) for column in zip(*missing, strict=True))
        for pair, value in zip(missing, evaluate(ranks, servers).tolist(), strict=True):
            known[pair] = value
    values = tuple(known[(r, k)] if r <= n else 1.0 for r, k in frontier)
    below = tuple(known[(r - 1, k)] if r >= 2 else 0.0 for r, k in frontier)
    return QQFrontier(m, n, level, tuple(r for r, _ in frontier), values, below)


@dataclass(frozen=True)
class QQOrders:
    """Ranks of the quantile-of-quantiles estimator and their certified coverage.

    Attributes
    ----------
    local_rank : int
        ``l``: each agent sends its ``l``-th smallest score.
    server_rank : int
        ``k``: the server keeps the ``k``-th smallest message.
    coverage : Certified
        ``M(l, k)`` (Theorem 3.2), at least the level.
    """

    local_rank: int
    server_rank: int
    coverage: Certified


def best_orders(frontier: QQFrontier, max_rank: int | None = None) -> QQOrders | None:
    """``argmin {M(l, k) : M(l, k) >= level, l <= max_rank}`` from a frontier.

    Candidates are the frontier pairs ``(l_min(k), k)`` with ``l_min(k) <= max_rank``
    (a pair with a larger ``k`` and the same ``l`` is never better). Decisions a fast
    value could get wrong are taken on certified values: every candidate within
    :data:`DECISION_MARGIN` of the best, and, where a frontier value lies within the
    margin of the level, the pairs one rank below and above it. Ties go to the smallest
    ``l``, then the smallest ``k``.

    Returns
    -------
    QQOrders or None
        None when no pair reaches the level (with certified values).
    """
    m, n, level = frontier.n_agents, frontier.n_per_agent, frontier.level
    limit = n if max_rank is None else min(int(max_rank), n)
    level_float = float(level)
    candidates: list[tuple[float, int, int]] = []  # (fast value, l, k)
    above: list[tuple[int, int]] = []  # (l_min(k) + 1, k) where l_min(k) is doubtful
    for k, (rank, value, below) in enumerate(
        zip(frontier.ranks, frontier.values, frontier.below, strict=True), start=1
    ):
        if 1 <= rank - 1 <= limit and below >= level_float - DECISION_MARGIN:
            candidates.append((below, rank - 1, k))
        if rank <= limit:
            candidates.append((value, rank, k))
            if rank < limit and value <= level_float + DECISION_MARGIN:
                above.append((rank + 1, k))
    if above:
        ranks, servers = (np.array(column) for column in zip(*above, strict=True))
        values = _fast_values(m, n)(ranks, servers).tolist()
        candidates += [(v, rank, k) for v, (rank, k) in zip(values, above, strict=True)]
    candidates.sort()
    best: tuple[Certified, int, int] | None = None
    for fast, rank, k in candidates:
        if best is not None and fast > float(best[0].key) + DECISION_MARGIN:
            break
        certified = certify_equal(rank, k, m, n)
        if certified.key >= level and (best is None or _better(certified, rank, k, *best)):
            best = (certified, rank, k)
    return None if best is None else QQOrders(best[1], best[2], best[0])


def _better(value: Certified, rank: int, k: int, best: Certified, best_rank: int, best_k: int):
    """Whether ``(rank, k)`` with ``value`` beats the current best (ties: smaller ranks)."""
    if value.ties_with(best):
        return (rank, k) < (best_rank, best_k)
    return value.key < best.key


# ---------------------------------------------------------------- unequal sizes
@dataclass(frozen=True)
class RankChoice:
    """Ranks of every agent and the server, with their certified coverage.

    Attributes
    ----------
    local_ranks : tuple of int
        ``l_j`` per agent; ``l_j > n_j`` means the agent's message is ``+inf`` (the top
        of the range).
    server_rank : int
        ``k``.
    coverage : Certified
        ``M_k`` at these ranks (Appendix A.1 of Humbert et al. 2023).
    """

    local_ranks: tuple[int, ...]
    server_rank: int
    coverage: Certified


@dataclass(frozen=True)
class _Groups:
    """Agents of equal size, each group's ranks described by one monotone index.

    Group ``g`` (size ``s_g``, ``c_g`` agents) at index ``lam`` gives rank
    ``lam // c_g + 1`` to ``lam % c_g`` of its agents and ``lam // c_g`` to the others:
    raising ``lam`` by one raises one agent's rank by one, so coverage is non-decreasing
    in every index. Ranks above ``max_rank[g]`` become ``s_g + 1`` (``+inf``).
    """

    sizes: tuple[int, ...]  # s_g
    counts: tuple[int, ...]  # c_g
    members: tuple[tuple[int, ...], ...]  # agent indices of each group
    max_rank: tuple[int, ...]

    @property
    def lowest(self) -> np.ndarray:
        return np.asarray(self.counts, dtype=np.int64)

    @property
    def highest(self) -> np.ndarray:
        """Index at which every agent of the group sends ``+inf``."""
        return np.asarray(
            [
                c * (min(r, s) + 1)
                for c, r, s in zip(self.counts, self.max_rank, self.sizes, strict=True)
            ],
            dtype=np.int64,
        )

    def finite(self, index) -> int:
        """Number of agents sending a finite message at ``index``."""
        return sum(
            count - max(0, int(lam) - count * min(limit, size))
            for lam, count, size, limit in zip(
                index, self.counts, self.sizes, self.max_rank, strict=True
            )
        )

    def ranks(self, index, n_agents: int) -> tuple[int, ...]:
        out = [0] * n_agents
        for lam, count, size, limit, members in zip(
            index, self.counts, self.sizes, self.max_rank, self.members, strict=True
        ):
            base, extra = divmod(int(lam), count)
            for position, agent in enumerate(members):
                rank = base + 1 if position < extra else base
                out[agent] = rank if rank <= min(limit, size) else size + 1
        return tuple(out)


def _groups(sizes: tuple[int, ...], max_ranks: tuple[int, ...] | None) -> _Groups:
    distinct = sorted(set(sizes))
    members = tuple(tuple(j for j, s in enumerate(sizes) if s == size) for size in distinct)
    limits = tuple(
        size if max_ranks is None else min(max_ranks[group[0]], size)
        for size, group in zip(distinct, members, strict=True)
    )
    return _Groups(tuple(distinct), tuple(len(g) for g in members), members, limits)


class _Columns:
    """Fast coverage columns of rank indices, memoised.

    ``M_k`` is 1 for ``k`` above the number of agents that send a finite message (the
    trivial release): the family never goes there (:func:`_largest_on_family`) and
    descents and staircases only accept values strictly below the current one.
    """

    def __init__(self, sizes: tuple[int, ...], groups: _Groups):
        self.sizes, self.groups = sizes, groups
        self.cache: dict[tuple[int, ...], np.ndarray] = {}
        self.evaluate = UnequalColumns(sizes)

    def __call__(self, index) -> np.ndarray:
        key = tuple(int(v) for v in index)
        if key not in self.cache:
            self.cache[key] = self.evaluate(self.groups.ranks(key, len(self.sizes)))
        return self.cache[key]


#: Server ranks (the best by their family start) refined by descents and staircases.
_REFINED_SERVER_RANKS = 3

#: Staircase moves (one group up, another as low as feasible) are tried when there are
#: at most this many size groups, up to this many steps per pair.
_STAIRCASE_STEPS = 24

#: (see above)
_EXCHANGE_GROUPS = 6

#: With more agents than this, only server ranks near the best ones of the equal-size
#: frontier (at the median size) are tried.
_ALL_SERVER_RANKS = 16

#: Bisection steps on the common relative rank (double precision is exhausted by then).
_BISECTION_STEPS = 64

#: At most this many groups (the largest sizes) move in descents.
_DESCENT_GROUPS = 16

#: With more agents than this, only the family starts are used (no descents or
#: staircases): a column costs the square of the number of agents.
_REFINED_AGENTS = 64

#: At most this many descent steps per server rank.
_DESCENT_STEPS = 64


def _family_index(groups: _Groups, x: float) -> np.ndarray:
    """Group indices at the common relative rank ``x``: ``ceil(x c_g (s_g + 1))``, clipped."""
    raw = np.ceil(x * np.asarray(groups.counts) * (np.asarray(groups.sizes) + 1.0))
    return np.clip(raw.astype(np.int64), groups.lowest, groups.highest)


def _largest_on_family(groups: _Groups, k: int) -> float | None:
    """Largest family position ``x`` at which at least ``k`` agents send a finite message."""
    if groups.finite(_family_index(groups, 0.0)) < k:
        return None
    low, high = 0.0, 1.0
    if groups.finite(_family_index(groups, high)) >= k:
        return high
    for _ in range(_BISECTION_STEPS):
        middle = 0.5 * (low + high)
        if groups.finite(_family_index(groups, middle)) >= k:
            low = middle
        else:
            high = middle
    return low


def _smallest_on_family(columns: _Columns, groups: _Groups, k: int, level: float):
    """Smallest index vector of the family ``x -> _family_index(x)`` with ``M_k >= level``.

    Bisection in ``x`` until the index vectors at both ends of the bracket are one
    family step apart (``M_k`` is non-decreasing in ``x`` as long as at least ``k``
    messages are finite, which holds up to :func:`_largest_on_family`).
    """
    top = _largest_on_family(groups, k)
    if top is None:
        return None
    high_index = _family_index(groups, top)
    if columns(high_index)[k - 1] < level:
        return None
    low, high = 0.0, top
    low_index = _family_index(groups, 0.0)
    if columns(low_index)[k - 1] >= level:
        return low_index
    for _ in range(_BISECTION_STEPS):
        middle = 0.5 * (low + high)
        index = _family_index(groups, middle)
        if np.array_equal(index, low_index) or np.array_equal(index, high_index):
            # No breakpoint on one side of `middle`: move that end without evaluating.
            if np.array_equal(index, low_index):
                low = middle
            else:
                high = middle
            continue
        if columns(index)[k - 1] >= level:
            high, high_index = middle, index
        else:
            low, low_index = middle, index
    return high_index


def _descend(columns: _Columns, groups: _Groups, index: np.ndarray, k: int, level: float):
    """Lower single group indices while ``M_k`` stays at or above ``level`` (best first).

    Only the :data:`_DESCENT_GROUPS` groups of the largest sizes (the finest steps) move.
    """
    lowest = groups.lowest
    movable = np.argsort(np.asarray(groups.sizes))[::-1][:_DESCENT_GROUPS]
    for _ in range(_DESCENT_STEPS):
        best, best_value = None, columns(index)[k - 1]
        for g in movable:
            if index[g] > lowest[g]:
                trial = index.copy()
                trial[g] -= 1
                value = columns(trial)[k - 1]
                if level <= value < best_value:
                    best, best_value = trial, value
        if best is None:
            return index
        index = best
    return index


def _smallest_index(columns, trial: np.ndarray, group: int, start: int, lowest: int, k, level):
    """Smallest index of ``group`` at or below ``start`` keeping ``M_k >= level``.

    ``trial`` (modified) must be feasible with ``group`` at ``start``. Gallops down, then
    bisects (``M_k`` is non-decreasing in every index).
    """
    high, step = start, 1
    low = high - step
    while low >= lowest:
        trial[group] = low
        if columns(trial)[k - 1] < level:
            break
        high, step = low, 2 * step
        low = high - step
    low = max(low, lowest - 1)
    while high - low > 1:
        trial[group] = (low + high) // 2
        if columns(trial)[k - 1] >= level:
            high = int(trial[group])
        else:
            low = int(trial[group])
    trial[group] = high
    return high


def _staircase(columns: _Columns, groups: _Groups, index: np.ndarray, k: int, level: float):
    """Pairwise staircase moves: raise one group, lower another as far as feasible.

    For every ordered pair of groups ``(g, h)``, ``g`` rises by up to
    ``_STAIRCASE_STEPS`` steps and ``h`` takes its smallest feasible index at each;
    the best configuration found is kept. As ``g`` rises the smallest feasible ``h``
    falls (monotonicity), so each step costs about one evaluation.
    """
    best, best_value = index, columns(index)[k - 1]
    if index.size > _EXCHANGE_GROUPS or index.size < 2:
        return best
    highest, lowest = groups.highest, groups.lowest
    for g in range(index.size):
        for h in range(index.size):
            if g == h:
                continue
            trial = best.copy()
            for _ in range(_STAIRCASE_STEPS):  # g up, h down
                if trial[g] >= highest[g] or trial[h] <= lowest[h]:
                    break
                trial[g] += 1
                if columns(trial)[k - 1] < level:
                    break
                _smallest_index(columns, trial, h, int(trial[h]), int(lowest[h]), k, level)
                value = columns(trial)[k - 1]
                if level <= value < best_value:
                    best, best_value = trial.copy(), value
    return best


def _server_rank_candidates(agent_sizes: tuple[int, ...], level: Fraction) -> tuple[int, ...]:
    """Server ranks worth trying for these sizes (see :func:`unequal_orders`)."""
    m = len(agent_sizes)
    if m <= _ALL_SERVER_RANKS:
        return tuple(range(1, m + 1))
    frontier = qq_frontier(m, int(np.median(agent_sizes)), level)
    feasible = [k for k, rank in enumerate(frontier.ranks, start=1) if rank <= frontier.n_per_agent]
    if not feasible:
        return tuple(range(max(m - 2, 1), m + 1))
    best = sorted(feasible, key=lambda k: frontier.values[k - 1])[:3]
    if m > _REFINED_AGENTS:
        return tuple(sorted(best))
    return tuple(sorted({c for k in best for c in (k - 1, k, k + 1) if 1 <= c <= m}))


@lru_cache(maxsize=128)
def unequal_orders(
    agent_sizes: tuple[int, ...],
    level: Fraction,
    max_ranks: tuple[int, ...] | None = None,
    server_ranks: tuple[int, ...] | None = None,
) -> RankChoice | None:
    """Agents' ranks and server rank with the smallest coverage reaching ``level``.

    For every server rank ``k`` tried: the smallest configuration on the family of
    common relative ranks ``l_j ~ x (n_j + 1)`` (which includes the Appendix A.1 ranks
    of Humbert et al. 2023 at ``x = level``); for the three ``k`` whose start is
    closest to the level, single-group descents and pairwise staircase moves while the
    coverage stays at or above ``level``. Agents of equal size take
    ranks that differ by at most one. The best configuration is certified (exact or
    quadrature values); ties go to the smaller ``k``.

    Parameters
    ----------
    agent_sizes : tuple of int
        Public sizes ``n_j``.
    level : Fraction
        Target coverage.
    max_ranks : tuple of int or None
        Per-agent largest rank allowed; larger ranks send ``+inf`` (top of the range).
    server_ranks : tuple of int or None
        Server ranks to try (default: all when ``m <= 16``, otherwise the three best of
        the equal-size frontier at the median size, and their neighbours when
        ``m <= 64``).

    Returns
    -------
    RankChoice or None
        None when no configuration reaches the level.
    """
    m = len(agent_sizes)
    groups = _groups(agent_sizes, max_ranks)
    columns = _Columns(agent_sizes, groups)
    level_float = float(level)
    if server_ranks is None:
        server_ranks = _server_rank_candidates(agent_sizes, level)
    starts: list[tuple[float, int, np.ndarray]] = []
    for k in server_ranks:
        start = _smallest_on_family(columns, groups, k, level_float)
        if start is not None:
            starts.append((float(columns(start)[k - 1]), k, start))
    starts.sort(key=lambda item: (item[0], item[1]))
    found: list[tuple[float, int, np.ndarray]] = []
    refined = _REFINED_SERVER_RANKS if m <= _REFINED_AGENTS else 0
    for _, k, start in starts[:refined]:
        index = _descend(columns, groups, start, k, level_float)
        index = _staircase(columns, groups, index, k, level_float)
        index = _descend(columns, groups, index, k, level_float)
        found.append((float(columns(index)[k - 1]), k, index))
    found += starts[refined:]
    if not found:
        return None
    found.sort(key=lambda item: (item[0], item[1]))
    best: RankChoice | None = None
    for fast, k, index in found:
        if best is not None and fast > float(best.coverage.key) + DECISION_MARGIN:
            break
        ranks = groups.ranks(index, m)
        certified = certify_column(agent_sizes, ranks)[k - 1]
        if certified.key < level:
            continue
        better = best is None or (
            certified.key < best.coverage.key and not certified.ties_with(best.coverage)
        )
        if better:
            best = RankChoice(ranks, k, certified)
    return best


def fast_best_orders(frontier: QQFrontier, max_rank: int | None = None) -> tuple[int, int] | None:
    """``(l, k)`` of :func:`best_orders` on fast values only (for comparing many levels).

    Not certified: the pair :func:`best_orders` returns differs only when fast values
    within :data:`DECISION_MARGIN` of the level or of each other would be decided
    otherwise.
    """
    ranks = np.asarray(frontier.ranks)
    values = np.asarray(frontier.values)
    limit = frontier.n_per_agent if max_rank is None else min(int(max_rank), frontier.n_per_agent)
    usable = np.flatnonzero(ranks <= limit)
    if usable.size == 0:
        return None
    order = np.lexsort((usable, ranks[usable], values[usable]))
    k = int(usable[order[0]]) + 1
    return int(ranks[k - 1]), k
