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
by :mod:`._fedcp_plan`, an agent index in range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._random import NoiseSource
from ._binning import bin_counts
from ._fedcp_plan import FedCP2QQPlan, FederatedPlan
from .expon_q import quantile_log_probabilities

__all__ = ["AgentRelease", "agent_log_probabilities", "agent_release"]


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


def _subset(scores: np.ndarray, size: int, noise: NoiseSource) -> np.ndarray:
    """A uniformly random subset of ``size`` scores (all of them if ``size`` is the count)."""
    if size >= scores.shape[0]:
        return scores
    keys = noise.uniform(scores.shape[0])
    return scores[np.argpartition(keys, size - 1)[:size]]


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
    sample = _subset(scores, plan.sample_sizes[agent], noise)
    if not isinstance(plan, FedCP2QQPlan):
        rank = plan.local_ranks[agent]
        return AgentRelease(float(np.partition(sample, rank - 1)[rank - 1]), None, True)
    edge = noise.categorical_from_log_weights(_log_probabilities(sample, plan, agent)) + 1
    return AgentRelease(edge / plan.n_bins, int(edge), True)
