"""The three steps of the one-round protocol, with JSON-ready inputs and outputs.

1. The server makes the plan (:func:`~privconf_sklearn.mechanisms.fedcp.make_plan`)
   and sends :func:`~._wire.plan_to_dict` to every agent.
2. Each agent calls :func:`agent_message`: cheap checks first (its budget, the plan's
   format and digest, its own size and entries, its scores), then one release of its
   scores. It does not re-derive the plan: its privacy depends only on the epsilon it
   checks, and the server re-derives the plan anyway.
3. The server calls :func:`aggregate`: it re-derives the plan from the public inputs,
   refuses any plan or message that does not match it, and keeps the ``k``-th smallest
   message.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from .._random import check_noise_source
from .._validation import check_unit_scores
from ..mechanisms import Calibration
from ..mechanisms.fedcp import (
    FedCP2QQPlan,
    FedCPQQPlan,
    FederatedPlan,
    agent_log_probabilities,
    agent_release,
    release_calibration,
)
from ._wire import (
    PROTOCOL_VERSION,
    message_fields,
    plan_digest,
    plan_from_dict,
    plan_to_dict,
    shown,
    verified_plan,
)

__all__ = ["agent_message", "agent_message_log_probabilities", "aggregate"]


def _check_budget(max_epsilon) -> float | None:
    if max_epsilon is None:
        return None
    if isinstance(max_epsilon, bool) or not isinstance(
        max_epsilon, int | float | np.integer | np.floating
    ):
        raise TypeError(
            f"max_epsilon must be None or a positive number; got {type(max_epsilon).__name__}."
        )
    if not 0 < max_epsilon <= sys.float_info.max:  # NaN, infinity and huge integers fail
        raise ValueError(f"max_epsilon must be a finite number > 0; got {shown(max_epsilon)}.")
    return float(max_epsilon)


def _received_plan(plan) -> FederatedPlan:
    """An agent's view of the plan: strictly parsed, digest checked, not re-derived.

    A plan object gets the same checks as its dict form (it may have been edited).
    """
    if isinstance(plan, FedCPQQPlan | FedCP2QQPlan):
        plan = plan_to_dict(plan)
    if not isinstance(plan, dict):
        raise TypeError(
            f"plan must be a FedCPQQPlan, a FedCP2QQPlan or a dict; got {type(plan).__name__}."
        )
    return plan_from_dict(plan)


def _check_agent(plan: FederatedPlan, agent) -> int:
    if isinstance(agent, bool) or not isinstance(agent, int | np.integer):
        raise TypeError(f"agent must be an integer index; got {shown(agent)}.")
    if not 0 <= agent < plan.n_agents:
        raise ValueError(f"agent must be in 0..{plan.n_agents - 1}; got {agent}.")
    return int(agent)


def _check_within_budget(plan: FederatedPlan, max_epsilon: float | None) -> None:
    if max_epsilon is None:
        return
    if not isinstance(plan, FedCP2QQPlan):
        raise ValueError(
            f"The plan asks for no privacy; this agent allows at most epsilon = {max_epsilon:g}."
        )
    if plan.epsilon > max_epsilon:
        raise ValueError(
            f"The plan asks for epsilon = {plan.epsilon:g}; this agent allows at most "
            f"{max_epsilon:g}."
        )


def _check_scores(scores, plan: FederatedPlan, agent: int) -> np.ndarray:
    expected = plan.agent_sizes[agent]
    shape = np.shape(scores)
    if len(shape) == 1 and shape[0] != expected:
        raise ValueError(
            f"Agent {agent} holds {shape[0]} scores but the plan was made for {expected}: the "
            "sizes announced to the server must be the real ones."
        )
    return check_unit_scores(scores)


def _ready(plan, agent, max_epsilon) -> tuple[FederatedPlan, int]:
    budget = _check_budget(max_epsilon)
    plan = _received_plan(plan)
    _check_within_budget(plan, budget)
    if not plan.feasible:
        raise ValueError(
            f"The plan is infeasible ({plan.reason}); agents send no message and the "
            "server releases the top of the range."
        )
    return plan, _check_agent(plan, agent)


def agent_message(
    scores, plan, agent: int, *, max_epsilon=None, random_state=None
) -> dict[str, Any]:
    """The single message an agent sends to the server.

    Cheap checks come first (budget, plan format and digest, the agent's own size), so
    a malformed or greedy plan is refused before any work on the data.

    Parameters
    ----------
    scores : array-like of shape (n_j,)
        The agent's calibration scores, in the public range [0, 1]; ``n_j`` must be the
        size announced in the plan.
    plan : dict, FedCPQQPlan or FedCP2QQPlan
        The server's feasible plan (:func:`~privconf_sklearn.federated.plan_to_dict`
        form as received, or the plan object).
    agent : int
        The agent's index in the plan.
    max_epsilon : float or None, default=None
        The agent's own privacy budget: a plan asking for a larger epsilon (or for no
        privacy) is refused. None accepts the plan's epsilon.
    random_state : None, int, RandomState, Generator or NoiseSource, default=None
        Randomness of the release (FedCP2-QQ's exponential mechanism, and the random
        subset of agents the plan subsamples); ``None`` (the operating system's
        cryptographic source) in production.

    Returns
    -------
    dict
        ``{"protocol", "version", "plan_digest", "agent", "n_samples", "value",
        "read_data"}`` and, for FedCP2-QQ, ``"bin"``: ``value`` in [0, 1] is the
        released score (FedCP-QQ: an order statistic; FedCP2-QQ: the edge
        ``bin / n_bins``); ``read_data`` is False when the value is the top of the range
        chosen without the data.

    Raises
    ------
    TypeError, ValueError
        For a malformed plan, a plan beyond the agent's budget, an infeasible plan, a
        wrong agent index or scores that are not the announced number in [0, 1].
    """
    plan, agent = _ready(plan, agent, max_epsilon)
    scores = _check_scores(scores, plan, agent)
    release = agent_release(scores, plan, agent, check_noise_source(random_state))
    message: dict[str, Any] = {
        "protocol": plan.protocol,
        "version": PROTOCOL_VERSION,
        "plan_digest": plan_digest(plan),
        "agent": agent,
        "n_samples": int(scores.shape[0]),
        "value": release.value,
        "read_data": release.read_data,
    }
    if isinstance(plan, FedCP2QQPlan):
        message["bin"] = release.bin
    return message


def agent_message_log_probabilities(scores, plan, agent: int) -> np.ndarray:
    """Exact output distribution of a FedCP2-QQ agent's message.

    Parameters
    ----------
    scores : array-like of shape (n_j,)
        The agent's calibration scores in [0, 1].
    plan : dict or FedCP2QQPlan
        A feasible FedCP2-QQ plan in which the agent uses all its scores.
    agent : int
        The agent's index in the plan.

    Returns
    -------
    ndarray of shape (n_bins,)
        ``log P(message value = b / n_bins)``, ``b = 1..n_bins``; the point mass on 1.0
        for an agent that sends the top of the range.
    """
    plan, agent = _ready(plan, agent, None)
    if not isinstance(plan, FedCP2QQPlan):
        raise ValueError("Only FedCP2-QQ messages are random; this plan is FedCP-QQ.")
    if plan.sample_sizes[agent] != plan.agent_sizes[agent]:
        raise ValueError(
            f"Agent {agent} uses a random subset of its scores under this plan: its message "
            "is a mixture over subsets."
        )
    return agent_log_probabilities(_check_scores(scores, plan, agent), plan, agent)


# ------------------------------------------------------------------- server
def _is_int(value) -> bool:
    """An exact JSON integer: ``int`` and not ``bool`` (``2.0`` is not an integer)."""
    return type(value) is int


def _check_header(message, plan: FederatedPlan, digest: str, position: int) -> None:
    """The dict, its exact keys, protocol, version (an exact int) and plan digest."""
    if not isinstance(message, dict):
        raise TypeError(f"Message {position} must be a dict; got {type(message).__name__}.")
    expected, keys = set(message_fields(plan)), set(message)
    if keys != expected:
        raise ValueError(
            f"Message {position} does not have the {plan.protocol} fields: missing "
            f"{sorted(expected - keys)}, unknown {sorted(map(str, keys - expected))}."
        )
    version = message["version"]
    if message["protocol"] != plan.protocol or not _is_int(version) or version != PROTOCOL_VERSION:
        raise ValueError(
            f"Message {position} is not a {plan.protocol} v{PROTOCOL_VERSION} message "
            f"(protocol {message['protocol']!r}, version {version!r}: an integer is required)."
        )
    if message["plan_digest"] != digest:
        raise ValueError(
            f"Message {position} was made for another plan (digest "
            f"{str(message['plan_digest'])[:16]}..., this round's plan {digest[:16]}...): "
            "refusing it."
        )


def _check_release(message: dict, plan: FederatedPlan, agent: int) -> float:
    """The value in [0, 1], ``read_data`` as the plan says, and a FedCP2-QQ edge."""
    value = message["value"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValueError(f"Agent {agent} sent value {shown(value)}, not a number in [0, 1].")
    top = plan.sends_top(agent)
    if not isinstance(message["read_data"], bool) or message["read_data"] == top:
        raise ValueError(
            f"Agent {agent} sent read_data={message['read_data']!r}; under this plan it "
            f"{'sends the top without reading' if top else 'reads'} its data."
        )
    if isinstance(plan, FedCP2QQPlan):
        edge = message["bin"]
        if not (_is_int(edge) and 1 <= edge <= plan.n_bins and value == edge / plan.n_bins):
            raise ValueError(
                f"Agent {agent} sent bin {shown(edge)} and value {shown(value)}: a FedCP2-QQ "
                f"message is an edge b / {plan.n_bins} with b in 1..{plan.n_bins}."
            )
    if top and value != 1.0:
        raise ValueError(f"Agent {agent} must send the top of the range (1.0) under this plan.")
    return float(value)


def _check_message(message, plan: FederatedPlan, digest: str, position: int) -> tuple[int, float]:
    """Strictly validate one message; returns ``(agent, value)``."""
    _check_header(message, plan, digest, position)
    agent = message["agent"]
    if not (_is_int(agent) and 0 <= agent < plan.n_agents):
        raise ValueError(f"Message {position} has an invalid agent index {shown(agent)}.")
    n_samples = message["n_samples"]
    if not (_is_int(n_samples) and n_samples == plan.agent_sizes[agent]):
        raise ValueError(
            f"Agent {agent} reports {shown(n_samples)} scores; the plan has "
            f"{plan.agent_sizes[agent]}."
        )
    return agent, _check_release(message, plan, agent)


def aggregate(plan, messages) -> Calibration:
    """The server's release: the ``k``-th smallest message, with its guarantees.

    The plan is re-derived from its public inputs and must match exactly; every message
    must carry this protocol's version and the plan's digest, and is type-checked field
    by field.

    Parameters
    ----------
    plan : dict, FedCPQQPlan or FedCP2QQPlan
        The plan the agents followed.
    messages : list or tuple of dict
        One message per agent (:func:`agent_message`), in any order. Must be empty for
        an infeasible plan.

    Returns
    -------
    Calibration
        Threshold in [0, 1], coverage bounds and privacy of the release. For an
        infeasible plan: threshold 1, ``feasible=False`` and the plan's reason.

    Raises
    ------
    TypeError, ValueError
        If the plan does not follow from its public inputs, or the messages do not match
        it (count, agents, digests, sizes, values, types, fields).
    """
    plan = verified_plan(plan)
    if not isinstance(messages, list | tuple):
        raise TypeError(
            f"messages must be a list or tuple of dicts; got {type(messages).__name__}."
        )
    if not plan.feasible:
        if messages:
            raise ValueError("The plan is infeasible: agents must not send messages.")
        return release_calibration(plan, [])
    if len(messages) != plan.n_agents:
        raise ValueError(f"Expected {plan.n_agents} messages, one per agent; got {len(messages)}.")
    digest = plan_digest(plan)
    values = np.empty(plan.n_agents)
    seen = np.zeros(plan.n_agents, dtype=bool)
    for position, message in enumerate(messages):
        agent, value = _check_message(message, plan, digest, position)
        if seen[agent]:
            raise ValueError(f"Agent {agent} sent more than one message.")
        seen[agent] = True
        values[agent] = value
    return release_calibration(plan, values)
