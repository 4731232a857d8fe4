"""What one agent computes on its own machine: one release from its own scores.

Humbert, Le Bars, Bellet and Arlot (ICML 2023). FedCP-QQ (their Algorithm 1): the
agent releases the ``l``-th smallest of its scores (the top of the range, 1.0, when
``l`` exceeds its size: Eq. (2) sets that quantile to ``+inf``). FedCP2-QQ (their
Algorithms 2-3): the agent rounds its scores up to the grid ``e_b = b / B`` and releases
an edge drawn by the exponential mechanism at its level ``q_j``
(:func:`~privconf_sklearn.mechanisms.expon_q.quantile_log_probabilities` with the plan's
scaling), so the release is epsilon-DP in the agent's scores. An agent the plan marks as
sending the top releases 1.0 without reading its data. An agent whose plan entry uses
fewer scores than it holds first draws a uniformly random subset of that size
(independent of the scores, so the subset is an i.i.d. sample and the release stays
epsilon-DP: a neighbouring data set changes at most one score of the subset).

Inputs are validated by the callers (the mechanisms, or the JSON transport of
:mod:`privconf_sklearn.federated`): scores in [0, 1] of the announced size, a plan made
by :func:`~.make_plan`, an agent index in range.
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

__all__ = ["AgentRelease", "agent_log_probabilities", "agent_release", "agent_values"]


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
    """A uniformly random subset of ``size`` scores (all of them if ``size`` is the count).

    The subset is the ``size`` smallest of ``n_j`` uniform keys drawn from ``noise``
    (independent of the scores).
    """
    if size >= statistics.n_samples:
        return statistics
    keys = noise.uniform(statistics.n_samples)
    return statistics.subset(np.argpartition(keys, size - 1)[:size])


def _edge(counts: np.ndarray, plan: FedCP2QQPlan, agent: int, noise: NoiseSource) -> int:
    """The FedCP2-QQ agent's released edge ``b`` (1-based) from its bin counts, drawn exactly."""
    return sample_quantile_edge(counts, plan.local_levels[agent], plan.epsilon, plan.scaling, noise)


def _log_probabilities(scores: np.ndarray, plan: FedCP2QQPlan, agent: int) -> np.ndarray:
    counts = bin_counts(scores, plan.n_bins)
    return quantile_log_probabilities(
        counts, plan.local_levels[agent], plan.epsilon, scaling=plan.scaling
    )


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
    return _log_probabilities(scores, plan, agent)


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
    sample = _sample(ScoreArray._checked(scores), plan.sample_sizes[agent], noise)
    if not isinstance(plan, FedCP2QQPlan):
        return AgentRelease(sample.kth_smallest(plan.local_ranks[agent]), None, True)
    edge = _edge(sample.bin_counts(plan.n_bins), plan, agent, noise)
    return AgentRelease(edge / plan.n_bins, int(edge), True)


def agent_values(
    statistics: ScoreStatistics,
    parts: Sequence[ScoreStatistics],
    plan: FederatedPlan,
    noise: NoiseSource,
) -> list[float]:
    """Every agent's released value under a feasible plan, agent after agent.

    The values, and the noise drawn for them, are those of :func:`agent_release` called
    for agent ``0, 1, ..., m - 1`` on its scores (the noise is drawn in that order: the
    subset keys and the exponential-mechanism draw of agent 0, then those of agent 1...).
    The exact statistics are asked of ``statistics`` in batches where that cannot
    change the order of the draws: every FedCP-QQ order statistic at once after the
    subsets are drawn (FedCP-QQ draws nothing else); the FedCP2-QQ bin counts of all
    agents that use all their scores at once, before any draw (a subset agent's counts
    are computed after its subset is drawn).

    Parameters
    ----------
    statistics : ScoreStatistics
        The statistics ``parts`` come from (:meth:`ScoreStatistics.agents`).
    parts : sequence of ScoreStatistics
        Each agent's scores, in agent order.
    plan : FedCPQQPlan or FedCP2QQPlan
        A feasible plan for these agents' sizes.
    noise : NoiseSource
        Randomness of the subsets and of the exponential mechanisms.

    Returns
    -------
    list of float
        Each agent's released value, in agent order.
    """
    agents = range(plan.n_agents)
    reading = [j for j in agents if not plan.sends_top(j)]
    if not isinstance(plan, FedCP2QQPlan):
        samples = [_sample(parts[j], plan.sample_sizes[j], noise) for j in reading]
        ranks = [plan.local_ranks[j] for j in reading]
        found = dict(zip(reading, statistics.batch_kth_smallest(samples, ranks), strict=True))
        return [found.get(j, 1.0) for j in agents]
    whole = [j for j in reading if plan.sample_sizes[j] >= parts[j].n_samples]
    counts = dict(
        zip(whole, statistics.batch_bin_counts([parts[j] for j in whole], plan.n_bins), strict=True)
    )
    values = []
    for j in agents:
        if plan.sends_top(j):
            values.append(1.0)
            continue
        if j not in counts:
            sample = _sample(parts[j], plan.sample_sizes[j], noise)
            counts[j] = sample.bin_counts(plan.n_bins)
        values.append(_edge(counts[j], plan, j, noise) / plan.n_bins)
    return values
