"""FedCP2-QQ's ``gamma``, number of bins ``B`` and ranks, from public quantities only.

Humbert, Le Bars, Bellet and Arlot (ICML 2023), Sec. 4 and Algorithm 3: the FedCP-QQ table
at level ``(1 - alpha) / (1 - gamma alpha)`` (:mod:`._search`) and each agent's correction
(:mod:`._correction`); the user guide's FedCP2-QQ page states the criterion and the rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache

import numpy as np
from scipy.stats import binom

from .._base import smallest_feasible_size
from ._correction import SCALINGS, AgentScaling, agent_failure_probability
from ._coverage import DECISION_MARGIN, FastColumns, OverBudget, WorkBudget, approximate_coverage
from ._search import (
    CERTIFY_CELLS,
    Table,
    equal_table,
    qq_frontier,
    threshold_sizes,
    thresholded_table,
    unequal_table,
)

#: ``(gamma, B)`` whose release is the top of the range with a larger probability on
#: idealised uniform scores are only used when no other pair is feasible.
TRIVIAL_TOLERANCE = 0.001

#: The idealised top probability is computed at no larger epsilon: beyond it every edge
#: weight but the largest is already 0.0, while ``epsilon n`` overflows from about 1e299.
SATURATING_EPSILON = 1e200

#: With more agents than this, ``gamma="auto"`` is searched coarse to fine.
FULL_GAMMA_SEARCH_AGENTS = 32


@dataclass(frozen=True)
class PrivateChoice:
    """A certified FedCP2-QQ choice: ``(gamma, B)``, the table and each agent's correction.

    An agent that sends the top without reading its data has table rank ``n'_j + 1``,
    correction 0, level 0.0 and ``releases`` False.
    """

    gamma: float
    n_bins: int
    table: Table
    table_ranks: tuple[int, ...]
    corrections: tuple[int, ...]
    levels: tuple[float, ...]
    releases: tuple[bool, ...]

    def lower_bound(self, alpha: float) -> Fraction:
        """``(1 - gamma alpha) M``, exactly (Theorem 4.1)."""
        return (1 - Fraction(self.gamma) * Fraction(alpha)) * self.table.coverage.key


@dataclass(frozen=True)
class _Request:
    """The public inputs of a FedCP2-QQ plan besides the sizes."""

    alpha: float
    epsilon: float
    gammas: tuple[float, ...]
    bins: tuple[int, ...]
    scaling: AgentScaling

    def level(self, gamma: float) -> Fraction:
        """``(1 - alpha) / (1 - gamma alpha)``, exactly."""
        return (1 - Fraction(self.alpha)) / (1 - Fraction(gamma) * Fraction(self.alpha))

    def choice(self, gamma: float, n_bins: int, table: Table, n_agents: int) -> PrivateChoice:
        """Each agent's correction at ``(gamma, B)`` for ``table``, among ``n_agents``."""
        delta = agent_failure_probability(gamma, self.alpha, n_agents)
        columns: list[tuple] = []
        for n, rank in zip(table.sample_sizes, table.local_ranks, strict=True):
            c = self.scaling.correction(rank, n, self.epsilon, n_bins, delta)
            if c is None:
                columns.append((n + 1, 0, 0.0, False))
            else:
                columns.append((rank, c, self.scaling.level(rank, c, n), True))
        return PrivateChoice(gamma, n_bins, table, *map(tuple, zip(*columns, strict=True)))

    def top_probability(self, n: int, q: float, n_bins: int) -> float:
        """P(the agent releases the top edge) on idealised scores spread evenly over the bins.

        Edge ``j`` then has ``n (j - 1) / B`` scores below it and ``n (B - j) / B`` above,
        so the exponent of its weight (the scaling's ``slopes`` per score below and above,
        :class:`~._correction.AgentScaling`) falls linearly up to the ``kink`` and rises
        after it: the normaliser is two geometric sums (the user guide's FedCP2-QQ page).
        """
        slope_below, slope_above = self.scaling.slopes(q, min(self.epsilon, SATURATING_EPSILON))
        step_below, step_above = slope_below * n / n_bins, slope_above * n / n_bins
        # Edges 1..kink: exponent step_above (B - j) (decreasing); kink+1..B: step_below (j - 1).
        kink = (step_above * n_bins + step_below) / (step_above + step_below)
        kink = min(max(math.floor(kink), 0), n_bins)
        left = _log_geometric(-step_above * (n_bins - kink), -step_above, kink)
        right = _log_geometric(-step_below * kink, -step_below, n_bins - kink)
        top = -step_below * (n_bins - 1) if kink < n_bins else 0.0
        return float(np.exp(top - np.logaddexp(left, right)))


def _log_geometric(log_first: float, log_ratio: float, count: int) -> float:
    """``log sum_{i < count} exp(log_first + i log_ratio)`` for ``log_ratio <= 0``."""
    if count <= 0:
        return -math.inf
    if log_ratio == 0.0:
        return log_first + math.log(count)
    return log_first + math.log(-math.expm1(count * log_ratio)) - math.log(-math.expm1(log_ratio))


def _criterion(coverage: float, n_bins: int, trivial: float) -> float:
    """Sec. 4's ``M`` plus ``1 / (2B)``, plus 1 if P(trivial) exceeds the tolerance."""
    return float(coverage) + 0.5 / n_bins + (1.0 if trivial > TRIVIAL_TOLERANCE else 0.0)


def _equal_candidates(m: int, n: int, request: _Request, gamma: float, n_agents: int):
    """``(criterion, B, rank limit)`` at ``gamma``: ``m`` agents of ``n`` among ``n_agents``."""
    delta = agent_failure_probability(gamma, request.alpha, n_agents)
    if delta == 0.0:  # a vanishing gamma alpha: no agent can release
        return []
    scaling, epsilon = request.scaling, request.epsilon
    limits = [scaling.largest_rank(n, epsilon, n_bins, delta) for n_bins in request.bins]
    if max(limits) < 1:  # no agent can release (e.g. a vanishing epsilon): skip the frontier
        return []
    level = request.level(gamma)
    # M is increasing in both ranks: if even (largest limit, m) is clearly below the level,
    # no frontier rank is usable: skip the frontier.
    if approximate_coverage(max(limits), m, m, n) < float(level) - DECISION_MARGIN:
        return []
    frontier = qq_frontier(m, n, level)
    ranks = np.asarray(frontier.ranks)
    # Server ranks by fast value, then local rank, then k: the first usable is the best.
    order = np.lexsort((np.arange(m), ranks, np.asarray(frontier.values)))
    sorted_ranks = ranks[order]
    found = []  # (B, limit, k, target rank)
    for n_bins, limit in zip(request.bins, limits, strict=True):
        usable = np.flatnonzero(sorted_ranks <= limit)
        if limit < 1 or usable.size == 0:
            continue
        k = int(order[usable[0]]) + 1
        rank = int(ranks[k - 1])
        correction = scaling.correction(rank, n, epsilon, n_bins, delta)
        if correction is not None:
            found.append((n_bins, limit, k, rank + correction))
    if not found:
        return []
    targets, ks = np.array([item[3] for item in found]), np.array([item[2] for item in found])
    values, out = approximate_coverage(targets, ks, m, n), []
    for value, (n_bins, limit, k, target) in zip(values, found, strict=True):
        top = request.top_probability(n, scaling.level(target, 0, n), n_bins)
        trivial = binom.sf(m - k, m, top)  # at least m - k + 1 agents at the top
        out.append((_criterion(value, n_bins, trivial), n_bins, limit))
    return out


@lru_cache(maxsize=1024)
def _equal_choice(m: int, n: int, request: _Request, n_agents: int) -> PrivateChoice | None:
    """The certified choice of least criterion, for ``m`` agents of ``n`` among ``n_agents``."""
    scores: dict[float, tuple[float, int, int]] = {}  # gamma -> (criterion, B, limit)

    def score(gammas) -> None:
        for gamma in gammas:
            if gamma not in scores:
                found = _equal_candidates(m, n, request, gamma, n_agents)
                scores[gamma] = min(found) if found else (math.inf, 0, 0)

    gammas = request.gammas
    if m > FULL_GAMMA_SEARCH_AGENTS and len(gammas) > 1:  # every third, then the neighbours
        score(gammas[::3])
        position = gammas.index(min(scores, key=lambda g: (scores[g][0], g)))
        score(gammas[max(position - 2, 0) : position + 3])
    else:
        score(gammas)
    gamma = min(scores, key=lambda g: (scores[g][0], g))
    criterion, n_bins, limit = scores[gamma]
    table = equal_table(m, n, request.level(gamma), limit) if math.isfinite(criterion) else None
    return None if table is None else request.choice(gamma, n_bins, table, n_agents)


def _trivial_probability(request: _Request, choice: PrivateChoice) -> float:
    """P(at least m - k + 1 agents release the top) on idealised uniform scores."""
    distribution = np.array([1.0])  # of the number of agents at the top
    for n, q, releases in zip(
        choice.table.sample_sizes, choice.levels, choice.releases, strict=True
    ):
        top = request.top_probability(n, q, choice.n_bins) if releases else 1.0
        rises = np.insert(distribution * top, 0, 0.0)
        distribution = np.append(distribution * (1.0 - top), 0.0) + rises
    return float(distribution[len(choice.releases) - choice.table.server_rank + 1 :].sum())


def _searched_choice(sizes, request: _Request, anchor: PrivateChoice):
    """The searched choice at the anchor's ``gamma`` (or None), and whether it is complete.

    Each agent's rank is within its releasable ranks at the anchor's ``(gamma, B)``; ``B``
    then minimises the criterion among the bins under which the same agents release.
    """
    delta = agent_failure_probability(anchor.gamma, request.alpha, len(sizes))
    limits = tuple(
        request.scaling.largest_rank(n, request.epsilon, anchor.n_bins, delta) for n in sizes
    )
    table, complete = unequal_table(sizes, request.level(anchor.gamma), limits)
    if table is None:
        return None, complete
    finite = tuple(rank <= n for rank, n in zip(table.local_ranks, sizes, strict=True))
    columns = FastColumns(sizes, WorkBudget(CERTIFY_CELLS))
    options = []
    for n_bins in request.bins:
        choice = request.choice(anchor.gamma, n_bins, table, len(sizes))
        if choice.releases != finite:
            continue
        # An agent sending the top has table rank n + 1 and correction 0.
        targets = tuple(r + c for r, c in zip(choice.table_ranks, choice.corrections, strict=True))
        try:
            value = columns(targets, table.server_rank)
        except OverBudget:
            complete = False
            break
        options.append((_criterion(value, n_bins, _trivial_probability(request, choice)), choice))
    if not options:
        return None, complete
    return min(options, key=lambda option: (option[0], option[1].n_bins))[1], complete


def _unequal_choice(sizes, request: _Request) -> PrivateChoice | None:
    """The searched or a thresholded choice, whichever certifies the smaller bound.

    ``gamma`` is the equal choice's at the smallest (feasible) size, and the thresholded
    choices' below all agents (:func:`~._search.thresholded_table`): the smallest size,
    and every threshold size when the search was cut. Ties go to the searched choice.
    """
    m = len(sizes)
    anchor = _equal_choice(m, min(sizes), request, m)
    if anchor is None and _equal_choice(m, max(sizes), request, m) is not None:
        size = smallest_feasible_size(lambda n: _equal_choice(m, n, request, m) is not None)
        anchor = _equal_choice(m, size, request, m)
    searched, complete = None, True
    if anchor is not None:
        searched, complete = _searched_choice(sizes, request, anchor)
    candidates = [] if searched is None else [searched]
    for size in [min(sizes)] if complete else threshold_sizes(sizes):
        kept = sum(n >= size for n in sizes)
        kept_request = replace(request, gammas=(anchor.gamma,)) if anchor and kept < m else request
        choice = _equal_choice(kept, size, kept_request, m)
        if choice is not None:
            table = thresholded_table(sizes, size, choice.table)
            candidates.append(request.choice(choice.gamma, choice.n_bins, table, m))
    return min(candidates, key=lambda c: c.lower_bound(request.alpha), default=None)


@lru_cache(maxsize=512)
def private_choice(
    sizes: tuple[int, ...],
    alpha: float,
    epsilon: float,
    gammas: tuple[float, ...],
    bins: tuple[int, ...],
    scaling: str,
) -> PrivateChoice | None:
    """The FedCP2-QQ choice for these sizes (at most ``MAX_SAMPLE_SIZE``), or None."""
    request = _Request(alpha, epsilon, gammas, bins, SCALINGS[scaling])
    if len(set(sizes)) == 1:
        return _equal_choice(len(sizes), sizes[0], request, len(sizes))
    return _unequal_choice(sizes, request)
