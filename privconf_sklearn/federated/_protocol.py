"""The three steps of the one-round protocol, with JSON-ready inputs and outputs.

1. The server makes the plan (:func:`~privconf_sklearn.mechanisms.fedcp.make_plan`)
   and sends :func:`~._wire.plan_to_dict` (one round: a fresh round id) to every agent.
2. Each agent calls :func:`agent_message` with its own :class:`~._ledger.AgentLedger`:
   cheap checks first (the plan's format, digest and round id, its protocol, its own
   size), then the reservation of the message's epsilon on the agent's ledger (which
   refuses a round or a plan already answered, and a message beyond the budget), and
   only then one release of its scores. It does not re-derive a private plan: its
   privacy depends only on the epsilon it reserves.
3. The server calls :func:`aggregate`: it re-derives the plan from the public inputs,
   refuses any plan or message that does not match it (another plan, another round,
   a duplicate), and keeps the ``k``-th smallest message.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._random import check_noise_source
from .._validation import check_unit_scores
from ..mechanisms import Calibration
from ..mechanisms.fedcp import (
    FedCP2QQPlan,
    FederatedPlan,
    agent_log_probabilities,
    agent_release,
    release_calibration,
)
from ._ledger import AgentLedger
from ._wire import (
    PROTOCOL_VERSION,
    message_fields,
    plan_digest,
    plan_from_dict,
    plan_to_dict,
    received_plan,
    shown,
    verified_plan,
)

__all__ = ["agent_message", "agent_message_log_probabilities", "aggregate"]


def _round_plan(plan, caller: str) -> tuple[FederatedPlan, str]:
    """The plan and round id of the dict the server sent (a plan object has no round)."""
    if not isinstance(plan, dict):
        raise TypeError(
            f"{caller} needs the plan dict of one round (plan_to_dict's output, as received: "
            f"it carries the round id); got {type(plan).__name__}."
        )
    return received_plan(plan)


def _check_agent(plan: FederatedPlan, agent) -> int:
    if isinstance(agent, bool) or not isinstance(agent, int | np.integer):
        raise TypeError(f"agent must be an integer index; got {shown(agent)}.")
    if not 0 <= agent < plan.n_agents:
        raise ValueError(f"agent must be in 0..{plan.n_agents - 1}; got {agent}.")
    return int(agent)


def _allowed_plan(plan: FederatedPlan, allow_non_private) -> FederatedPlan:
    """A private plan as received; a non-private one only if allowed, and re-derived.

    An agent that allows FedCP-QQ re-derives its plan, so that the exact order statistic
    it sends is the one the protocol asks for (not, say, its smallest score).
    """
    if not isinstance(allow_non_private, bool):
        raise TypeError(f"allow_non_private must be True or False; got {shown(allow_non_private)}.")
    if isinstance(plan, FedCP2QQPlan):
        return plan
    if not allow_non_private:
        raise ValueError(
            "The plan is FedCP-QQ, which sends an exact score of this agent (no privacy): "
            "refused. Pass allow_non_private=True to agent_message to allow it."
        )
    return verified_plan(plan)


def _check_size(scores, plan: FederatedPlan, agent: int) -> None:
    """The number of scores (public) against the plan, without reading any score."""
    expected = plan.agent_sizes[agent]
    shape = np.shape(scores)
    if len(shape) == 1 and shape[0] != expected:
        raise ValueError(
            f"Agent {agent} holds {shape[0]} scores but the plan was made for {expected}: the "
            "sizes announced to the server must be the real ones."
        )


def _message_epsilon(plan: FederatedPlan, agent: int) -> float | None:
    """What the message costs the agent's rows.

    0 for the top sent without reading them, the plan's epsilon for FedCP2-QQ, None (no
    privacy) for an exact FedCP-QQ score.
    """
    if plan.sends_top(agent):
        return 0.0
    return plan.epsilon if isinstance(plan, FedCP2QQPlan) else None


def _ready(plan, agent, allow_non_private, caller: str) -> tuple[FederatedPlan, str, int]:
    plan, round_id = _round_plan(plan, caller)
    agent = _check_agent(plan, agent)
    plan = _allowed_plan(plan, allow_non_private)
    if not plan.feasible:
        raise ValueError(
            f"The plan is infeasible ({plan.reason}); agents send no message and the "
            "server releases the top of the range."
        )
    return plan, round_id, agent


def agent_message(
    scores, plan, agent: int, *, ledger, allow_non_private=False, random_state=None
) -> dict[str, Any]:
    """The single message an agent sends to the server in one round.

    The agent refuses by default: a non-private (FedCP-QQ) plan, a round or plan its
    ledger has already answered, a message beyond its budget, a malformed plan. The
    message's epsilon is reserved on ``ledger`` (and written to its file) before any
    score is read; a message refused after that (scores outside [0, 1]) still counts.

    Parameters
    ----------
    scores : array-like of shape (n_j,)
        The agent's calibration scores, in the public range [0, 1]; ``n_j`` must be the
        size announced in the plan.
    plan : dict
        The plan of this round as the server sent it
        (:func:`~privconf_sklearn.federated.plan_to_dict`, e.g. after ``json.loads``).
    agent : int
        The agent's index in the plan.
    ledger : AgentLedger
        The agent's own privacy ledger, kept across rounds (in memory or in a file).
    allow_non_private : bool, default=False
        Whether this agent may send an exact score (a FedCP-QQ plan). The message is
        then recorded as non-private (``epsilon = None``: no budget is left afterwards)
        and the plan is re-derived from its public inputs first.
    random_state : None, int, RandomState, Generator or NoiseSource, default=None
        Randomness of the release (FedCP2-QQ's exponential mechanism, and the random
        subset of agents the plan subsamples); ``None`` (the operating system's
        cryptographic source) in production.

    Returns
    -------
    dict
        ``{"protocol", "version", "round", "plan_digest", "agent", "n_samples", "value",
        "read_data"}`` and, for FedCP2-QQ, ``"bin"``: ``round`` and ``plan_digest`` bind
        the message to this round and plan; ``value`` in [0, 1] is the released score
        (FedCP-QQ: an order statistic; FedCP2-QQ: the edge ``bin / n_bins``);
        ``read_data`` is False when the value is the top of the range chosen without
        the data.

    Raises
    ------
    TypeError, ValueError
        For a malformed plan, a non-private plan not allowed, a round or plan already
        answered, a message beyond the budget, an infeasible plan, a wrong agent index
        or scores that are not the announced number in [0, 1].
    """
    if not isinstance(ledger, AgentLedger):
        raise TypeError(f"ledger must be an AgentLedger; got {type(ledger).__name__}.")
    plan, round_id, agent = _ready(plan, agent, allow_non_private, "agent_message")
    _check_size(scores, plan, agent)
    noise = check_noise_source(random_state)
    ledger._reserve(
        round_id=round_id,
        plan_digest=plan_digest(plan),
        protocol=plan.protocol,
        agent=agent,
        epsilon=_message_epsilon(plan, agent),
    )
    release = agent_release(check_unit_scores(scores), plan, agent, noise)
    message: dict[str, Any] = {
        "protocol": plan.protocol,
        "version": PROTOCOL_VERSION,
        "round": round_id,
        "plan_digest": plan_digest(plan),
        "agent": agent,
        "n_samples": plan.agent_sizes[agent],
        "value": release.value,
        "read_data": release.read_data,
    }
    if isinstance(plan, FedCP2QQPlan):
        message["bin"] = release.bin
    return message


def agent_message_log_probabilities(scores, plan, agent: int) -> np.ndarray:
    """Exact output distribution of a FedCP2-QQ agent's message (an audit: sends nothing).

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
    plan = plan_from_dict(plan if isinstance(plan, dict) else plan_to_dict(plan))
    if not isinstance(plan, FedCP2QQPlan):
        raise ValueError(
            f"Only FedCP2-QQ messages are random; this plan is {plan.protocol}, whose "
            "messages are exact order statistics."
        )
    agent = _check_agent(plan, agent)
    if not plan.feasible:
        raise ValueError(f"The plan is infeasible ({plan.reason}); agents send no message.")
    if plan.sample_sizes[agent] != plan.agent_sizes[agent]:
        raise ValueError(
            f"Agent {agent} uses a random subset of its scores under this plan: its message "
            "is a mixture over subsets."
        )
    _check_size(scores, plan, agent)
    return agent_log_probabilities(check_unit_scores(scores), plan, agent)


# ------------------------------------------------------------------- server
def _is_int(value) -> bool:
    """An exact JSON integer: ``int`` and not ``bool`` (``2.0`` is not an integer)."""
    return type(value) is int


def _check_header(message, plan: FederatedPlan, round_id: str, digest: str, position: int) -> None:
    """The dict, its exact keys, protocol, version (an exact int), round and plan digest."""
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
    if message["round"] != round_id:
        raise ValueError(
            f"Message {position} was made for another round (round "
            f"{str(message['round'])[:40]!r}, this round {round_id}): a replayed or stale "
            "message, refused."
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


def _check_message(
    message, plan: FederatedPlan, round_id: str, digest: str, position: int
) -> tuple[int, float]:
    """Strictly validate one message; returns ``(agent, value)``."""
    _check_header(message, plan, round_id, digest, position)
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
    must carry this protocol's version, this round's id and the plan's digest (a message
    replayed from another round, or made for another plan, is refused), comes from a
    different agent (no duplicates), and is type-checked field by field.

    Parameters
    ----------
    plan : dict
        The plan dict of this round, as sent to the agents
        (:func:`~privconf_sklearn.federated.plan_to_dict`: it carries the round id).
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
    plan, round_id = _round_plan(plan, "aggregate")
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
        agent, value = _check_message(message, plan, round_id, digest, position)
        if seen[agent]:
            raise ValueError(f"Agent {agent} sent more than one message (a duplicate): refused.")
        seen[agent] = True
        values[agent] = value
    return release_calibration(plan, values)
