"""What the server runs after the single round: the quantile of the agents' messages.

Paper 004 Algorithms 1 and 3: the threshold is the ``k``-th smallest message. The
server only post-processes the messages, so the release inherits their privacy.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..privacy import PrivacyGuarantee
from ._base import Calibration, infeasible_calibration
from ._fedcp_plan import PROTOCOL_VERSION, FederatedPlan

__all__ = ["aggregate", "federated_privacy", "plan_privacy"]

#: Name of the mechanism class behind each protocol, recorded in the Calibration.
MECHANISM_NAMES = {"FedCP-QQ": "FedCPQQ", "FedCP2-QQ": "FedCP2QQ"}


def federated_privacy(epsilon: float | None) -> PrivacyGuarantee:
    """Privacy of a FedCP-QQ (``epsilon=None``) or FedCP2-QQ release."""
    if epsilon is None:
        return PrivacyGuarantee.no_privacy(
            "Each agent sends an exact order statistic of its scores: no privacy protection."
        )
    return PrivacyGuarantee(
        notion="local",
        epsilon=float(epsilon),
        adjacency="replace-one",
        description=(
            "Each agent's message is epsilon-local-DP (exponential-mechanism quantile with "
            "sensitivity-scaled utility, paper 004 Algorithm 2); agents hold disjoint data, "
            "so every individual's record is protected at epsilon (parallel composition) "
            "and the server's threshold is post-processing."
        ),
    )


def plan_privacy(plan: FederatedPlan) -> PrivacyGuarantee:
    """The privacy guarantee of a release made under ``plan``."""
    return federated_privacy(plan.epsilon if plan.private else None)


def _plan_details(plan: FederatedPlan) -> dict[str, Any]:
    details = {
        "protocol": plan.protocol,
        "n_agents": plan.n_agents,
        "agent_sizes": list(plan.agent_sizes),
        "table_ranks": list(plan.table_ranks),
        "local_ranks": list(plan.local_ranks),
        "server_rank": plan.server_rank,
        "table_level": plan.table_level,
        "table_coverage": plan.table_coverage,
    }
    if plan.private:
        details.update(
            epsilon=plan.epsilon,
            n_bins=plan.n_bins,
            gamma=plan.gamma,
            rank_correction=plan.rank_correction,
            local_levels=None if plan.local_levels is None else list(plan.local_levels),
        )
    return details


def _check_messages(plan: FederatedPlan, messages) -> np.ndarray:
    messages = list(messages)
    if len(messages) != plan.n_agents:
        raise ValueError(f"Expected {plan.n_agents} messages, one per agent; got {len(messages)}.")
    values = np.empty(plan.n_agents)
    seen = np.zeros(plan.n_agents, dtype=bool)
    for message in messages:
        if not isinstance(message, dict):
            raise ValueError(f"Messages must be dicts; got {type(message).__name__}.")
        if message.get("protocol") != plan.protocol or message.get("version") != PROTOCOL_VERSION:
            raise ValueError(
                f"Message {message!r} is not a {plan.protocol} v{PROTOCOL_VERSION} message."
            )
        agent = message.get("agent")
        if not isinstance(agent, numbers.Integral) or not 0 <= agent < plan.n_agents:
            raise ValueError(f"Message has an invalid agent index {agent!r}.")
        if seen[agent]:
            raise ValueError(f"Agent {agent} sent more than one message.")
        seen[agent] = True
        if message.get("n_samples") != plan.agent_sizes[agent]:
            raise ValueError(
                f"Agent {agent} reports {message.get('n_samples')!r} scores; the plan has "
                f"{plan.agent_sizes[agent]}."
            )
        value = message.get("value")
        if not isinstance(value, numbers.Real) or not 0.0 <= value <= 1.0:
            raise ValueError(f"Agent {agent} sent value {value!r}, not a number in [0, 1].")
        if plan.private:
            edge = message.get("bin")
            valid_edge = (
                isinstance(edge, numbers.Integral)
                and 1 <= edge <= plan.n_bins
                and value == edge / plan.n_bins
            )
            if not valid_edge:
                raise ValueError(
                    f"Agent {agent} sent bin {edge!r} and value {value!r}: a FedCP2-QQ "
                    f"message is an edge b / {plan.n_bins} with b in 1..{plan.n_bins}."
                )
        if plan.sends_top(agent) and value != 1.0:
            raise ValueError(f"Agent {agent} must send the top of the range (1.0) under this plan.")
        values[agent] = float(value)
    return values


def aggregate(plan, messages) -> Calibration:
    """The server's release: the ``k``-th smallest message, with its guarantees.

    Parameters
    ----------
    plan : FederatedPlan or dict
        The plan the agents followed.
    messages : iterable of dict
        One message per agent (:func:`~privconf_sklearn.federated.agent_message`), in
        any order. Must be empty for an infeasible plan.

    Returns
    -------
    Calibration
        Threshold in [0, 1], coverage bounds and privacy of the release. For an
        infeasible plan: threshold 1, ``feasible=False`` and the plan's reason.

    Raises
    ------
    ValueError
        If the messages do not match the plan (count, agents, sizes, values, protocol).
    """
    if isinstance(plan, dict):
        plan = FederatedPlan.from_dict(plan)
    if not isinstance(plan, FederatedPlan):
        raise TypeError(f"plan must be a FederatedPlan or its dict; got {type(plan).__name__}.")
    name = MECHANISM_NAMES[plan.protocol]
    n_samples = int(sum(plan.agent_sizes))
    if not plan.feasible:
        if list(messages):
            raise ValueError("The plan is infeasible: agents must not send messages.")
        return infeasible_calibration(
            name, n_samples, plan.alpha, plan.reason, **_plan_details(plan)
        )
    values = _check_messages(plan, messages)
    k = plan.server_rank
    threshold = float(np.partition(values, k - 1)[k - 1])
    # With S = F^{-1}(U) and every score likewise, the threshold is F^{-1} of the uniform
    # quantile of quantiles V, and {S <= threshold} adds to {U <= V} at most the event
    # that U falls in the flat piece of F^{-1} containing V: probability <= p_max.
    upper = plan.coverage_upper_bound
    return Calibration(
        mechanism=name,
        threshold=threshold,
        n_samples=n_samples,
        alpha=plan.alpha,
        privacy=plan_privacy(plan),
        coverage_lower_bound=plan.coverage_lower_bound,
        coverage_upper_bound=upper,
        upper_bound_atom_slope=0.0 if upper is None else 1.0,
        target_level=plan.table_level,
        details={**_plan_details(plan), "messages": values.tolist()},
    )
