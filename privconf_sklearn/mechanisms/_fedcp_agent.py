"""What one agent runs on its own machine: one message from its own scores.

Paper 004. FedCP-QQ (Algorithm 1): the agent sends the ``l``-th smallest of its scores
(the top of the range, 1.0, when ``l > n_j``: Eq. (2) sets that quantile to
``+inf``). FedCP2-QQ (Algorithms 2-3): the agent rounds its scores up to the grid
``e_b = b / B`` and releases an edge drawn by the exponential mechanism at level
``q_j`` with the utility scaled by its sensitivity,
``P(e_b) proportional to exp(-eps w_b / (2 Delta_q))`` (DESIGN.md correction 1, which
paper 004's Algorithm 2 already has), so the message is epsilon-local-DP. An agent
whose level would be 1 sends 1.0 without reading its data.

Scores must already lie in the public range [0, 1]. The message is a small
JSON-serialisable dict.
"""

from __future__ import annotations

import numbers
from functools import lru_cache
from typing import Any

import numpy as np

from .._random import check_noise_source
from .._validation import check_unit_scores
from ._binning import bin_counts
from ._fedcp_plan import PROTOCOL_VERSION, FederatedPlan, make_plan
from .expon_q import quantile_log_probabilities

__all__ = ["agent_message", "agent_message_log_probabilities"]


def _check_plan(plan, max_epsilon=None) -> FederatedPlan:
    """A feasible plan that follows from its own public inputs, within the agent's budget.

    The agent recomputes the plan from ``(agent_sizes, alpha, epsilon, n_bins, gamma)``
    so that a plan whose ranks or levels were altered in transit is refused.
    """
    if isinstance(plan, dict):
        plan = FederatedPlan.from_dict(plan)
    if not isinstance(plan, FederatedPlan):
        raise TypeError(f"plan must be a FederatedPlan or its dict; got {type(plan).__name__}.")
    if not plan.feasible:
        raise ValueError(
            f"The plan is infeasible ({plan.reason}); agents send no message and the "
            "server releases the top of the range."
        )
    if max_epsilon is not None and (not plan.private or plan.epsilon > max_epsilon):
        asked = "no privacy" if not plan.private else f"epsilon = {plan.epsilon:g}"
        raise ValueError(f"The plan asks for {asked}; this agent allows at most {max_epsilon:g}.")
    if not _follows_from_public_inputs(plan):
        raise ValueError(
            "The plan does not follow from its public inputs (agent sizes, alpha, epsilon, "
            "bins, gamma): refusing to answer it."
        )
    return plan


@lru_cache(maxsize=64)
def _follows_from_public_inputs(plan: FederatedPlan) -> bool:
    """Whether recomputing the plan from its public inputs gives the same plan."""
    if plan.private:
        expected = make_plan(
            plan.agent_sizes, plan.alpha, epsilon=plan.epsilon, n_bins=plan.n_bins, gamma=plan.gamma
        )
    else:
        expected = make_plan(plan.agent_sizes, plan.alpha)
    return plan == expected


def _check_agent(plan: FederatedPlan, agent) -> int:
    if not isinstance(agent, numbers.Integral) or isinstance(agent, bool):
        raise TypeError(f"agent must be an integer index; got {agent!r}.")
    if not 0 <= agent < plan.n_agents:
        raise ValueError(f"agent must be in 0..{plan.n_agents - 1}; got {agent}.")
    return int(agent)


def _check_local_scores(scores, plan: FederatedPlan, agent: int) -> np.ndarray:
    scores = check_unit_scores(scores)
    expected = plan.agent_sizes[agent]
    if scores.shape[0] != expected:
        raise ValueError(
            f"Agent {agent} holds {scores.shape[0]} scores but the plan was made for "
            f"{expected}: the sizes announced to the server must be the real ones."
        )
    return scores


def agent_message_log_probabilities(scores, plan, agent: int) -> np.ndarray:
    """Exact output distribution of a FedCP2-QQ agent's message.

    Parameters
    ----------
    scores : array-like of shape (n_j,)
        The agent's calibration scores in [0, 1].
    plan : FederatedPlan or dict
        A feasible FedCP2-QQ plan.
    agent : int
        The agent's index in the plan.

    Returns
    -------
    ndarray of shape (n_bins,)
        ``log P(message value = b / n_bins)``, ``b = 1..n_bins``; the point mass on 1.0
        for an agent that sends the top of the range.
    """
    plan = _check_plan(plan)
    if not plan.private:
        raise ValueError("Only FedCP2-QQ messages are random; this plan is FedCP-QQ.")
    agent = _check_agent(plan, agent)
    return _log_probabilities(_check_local_scores(scores, plan, agent), plan, agent)


def _log_probabilities(scores: np.ndarray, plan: FederatedPlan, agent: int) -> np.ndarray:
    """Algorithm 2 of paper 004 on validated scores (see the public function)."""
    if plan.sends_top(agent):
        log_probabilities = np.full(plan.n_bins, -np.inf)
        log_probabilities[-1] = 0.0
        return log_probabilities
    counts = bin_counts(scores, plan.n_bins)
    return quantile_log_probabilities(counts, plan.local_levels[agent], plan.epsilon)


def agent_message(
    scores, plan, agent: int, *, max_epsilon=None, random_state=None
) -> dict[str, Any]:
    """The single message an agent sends to the server.

    Parameters
    ----------
    scores : array-like of shape (n_j,)
        The agent's calibration scores, in the public range [0, 1]; ``n_j`` must be the
        size announced in the plan.
    plan : FederatedPlan or dict
        The server's feasible plan (:func:`~privconf_sklearn.federated.make_plan`).
    agent : int
        The agent's index in the plan.
    max_epsilon : float or None, default=None
        The agent's own privacy budget: a plan asking for a larger epsilon (or for no
        privacy) is refused. None accepts the plan's epsilon.
    random_state : None, int, RandomState, Generator or NoiseSource, default=None
        Privacy noise of FedCP2-QQ (see :func:`privconf_sklearn._random.check_noise_source`);
        ``None`` (the operating system's cryptographic source) in production.

    Returns
    -------
    dict
        ``{"protocol", "version", "agent", "n_samples", "value", "bin", "read_data"}``:
        ``value`` in [0, 1] is the released score (FedCP-QQ: the ``l``-th smallest
        score; FedCP2-QQ: the edge ``bin / n_bins``); ``read_data`` is False when the
        value is the top of the range chosen without the data.
    """
    plan = _check_plan(plan, max_epsilon)
    agent = _check_agent(plan, agent)
    scores = _check_local_scores(scores, plan, agent)
    message = {
        "protocol": plan.protocol,
        "version": PROTOCOL_VERSION,
        "agent": agent,
        "n_samples": int(scores.shape[0]),
        "bin": None,
        "read_data": not plan.sends_top(agent),
    }
    if plan.sends_top(agent):
        message["value"] = 1.0
        if plan.private:
            message["bin"] = plan.n_bins
        return message
    if not plan.private:
        rank = plan.local_ranks[agent]
        message["value"] = float(np.partition(scores, rank - 1)[rank - 1])
        return message
    noise = check_noise_source(random_state)
    log_probabilities = _log_probabilities(scores, plan, agent)
    edge = noise.categorical_from_log_weights(log_probabilities) + 1
    message["bin"] = int(edge)
    message["value"] = edge / plan.n_bins
    return message
