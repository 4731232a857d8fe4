"""The server's plan for one-shot federated calibration, from public quantities only.

Humbert, Le Bars, Bellet and Arlot (ICML 2023). Before any data is read the server
fixes, from the agents' (public) sizes, ``alpha`` and, for the private protocol,
``epsilon``, the bins and ``gamma``, what every agent sends and which message it keeps:

- FedCP-QQ (their Algorithm 1): equal sizes use ``(l*, k*)`` of Eq. (6)
  (:mod:`._fedcp_search`); unequal sizes search every agent's rank as well and, when
  that is not better, let every agent use a uniformly random subset of the smallest
  size with the equal-size plan (:func:`plan_fedcp_qq`).
- FedCP2-QQ (their Algorithm 3): the same at level ``(1 - alpha) / (1 - gamma alpha)``,
  each agent's rank raised by its correction (:mod:`._fedcp_correction`); ``gamma`` and
  the number of bins ``B`` are chosen on grids when "auto" (:func:`plan_fedcp2_qq`).

Agents with more than :data:`MAX_SAMPLE_SIZE` scores use a uniformly random subset of
that size, and plans are made for the sizes so capped (:func:`_capped`): planning cost
does not grow with the agents' sizes.

Plans are frozen dataclasses of public quantities, cached on their inputs; the JSON
transport (digests, versions) lives in :mod:`privconf_sklearn.federated`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import ClassVar

import numpy as np
from scipy.stats import binom

from ..._validation import Interval, NoneValue, Options, validate_params
from ._correction import (
    agent_failure_probability,
    largest_releasable_rank,
    paper_correction,
    tight_correction,
    tight_level,
)
from ._coverage import Certified, UnequalColumns, approximate_coverage
from ._search import best_orders, qq_frontier, unequal_orders

__all__ = [
    "BIN_GRID",
    "FEDCP2_QQ",
    "FEDCP_QQ",
    "GAMMA_GRID",
    "MAX_AGENTS",
    "MAX_AGENT_SIZE",
    "MAX_BINS",
    "MAX_SAMPLE_SIZE",
    "FedCP2QQPlan",
    "FedCPQQPlan",
    "FederatedPlan",
    "check_agent_sizes",
    "even_sizes",
    "make_plan",
    "min_informative_size",
    "plan_fedcp2_qq",
    "plan_fedcp_qq",
]

#: Protocol names.
FEDCP_QQ = "FedCP-QQ"
FEDCP2_QQ = "FedCP2-QQ"

#: Candidate ``gamma`` values for ``gamma="auto"``: the grid 0.05, ..., 0.95 of Sec. 4 of
#: Humbert et al. (2023), extended below 0.05 (with the tight correction, large agents
#: often do best with a small share of ``alpha`` for the privacy noise).
GAMMA_GRID = (0.002, 0.005, 0.01, 0.02, 0.03, 0.04, *(round(0.05 * i, 2) for i in range(1, 20)))

#: Candidate numbers of bins for ``n_bins="auto"``: 63 log-spaced values from 2 to 10^6.
BIN_GRID = tuple(int(b) for b in np.unique(np.round(np.geomspace(2, 10**6, 64)).astype(np.int64)))

#: Largest number of agents a plan is made for.
MAX_AGENTS = 10_000

#: Largest calibration size of one agent.
MAX_AGENT_SIZE = 10**9

#: Largest number of scores an agent uses: a larger agent uses a uniformly random subset
#: of this size (its ``sample_sizes`` entry), and the plan is made, and its coverage
#: certified exactly, for the sizes so capped. Planning cost grows with the sizes (a
#: table for agents of 10^9 scores takes minutes); at this size the certified excess
#: over the level is already of order 1e-5.
MAX_SAMPLE_SIZE = 10**4

#: Largest number of bins (each agent allocates one count per bin).
MAX_BINS = 10**6

#: With more agents than this, ``gamma="auto"`` is searched coarse to fine.
FULL_GAMMA_SEARCH_AGENTS = 32

#: With more agents than this, unequal sizes use the equal-size plan at the smallest
#: size (agents subsample); the rank search's cost grows with the square of ``m``.
MAX_RANK_SEARCH_AGENTS = 256


def _describe(sizes: tuple[int, ...]) -> str:
    if len(set(sizes)) == 1:
        return f"m = {len(sizes)} agents x n = {sizes[0]}"
    return f"m = {len(sizes)} agents, n_j in [{min(sizes)}, {max(sizes)}]"


# ------------------------------------------------------------------ plan types
@dataclass(frozen=True)
class FedCPQQPlan:
    """What every agent and the server must know before a FedCP-QQ round.

    Everything here is computed from public quantities; no score has been read.

    Attributes
    ----------
    alpha : float
        Target miscoverage.
    agent_sizes : tuple of int
        Calibration size ``n_j`` of each agent (public), in agent order ``0..m-1``.
    feasible : bool
        False when no ranks certify ``1 - alpha``; the threshold is then the top of the
        range and no agent reads its data.
    reason : str
        Why the plan is infeasible, or empty.
    sample_sizes : tuple of int
        ``n'_j <= min(n_j, MAX_SAMPLE_SIZE)``: agent ``j`` uses a uniformly random subset
        of ``n'_j`` of its scores (all of them when ``n'_j = n_j``). Empty when
        infeasible.
    local_ranks : tuple of int
        ``l_j``: agent ``j`` sends the ``l_j``-th smallest score of its subset, or the
        top of the range (1.0) without reading its data when ``l_j > n'_j``.
    server_rank : int
        ``k``: the server keeps the ``k``-th smallest message (0 when infeasible).
    coverage_lower_bound : float
        Certified marginal coverage ``M_k`` (Theorem 3.2 / Appendix A.1), at least
        ``1 - alpha`` when feasible (1 when infeasible: the trivial release).
    coverage_upper_bound : float
        Certified upper bound: the exact coverage for continuous scores (add the largest
        atom of the score distribution otherwise).
    """

    protocol: ClassVar[str] = FEDCP_QQ
    private: ClassVar[bool] = False

    alpha: float
    agent_sizes: tuple[int, ...]
    feasible: bool
    reason: str
    sample_sizes: tuple[int, ...]
    local_ranks: tuple[int, ...]
    server_rank: int
    coverage_lower_bound: float
    coverage_upper_bound: float

    @property
    def n_agents(self) -> int:
        """Number of agents ``m``."""
        return len(self.agent_sizes)

    def sends_top(self, agent: int) -> bool:
        """Whether ``agent``'s message is the top of the range, chosen without its data."""
        return self.local_ranks[agent] > self.sample_sizes[agent]


@dataclass(frozen=True)
class FedCP2QQPlan:
    """What every agent and the server must know before a FedCP2-QQ round.

    Attributes
    ----------
    alpha, agent_sizes, feasible, reason, sample_sizes, server_rank
        As for :class:`FedCPQQPlan`.
    epsilon : float
        Local privacy budget of each agent's message.
    scaling : {"tight", "paper"}
        Exponential-mechanism scaling of the agents (and the matching correction).
    n_bins_request, gamma_request : int or "auto", float or "auto"
        The requested number of bins and ``gamma`` (public inputs of the plan).
    n_bins : int
        Number ``B`` of uniform bins on [0, 1] the agents release an edge of (0 when
        infeasible with "auto").
    gamma : float
        Share of ``alpha`` given to the privacy noise (0.0 when infeasible with "auto").
    table_level : float
        ``(1 - alpha) / (1 - gamma alpha)`` (rounded to the nearest float).
    table_ranks : tuple of int
        Ranks ``l_j`` of the non-private estimator the coverage table is certified at;
        ``n'_j + 1`` (``+inf``) for agents that send the top of the range.
    rank_corrections : tuple of int
        ``c_j`` (0 for agents that send the top).
    local_levels : tuple of float
        Level ``q_j`` of each agent's exponential mechanism (0.0 for agents that send the
        top).
    releases : tuple of bool
        Whether agent ``j`` reads its data (False: it sends the top edge, 1.0).
    table_coverage : float
        Certified ``M_k`` at ``table_ranks`` (Theorem 3.2 / Appendix A.1).
    coverage_lower_bound : float
        ``(1 - gamma alpha) table_coverage`` (proof of Theorem 4.1), at least
        ``1 - alpha`` when feasible (1 when infeasible).
    """

    protocol: ClassVar[str] = FEDCP2_QQ
    private: ClassVar[bool] = True

    alpha: float
    agent_sizes: tuple[int, ...]
    epsilon: float
    scaling: str
    n_bins_request: int | str
    gamma_request: float | str
    feasible: bool
    reason: str
    n_bins: int
    gamma: float
    table_level: float
    sample_sizes: tuple[int, ...]
    table_ranks: tuple[int, ...]
    rank_corrections: tuple[int, ...]
    local_levels: tuple[float, ...]
    releases: tuple[bool, ...]
    server_rank: int
    table_coverage: float
    coverage_lower_bound: float

    @property
    def n_agents(self) -> int:
        """Number of agents ``m``."""
        return len(self.agent_sizes)

    def sends_top(self, agent: int) -> bool:
        """Whether ``agent``'s message is the top edge, chosen without its data."""
        return not self.releases[agent]


#: Either plan type.
FederatedPlan = FedCPQQPlan | FedCP2QQPlan


# ----------------------------------------------------------------- FedCP-QQ
@dataclass(frozen=True)
class _Table:
    """A certified choice of ranks: what both protocols start from."""

    sample_sizes: tuple[int, ...]
    local_ranks: tuple[int, ...]
    server_rank: int
    coverage: Certified
    subsampled: bool = field(default=False)


def _equal_table(m: int, n: int, level: Fraction, max_rank: int | None = None) -> _Table | None:
    orders = best_orders(qq_frontier(m, n, level), max_rank)
    if orders is None:
        return None
    return _Table((n,) * m, (orders.local_rank,) * m, orders.server_rank, orders.coverage)


def _unequal_table(sizes: tuple[int, ...], level: Fraction) -> _Table | None:
    """Searched ranks, or the equal-size plan at the smallest size (subsampling).

    The subsampled plan is taken when the search finds nothing with a smaller certified
    coverage: the certified excess is then never worse than the equal-size plan's at
    the smallest agent's size.
    """
    m, smallest = len(sizes), min(sizes)
    fallback = _equal_table(m, smallest, level)
    if fallback is not None:
        fallback = _Table(
            (smallest,) * m, fallback.local_ranks, fallback.server_rank, fallback.coverage, True
        )
    if m > MAX_RANK_SEARCH_AGENTS:
        return fallback
    choice = unequal_orders(sizes, level)
    if choice is None:
        return fallback
    searched = _Table(sizes, choice.local_ranks, choice.server_rank, choice.coverage)
    if fallback is not None and fallback.coverage.key < searched.coverage.key:
        return fallback
    return searched


def _capped(sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The sizes plans are made for: at most :data:`MAX_SAMPLE_SIZE` (larger agents subsample)."""
    return tuple(min(n, MAX_SAMPLE_SIZE) for n in sizes)


def _fedcp_qq_table(sizes: tuple[int, ...], alpha: float) -> _Table | None:
    sizes = _capped(sizes)
    level = 1 - Fraction(alpha)
    if len(set(sizes)) == 1:
        return _equal_table(len(sizes), sizes[0], level)
    return _unequal_table(sizes, level)


def _needed(n_agents: int, needed: int) -> str:
    """``"every agent needs at least N calibration scores for m agents"``."""
    if needed > MAX_SAMPLE_SIZE:
        return (
            f"every agent would need more than the {MAX_SAMPLE_SIZE} scores an agent uses "
            f"(larger agents subsample) for {n_agents} agents"
        )
    return f"every agent needs at least {needed} calibration scores for {n_agents} agents"


def _fedcp_qq_reason(sizes: tuple[int, ...], alpha: float) -> str:
    needed = min_informative_size(len(sizes), alpha)
    return (
        f"no quantile-of-quantiles ranks reach coverage 1 - alpha = {1 - alpha:g} with "
        f"{_describe(sizes)}: {_needed(len(sizes), needed)} (or use more agents)."
    )


@lru_cache(maxsize=256)
def plan_fedcp_qq(sizes: tuple[int, ...], alpha: float) -> FedCPQQPlan:
    """The FedCP-QQ plan (validated inputs; see :func:`privconf_sklearn.federated.make_plan`).

    Parameters
    ----------
    sizes : tuple of int
        Agents' calibration sizes (at least two agents).
    alpha : float
        Miscoverage level.

    Returns
    -------
    FedCPQQPlan
    """
    table = _fedcp_qq_table(sizes, alpha)
    if table is None:
        return FedCPQQPlan(alpha, sizes, False, _fedcp_qq_reason(sizes, alpha), (), (), 0, 1.0, 1.0)
    return FedCPQQPlan(
        alpha=alpha,
        agent_sizes=sizes,
        feasible=True,
        reason="",
        sample_sizes=table.sample_sizes,
        local_ranks=table.local_ranks,
        server_rank=table.server_rank,
        coverage_lower_bound=table.coverage.lower_float,
        coverage_upper_bound=table.coverage.upper_float,
    )


# ---------------------------------------------------------------- FedCP2-QQ
@dataclass(frozen=True)
class _Agents:
    """Per-agent corrections at one ``(gamma, B)``: who releases, at which level."""

    table_ranks: tuple[int, ...]
    corrections: tuple[int, ...]
    levels: tuple[float, ...]
    releases: tuple[bool, ...]


def _corrected_agents(table: _Table, epsilon, n_bins, delta, scaling) -> _Agents:
    ranks, corrections, levels, releases = [], [], [], []
    for n, rank in zip(table.sample_sizes, table.local_ranks, strict=True):
        correction: int | None = None
        if rank <= n:
            if scaling == "paper":
                correction = paper_correction(epsilon, n_bins, delta)
                if correction is not None and rank + correction > n - 1:
                    correction = None
            else:
                correction = tight_correction(rank, n, epsilon, n_bins, delta)
        if correction is None:
            ranks.append(n + 1)
            corrections.append(0)
            levels.append(0.0)
            releases.append(False)
        else:
            ranks.append(rank)
            corrections.append(correction)
            target = rank + correction
            levels.append(
                max(target / n, 0.5) if scaling == "paper" else tight_level(rank, correction, n)
            )
            releases.append(True)
    return _Agents(tuple(ranks), tuple(corrections), tuple(levels), tuple(releases))


def _level(alpha: float, gamma: float) -> Fraction:
    return (1 - Fraction(alpha)) / (1 - Fraction(gamma) * Fraction(alpha))


def _criterion(table: _Table, agents: _Agents, n_bins: int) -> float:
    """Sec. 4's score: coverage at the corrected ranks, plus the grid's mean rounding.

    ``M_k`` of the non-private estimator at the ranks the agents aim at (``+inf`` for
    agents that do not release), plus ``1 / (2B)``: on uniform scores, rounding each
    message up to the grid adds half a bin on average. Fast values; not a certificate.
    """
    targets = tuple(
        rank + c if release else n + 1
        for rank, c, release, n in zip(
            table.local_ranks, agents.corrections, agents.releases, table.sample_sizes, strict=True
        )
    )
    sizes = table.sample_sizes
    k = table.server_rank
    if len(set(sizes)) == 1 and len(set(targets)) == 1 and targets[0] <= sizes[0]:
        value = float(approximate_coverage(targets[0], k, len(sizes), sizes[0]))
    else:
        value = float(UnequalColumns(sizes)(targets)[k - 1])
    return value + 0.5 / n_bins


@dataclass(frozen=True)
class _PrivateTable:
    """A certified FedCP2-QQ choice: ``(gamma, B)``, table and the agents' corrections."""

    gamma: float
    n_bins: int
    table: _Table
    agents: _Agents

    def lower_bound(self, alpha: float) -> Fraction:
        """``(1 - gamma alpha) M``, exactly (from the certified ``M``)."""
        return (1 - Fraction(self.gamma) * Fraction(alpha)) * self.table.coverage.key


#: (gamma, B) pairs whose release is the top of the range with a larger probability on
#: idealised uniform scores are only used when no other pair is feasible.
TRIVIAL_TOLERANCE = 0.001

#: The idealised top probability is computed at no larger epsilon: beyond it the weight
#: of every edge but the most likely ones is already zero in double precision, while
#: ``epsilon n`` would overflow from about 10^299 on.
SATURATING_EPSILON = 1e200


def _log_geometric(log_first: float, log_ratio: float, count: int) -> float:
    """``log sum_{i < count} exp(log_first + i log_ratio)`` for ``log_ratio <= 0``."""
    if count <= 0:
        return -math.inf
    if log_ratio == 0.0:
        return log_first + math.log(count)
    return log_first + math.log(-math.expm1(count * log_ratio)) - math.log(-math.expm1(log_ratio))


def _idealised_top_probability(n: int, q: float, epsilon: float, n_bins: int, scaling: str):
    """P(an agent releases the top edge) on idealised uniform scores (public quantities).

    The ``n`` scores spread evenly over the ``B`` bins: edge ``j`` has ``n (j - 1)/B``
    scores below and ``n (B - j)/B`` above, so the exponent is the larger of two linear
    functions of ``j`` and the normaliser two geometric sums. Computed at
    ``min(epsilon, SATURATING_EPSILON)``.
    """
    epsilon = min(epsilon, SATURATING_EPSILON)
    if scaling == "paper":
        sensitivity = max(1.0 / q, 1.0 / (1.0 - q))
        slope_below, slope_above = (
            epsilon / (2 * sensitivity * q),
            epsilon / (2 * sensitivity * (1 - q)),
        )
    else:
        slope_below, slope_above = epsilon * (1.0 - q), epsilon * q
    step_below, step_above = slope_below * n / n_bins, slope_above * n / n_bins
    # Edges 1..kink: exponent step_above (B - j) (decreasing); kink+1..B: step_below (j - 1).
    kink = min(
        max(math.floor((step_above * n_bins + step_below) / (step_above + step_below)), 0), n_bins
    )
    left = _log_geometric(-step_above * (n_bins - kink), -step_above, kink)
    right = _log_geometric(-step_below * kink, -step_below, n_bins - kink)
    log_total = np.logaddexp(left, right)
    top = -step_below * (n_bins - 1) if kink < n_bins else 0.0
    return float(np.exp(top - log_total))


def _trivial_probability(table: _Table, agents: _Agents, epsilon, n_bins, scaling) -> float:
    """P(at least m - k + 1 agents release the top) on idealised uniform scores."""
    distribution = np.array([1.0])  # of the number of agents at the top
    for n, q, releases in zip(table.sample_sizes, agents.levels, agents.releases, strict=True):
        top = _idealised_top_probability(n, q, epsilon, n_bins, scaling) if releases else 1.0
        distribution = np.append(distribution * (1.0 - top), 0.0) + np.insert(
            distribution * top, 0, 0.0
        )
    return float(distribution[len(table.sample_sizes) - table.server_rank + 1 :].sum())


def _equal_candidates(m, n, alpha, epsilon, gamma, bins, scaling) -> list[tuple[float, int, int]]:
    """``(criterion, B, releasable-rank limit)`` at ``gamma`` for every ``B`` (fast values).

    The criterion is raised by 1 (so that any pair below :data:`TRIVIAL_TOLERANCE` wins)
    when the release would be the top of the range with probability above the tolerance
    on idealised uniform scores.
    """
    delta = agent_failure_probability(gamma, alpha, m)
    if delta == 0.0:  # a vanishing gamma alpha: no agent can release
        return []
    limits = [largest_releasable_rank(n, epsilon, n_bins, delta, scaling) for n_bins in bins]
    if max(limits) < 1:  # no agent can release (e.g. a vanishing epsilon): skip the frontier
        return []
    frontier = qq_frontier(m, n, _level(alpha, gamma))
    ranks = np.asarray(frontier.ranks)
    order = np.lexsort((np.arange(m), ranks, np.asarray(frontier.values)))
    sorted_ranks = ranks[order]
    found: list[tuple[int, int, int, int]] = []  # (B, limit, k, target rank)
    for n_bins, limit in zip(bins, limits, strict=True):
        usable = np.flatnonzero(sorted_ranks <= limit)
        if limit < 1 or usable.size == 0:
            continue
        k = int(order[usable[0]]) + 1
        rank = int(ranks[k - 1])
        if scaling == "paper":
            correction = paper_correction(epsilon, n_bins, delta)
        else:
            correction = tight_correction(rank, n, epsilon, n_bins, delta)
        if correction is not None:
            found.append((n_bins, limit, k, rank + correction))
    if not found:
        return []
    values = approximate_coverage(
        np.array([item[3] for item in found]), np.array([item[2] for item in found]), m, n
    )
    out = []
    for value, (n_bins, limit, k, target) in zip(values, found, strict=True):
        q = max(target / n, 0.5) if scaling == "paper" else target / n
        top = _idealised_top_probability(n, q, epsilon, n_bins, scaling)
        trivial = binom.sf(m - k, m, top)  # at least m - k + 1 agents at the top
        penalty = 1.0 if trivial > TRIVIAL_TOLERANCE else 0.0
        out.append((float(value) + 0.5 / n_bins + penalty, n_bins, limit))
    return out


def _equal_private(m, n, alpha, epsilon, gammas, bins, scaling) -> _PrivateTable | None:
    """The equal-size FedCP2-QQ choice: best criterion over the grids, then certified.

    With more than :data:`FULL_GAMMA_SEARCH_AGENTS` agents and the whole
    :data:`GAMMA_GRID`, ``gamma`` is searched coarse to fine (every third grid value,
    then the grid neighbours of the best); each ``gamma`` costs a frontier search whose
    cost grows with ``m``, and with many agents the criterion is smooth in ``gamma``.
    """
    scores: dict[float, tuple[float, int, int]] = {}  # gamma -> (criterion, B, limit)

    def score(gamma: float) -> None:
        if gamma not in scores:
            found = _equal_candidates(m, n, alpha, epsilon, gamma, bins, scaling)
            scores[gamma] = min(found) if found else (math.inf, 0, 0)

    if m > FULL_GAMMA_SEARCH_AGENTS and gammas == GAMMA_GRID:
        for gamma in gammas[::3]:
            score(gamma)
        best_gamma = min(scores, key=lambda g: (scores[g][0], g))
        position = gammas.index(best_gamma)
        for gamma in gammas[max(position - 2, 0) : position + 3]:
            score(gamma)
    else:
        for gamma in gammas:
            score(gamma)
    gamma = min(scores, key=lambda g: (scores[g][0], g))
    criterion, n_bins, limit = scores[gamma]
    if not math.isfinite(criterion):
        return None
    table = _equal_table(m, n, _level(alpha, gamma), limit)
    if table is None:
        return None
    delta = agent_failure_probability(gamma, alpha, m)
    return _PrivateTable(
        gamma, n_bins, table, _corrected_agents(table, epsilon, n_bins, delta, scaling)
    )


def _unequal_private(sizes, alpha, epsilon, gammas, bins, scaling) -> _PrivateTable | None:
    """Searched ranks at the ``gamma`` of a representative equal size, or subsampling.

    ``gamma`` is the one chosen for ``m`` equal agents of the smallest size, or of the
    smallest size with a feasible equal-size plan if that is larger; the ranks are
    searched at its level and ``B`` minimises the criterion for these ranks. The
    equal-size plan at the smallest size, with every agent subsampling, is kept when its
    certified bound is smaller.
    """
    m, smallest = len(sizes), min(sizes)
    reference = _equal_private(m, smallest, alpha, epsilon, gammas, bins, scaling)
    candidates: list[_PrivateTable] = []
    if reference is not None:
        table = reference.table
        subsampled = _Table(
            table.sample_sizes, table.local_ranks, table.server_rank, table.coverage, True
        )
        candidates.append(
            _PrivateTable(reference.gamma, reference.n_bins, subsampled, reference.agents)
        )
    anchor = reference
    if anchor is None:
        size = _smallest_feasible_size(
            lambda n: _equal_private(m, n, alpha, epsilon, gammas, bins, scaling) is not None
        )
        if size <= max(sizes):
            anchor = _equal_private(m, size, alpha, epsilon, gammas, bins, scaling)
    if anchor is not None and m <= MAX_RANK_SEARCH_AGENTS:
        searched = _searched_private(sizes, alpha, epsilon, anchor, bins, scaling)
        if searched is not None:
            candidates.append(searched)
    if not candidates:
        return None
    # Smallest certified bound; ties go to the searched plan (no subsampling).
    return min(reversed(candidates), key=lambda c: c.lower_bound(alpha))


def _searched_private(sizes, alpha, epsilon, anchor: _PrivateTable, bins, scaling):
    """Ranks searched at the anchor's level, each agent within its releasable ranks.

    The agents' largest releasable ranks at the anchor's ``(gamma, B)`` bound the search
    (an agent above its bound sends the top, ``+inf`` in the table); then ``B`` minimises
    the criterion among the bins under which the same agents release.
    """
    m = len(sizes)
    level = _level(alpha, anchor.gamma)
    delta = agent_failure_probability(anchor.gamma, alpha, m)
    limits = tuple(
        largest_releasable_rank(n, epsilon, anchor.n_bins, delta, scaling) for n in sizes
    )
    choice = unequal_orders(sizes, level, limits)
    if choice is None:
        return None
    table = _Table(sizes, choice.local_ranks, choice.server_rank, choice.coverage)
    finite = tuple(rank <= n for rank, n in zip(table.local_ranks, sizes, strict=True))
    options = []
    for n_bins in bins:
        agents = _corrected_agents(table, epsilon, n_bins, delta, scaling)
        if agents.releases != finite:
            continue
        trivial = _trivial_probability(table, agents, epsilon, n_bins, scaling)
        penalty = 1.0 if trivial > TRIVIAL_TOLERANCE else 0.0
        options.append((_criterion(table, agents, n_bins) + penalty, n_bins, agents))
    if not options:
        return None
    _, n_bins, agents = min(options, key=lambda option: option[:2])
    return _PrivateTable(anchor.gamma, n_bins, table, agents)


def _private_reason(sizes, alpha, epsilon, n_bins_request, gamma_request, scaling) -> str:
    bins = "bins chosen automatically" if n_bins_request == "auto" else f"{n_bins_request} bins"
    if len(set(sizes)) == 1:
        needed = min_informative_size(
            len(sizes),
            alpha,
            epsilon=epsilon,
            n_bins=n_bins_request,
            gamma=gamma_request,
            scaling=scaling,
        )
        detail = (
            "the privacy correction added to the rank needed for coverage "
            "(1 - alpha)/(1 - gamma alpha) exceeds the agents' data for every gamma and "
            "number of bins tried"
        )
        hint = _needed(len(sizes), needed)
    else:
        detail = (
            "fewer agents can release within their data than the server rank needs, for every gamma"
        )
        hint = "larger local calibration sets are needed"
    return (
        f"with {_describe(sizes)}, epsilon = {epsilon:g} and {bins}, {detail} "
        f"(alpha = {alpha:g}): {hint}, or a larger epsilon."
    )


@lru_cache(maxsize=256)
def plan_fedcp2_qq(
    sizes: tuple[int, ...],
    alpha: float,
    epsilon: float,
    n_bins_request: int | str,
    gamma_request: float | str,
    scaling: str,
) -> FedCP2QQPlan:
    """The FedCP2-QQ plan (validated inputs; see :func:`privconf_sklearn.federated.make_plan`).

    ``gamma`` and ``B`` ("auto": every pair of :data:`GAMMA_GRID` x :data:`BIN_GRID`)
    minimise Sec. 4's criterion (:func:`_criterion`) among the pairs whose table has
    every agent's corrected rank within its data. Unequal sizes: see
    :func:`_unequal_private`.

    Returns
    -------
    FedCP2QQPlan
    """
    choice = _private_choice(sizes, alpha, epsilon, n_bins_request, gamma_request, scaling)
    if choice is None:
        return FedCP2QQPlan(
            alpha=alpha,
            agent_sizes=sizes,
            epsilon=epsilon,
            scaling=scaling,
            n_bins_request=n_bins_request,
            gamma_request=gamma_request,
            feasible=False,
            reason=_private_reason(sizes, alpha, epsilon, n_bins_request, gamma_request, scaling),
            n_bins=0 if n_bins_request == "auto" else int(n_bins_request),
            gamma=0.0 if gamma_request == "auto" else float(gamma_request),
            table_level=1.0,
            sample_sizes=(),
            table_ranks=(),
            rank_corrections=(),
            local_levels=(),
            releases=(),
            server_rank=0,
            table_coverage=1.0,
            coverage_lower_bound=1.0,
        )
    table, agents = choice.table, choice.agents
    bound = choice.lower_bound(alpha)
    return FedCP2QQPlan(
        alpha=alpha,
        agent_sizes=sizes,
        epsilon=epsilon,
        scaling=scaling,
        n_bins_request=n_bins_request,
        gamma_request=gamma_request,
        feasible=True,
        reason="",
        n_bins=choice.n_bins,
        gamma=choice.gamma,
        table_level=float(_level(alpha, choice.gamma)),
        sample_sizes=table.sample_sizes,
        table_ranks=agents.table_ranks,
        rank_corrections=agents.corrections,
        local_levels=agents.levels,
        releases=agents.releases,
        server_rank=table.server_rank,
        table_coverage=table.coverage.lower_float,
        coverage_lower_bound=Certified(bound, table.coverage.exact, bound).lower_float,
    )


@lru_cache(maxsize=512)
def _private_choice(sizes, alpha, epsilon, n_bins_request, gamma_request, scaling):
    sizes = _capped(sizes)
    gammas = GAMMA_GRID if gamma_request == "auto" else (float(gamma_request),)
    bins = BIN_GRID if n_bins_request == "auto" else (int(n_bins_request),)
    if len(set(sizes)) == 1:
        return _equal_private(len(sizes), sizes[0], alpha, epsilon, gammas, bins, scaling)
    return _unequal_private(sizes, alpha, epsilon, gammas, bins, scaling)


# ----------------------------------------------------------------- planning
def _smallest_feasible_size(feasible) -> int:
    """Smallest ``n`` in ``1..MAX_AGENT_SIZE`` with ``feasible(n)`` (a monotone predicate).

    Doubling, then bisection. ``MAX_AGENT_SIZE + 1`` when even the largest is infeasible.
    """
    low, high = 0, 1  # low infeasible (0 by convention), high to be checked
    while not feasible(high):
        if high >= MAX_AGENT_SIZE:
            return MAX_AGENT_SIZE + 1
        low, high = high, min(2 * high, MAX_AGENT_SIZE)
    while high - low > 1:
        middle = (low + high) // 2
        if feasible(middle):
            high = middle
        else:
            low = middle
    return high


@lru_cache(maxsize=256)
def min_informative_size(
    n_agents: int,
    alpha: float,
    *,
    epsilon: float | None = None,
    n_bins: int | str = "auto",
    gamma: float | str = "auto",
    scaling: str = "tight",
) -> int:
    """Smallest per-agent size ``n`` for which ``n_agents`` agents of ``n`` get a feasible plan.

    Feasibility is non-decreasing in ``n``: the ``(l + 1)``-th smallest of ``n + 1``
    uniform scores stochastically dominates the ``l``-th of ``n`` (so ``M`` does not
    decrease along that step), and the correction of the tight scaling does not grow
    along it (``(l + c)(c + 1) / n`` does not decrease when ``n`` and ``l`` grow by one,
    since ``c + 1 >= log((B - 1)/delta) / epsilon``); the paper's correction does not
    depend on ``l`` or ``n``. Each ``(gamma, B)`` is therefore feasible from some ``n``
    on, and so is the union over the grids. The boundary is found by doubling and
    bisection on the plans' feasibility.

    Returns
    -------
    int
        At most :data:`MAX_AGENT_SIZE`; ``MAX_AGENT_SIZE + 1`` if even that is infeasible.
    """
    if epsilon is None:
        return _smallest_feasible_size(
            lambda n: _fedcp_qq_table((n,) * n_agents, alpha) is not None
        )
    return _smallest_feasible_size(
        lambda n: (
            _private_choice((n,) * n_agents, alpha, epsilon, n_bins, gamma, scaling) is not None
        )
    )


def even_sizes(n_samples: int, n_agents: int) -> tuple[int, ...]:
    """``n_samples`` spread over ``n_agents`` as evenly as possible (sizes differ by 1)."""
    base, extra = divmod(int(n_samples), int(n_agents))
    return tuple(base + 1 if j < extra else base for j in range(n_agents))


# ------------------------------------------------------------- public entry
#: Constraints on :func:`make_plan`'s scalar arguments.
PLAN_CONSTRAINTS = {
    "alpha": [Interval("real", 0.0, 1.0, closed="neither")],
    "epsilon": [NoneValue(), Interval("real", 0.0, None, closed="neither")],
    "n_bins": [Options("auto"), Interval("integer", 2, MAX_BINS)],
    "gamma": [Options("auto"), Interval("real", 0.0, 1.0, closed="neither")],
    "scaling": [Options("tight", "paper")],
}

_SIZE = Interval("integer", 1, MAX_AGENT_SIZE)


def check_agent_sizes(agent_sizes, owner: str = "make_plan") -> tuple[int, ...]:
    """Validate public agent sizes: 2 to :data:`MAX_AGENTS` integers in ``[1, MAX_AGENT_SIZE]``.

    Raises
    ------
    TypeError
        If ``agent_sizes`` is not a sequence of integers (bools and floats are not).
    ValueError
        If there are fewer than two or more than :data:`MAX_AGENTS` agents, or a size
        is out of range.
    """
    if isinstance(agent_sizes, np.ndarray):
        if agent_sizes.ndim != 1:
            raise ValueError(
                f"{owner}: agent_sizes must be one-dimensional; got shape {agent_sizes.shape}."
            )
        agent_sizes = agent_sizes.tolist()
    if not isinstance(agent_sizes, list | tuple):
        raise TypeError(
            f"{owner}: agent_sizes must be a list or tuple of integers; got "
            f"{type(agent_sizes).__name__}."
        )
    if not 2 <= len(agent_sizes) <= MAX_AGENTS:
        raise ValueError(
            f"{owner}: federated calibration needs 2 to {MAX_AGENTS} agents; got "
            f"{len(agent_sizes)} (agent_sizes={list(agent_sizes)[:10]})."
        )
    for position, size in enumerate(agent_sizes):
        if not _SIZE.accepts_type(size):
            raise TypeError(
                f"{owner}: agent_sizes[{position}] must be an integer; got {size!r} of type "
                f"{type(size).__name__}."
            )
        if not _SIZE.accepts_value(size):
            raise ValueError(
                f"{owner}: agent_sizes[{position}] must be {_SIZE.describe()}; got {size!r}."
            )
    return tuple(int(size) for size in agent_sizes)


def make_plan(
    agent_sizes, alpha: float, *, epsilon=None, n_bins="auto", gamma="auto", scaling="tight"
) -> FederatedPlan:
    """The server's plan for FedCP-QQ (``epsilon=None``) or FedCP2-QQ.

    Parameters
    ----------
    agent_sizes : sequence of int
        Public calibration size of each agent (2 to 10 000 agents, each at most 10^9).
        An agent with more than :data:`MAX_SAMPLE_SIZE` (10^4) scores uses a uniformly
        random subset of that size (the plan's ``sample_sizes``).
    alpha : float
        Target miscoverage in (0, 1).
    epsilon : float or None, default=None
        Local privacy budget of each agent's message; None for the non-private
        FedCP-QQ.
    n_bins : int or "auto", default="auto"
        Number ``B`` of uniform bins on [0, 1] (FedCP2-QQ), at most 10^6; "auto" chooses
        it from public quantities (see the user guide).
    gamma : float or "auto", default="auto"
        Share of ``alpha`` given to the privacy noise (FedCP2-QQ), in (0, 1).
    scaling : {"tight", "paper"}, default="tight"
        FedCP2-QQ agents' exponential-mechanism scaling and the matching rank
        correction (``"paper"``: Algorithm 2 and Eq. (10) of Humbert et al. 2023).

    Returns
    -------
    FedCPQQPlan or FedCP2QQPlan
        Cached: the same public inputs give the same plan object.

    Raises
    ------
    TypeError, ValueError
        For arguments of the wrong type or value, naming the argument.
    """
    sizes = check_agent_sizes(agent_sizes)
    checked = validate_params(
        "make_plan",
        PLAN_CONSTRAINTS,
        {"alpha": alpha, "epsilon": epsilon, "n_bins": n_bins, "gamma": gamma, "scaling": scaling},
    )
    if checked["epsilon"] is None:
        return plan_fedcp_qq(sizes, checked["alpha"])
    return plan_fedcp2_qq(
        sizes,
        checked["alpha"],
        checked["epsilon"],
        checked["n_bins"],
        checked["gamma"],
        checked["scaling"],
    )
