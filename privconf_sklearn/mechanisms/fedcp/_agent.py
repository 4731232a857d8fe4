"""What one agent computes on its own machine: one release from its own scores.

Humbert, Le Bars, Bellet and Arlot (ICML 2023): the ``l``-th smallest score (FedCP-QQ,
Algorithm 1) or an exponential-mechanism edge of the rounded scores (FedCP2-QQ,
Algorithms 2-3), from a uniformly random subset when the plan uses fewer scores than the
agent holds. Inputs are validated by the callers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..._random import NoiseSource
from .._binning import bin_counts
from .._statistics import ScoreArray, ScoreStatistics
from ..expon_q import quantile_log_probabilities, sample_quantile_edge
from ._plan import FedCP2QQPlan, FederatedPlan


@dataclass(frozen=True)
class AgentRelease:
    """One agent's release.

    Attributes
    ----------
    value : float
        The released score in [0, 1].
    bin : int or None
        FedCP2-QQ: the edge index ``b`` (``value = b / B``); None for FedCP-QQ.
    read_data : bool
        False when the value is the top of the range, chosen without the data.
    """

    value: float
    bin: int | None
    read_data: bool


def _sample(statistics: ScoreStatistics, size: int, noise: NoiseSource) -> ScoreStatistics:
    """A uniformly random subset of ``size`` scores, or all of them if ``size`` is their number.

    The subset is the ``size`` smallest of uniform keys drawn from ``noise``.
    """
    if size >= statistics.n_samples:
        return statistics
    keys = noise.uniform(statistics.n_samples)
    return statistics.subset(np.argpartition(keys, size - 1)[:size])


def _edge(counts: np.ndarray, plan: FedCP2QQPlan, agent: int, noise: NoiseSource) -> int:
    """The FedCP2-QQ agent's released edge ``b`` (1-based), drawn exactly (Algorithm 2)."""
    return sample_quantile_edge(counts, plan.local_levels[agent], plan.epsilon, plan.scaling, noise)


def _release(
    scores: ScoreStatistics, plan: FederatedPlan, agent: int, noise: NoiseSource
) -> AgentRelease:
    """The release of an agent that reads its data."""
    sample = _sample(scores, plan.sample_sizes[agent], noise)
    if not isinstance(plan, FedCP2QQPlan):
        return AgentRelease(sample.kth_smallest(plan.local_ranks[agent]), None, True)
    edge = _edge(sample.bin_counts(plan.n_bins), plan, agent, noise)
    return AgentRelease(edge / plan.n_bins, int(edge), True)


def agent_log_probabilities(scores: np.ndarray, plan: FedCP2QQPlan, agent: int) -> np.ndarray:
    """Exact output distribution of a FedCP2-QQ agent that uses all its scores.

    Parameters
    ----------
    scores : ndarray of shape (n_j,)
        The agent's validated scores in [0, 1].
    plan : FedCP2QQPlan
        A feasible plan in which the agent uses all its scores.
    agent : int
        The agent's index.

    Returns
    -------
    ndarray of shape (n_bins,)
        ``log P(release = b / B)``, ``b = 1..B``; the point mass on 1.0 for an agent that
        sends the top.
    """
    if plan.sends_top(agent):
        log_probabilities = np.full(plan.n_bins, -np.inf)
        log_probabilities[-1] = 0.0
        return log_probabilities
    counts = bin_counts(scores, plan.n_bins)
    return quantile_log_probabilities(
        counts, plan.local_levels[agent], plan.epsilon, scaling=plan.scaling
    )


def agent_release(
    scores: np.ndarray, plan: FederatedPlan, agent: int, noise: NoiseSource
) -> AgentRelease:
    """The agent's release under a feasible plan (validated inputs).

    Parameters
    ----------
    scores : ndarray of shape (n_j,)
        The agent's scores in [0, 1], ``n_j = plan.agent_sizes[agent]``.
    plan : FedCPQQPlan or FedCP2QQPlan
        A feasible plan.
    agent : int
        The agent's index.
    noise : NoiseSource
        Randomness of the subset (if any) and of the exponential mechanism.

    Returns
    -------
    AgentRelease
    """
    if plan.sends_top(agent):
        return AgentRelease(1.0, plan.n_bins if isinstance(plan, FedCP2QQPlan) else None, False)
    return _release(ScoreArray._checked(scores), plan, agent, noise)


def agent_values(
    statistics: ScoreStatistics,
    parts: Sequence[ScoreStatistics],
    plan: FederatedPlan,
    noise: NoiseSource,
) -> list[float]:
    """The values of :func:`agent_release` for agents ``0, ..., m - 1`` of ``statistics``.

    The noise is drawn in that order; the exact statistics are batched where that cannot
    change it (every FedCP-QQ order statistic after the subsets are drawn, the FedCP2-QQ
    bin counts of the agents that use all their scores before any draw).
    """
    agents = range(plan.n_agents)
    reading = [j for j in agents if not plan.sends_top(j)]
    if not isinstance(plan, FedCP2QQPlan):
        samples = [_sample(parts[j], plan.sample_sizes[j], noise) for j in reading]
        ranks = [plan.local_ranks[j] for j in reading]
        found = dict(zip(reading, statistics.batch_kth_smallest(samples, ranks), strict=True))
        return [found.get(j, 1.0) for j in agents]
    whole = [j for j in reading if plan.sample_sizes[j] >= parts[j].n_samples]
    batch = statistics.batch_bin_counts([parts[j] for j in whole], plan.n_bins)
    counts = dict(zip(whole, batch, strict=True))
    values = []
    for j in agents:
        if plan.sends_top(j):
            values.append(1.0)
        elif j in counts:
            values.append(_edge(counts[j], plan, j, noise) / plan.n_bins)
        else:
            values.append(_release(parts[j], plan, j, noise).value)
    return values
