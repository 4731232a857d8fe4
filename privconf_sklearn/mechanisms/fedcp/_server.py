"""What the server computes after the single round: the quantile of the agents' releases.

Humbert, Le Bars, Bellet and Arlot (ICML 2023), Algorithms 1 and 3: the threshold is the
``k``-th smallest release, post-processing that inherits the releases' privacy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...privacy import PrivacyGuarantee
from .._base import Calibration, infeasible_calibration
from ._plan import FedCP2QQPlan, FederatedPlan

#: Name of the mechanism class behind each protocol, recorded in the Calibration.
MECHANISM_NAMES = {"FedCP-QQ": "FedCPQQ", "FedCP2-QQ": "FedCP2QQ"}


def federated_privacy(epsilon: float | None) -> PrivacyGuarantee:
    """Privacy of the server's view of a FedCP-QQ (``epsilon=None``) or FedCP2-QQ round.

    Epsilon under add/remove (a record is at one agent: one message changes), 2 epsilon
    under replace-one (a replaced record may move to another agent: two messages change);
    the proof is in the user guide's FedCP2-QQ page.
    """
    if epsilon is None:
        return PrivacyGuarantee.no_privacy(
            "Each agent sends an exact order statistic of its scores: no privacy protection."
        )
    return PrivacyGuarantee(
        notion="local",
        epsilon=float(epsilon),
        adjacency="add/remove",
        description=(
            "Each agent's message is epsilon-local-DP in that agent's scores (an "
            "exponential-mechanism quantile, Humbert et al. 2023 Algorithm 2, with the plan "
            "fixed from public sizes). The server's view of all messages is epsilon-DP "
            "under add/remove adjacency (a record is at one agent), and 2 epsilon under "
            "replace-one (a replaced record may move to another agent and change two "
            "messages); the threshold is post-processing."
        ),
    )


def plan_privacy(plan: FederatedPlan) -> PrivacyGuarantee:
    """The privacy guarantee of a release made under ``plan``."""
    return federated_privacy(plan.epsilon if isinstance(plan, FedCP2QQPlan) else None)


def plan_details(plan: FederatedPlan) -> dict[str, Any]:
    """The plan's public quantities recorded in ``Calibration.details`` (tuples as lists)."""
    details: dict[str, Any] = {"protocol": plan.protocol, "n_agents": plan.n_agents}
    own: tuple[str, ...] = ("local_ranks",)
    if isinstance(plan, FedCP2QQPlan):
        own = ("epsilon", "scaling", "n_bins", "gamma", "table_level", "table_ranks")
        own += ("table_coverage", "rank_corrections", "local_levels", "releases")
    for name in ("agent_sizes", "sample_sizes", "server_rank", *own):
        value = getattr(plan, name)
        details[name] = list(value) if isinstance(value, tuple) else value
    return details


def _top_reason(plan: FederatedPlan, values: np.ndarray) -> str:
    """Why a feasible round released the top of the range."""
    at_top = int(np.sum(values >= 1.0))
    m, k = plan.n_agents, plan.server_rank
    forced = sum(plan.sends_top(agent) for agent in range(m))
    if at_top == m:
        who = "every agent's message is the top of the range 1.0"
    else:
        who = f"{at_top} of the {m} agents' messages are the top of the range 1.0"
    if forced:
        who += f" ({forced} sent it without reading data)"
    if isinstance(plan, FedCP2QQPlan):
        cause = (
            "the agents' private quantiles landed on the top edge: more scores per agent, a "
            "larger epsilon or fewer agents make this less likely"
        )
    else:
        cause = "the agents' order statistics are at the top of the public score range"
    return f"{who}, so the server's {k}-th smallest message is 1.0: {cause}."


def release_calibration(plan: FederatedPlan, values) -> Calibration:
    """The server's release: the ``k``-th smallest of the agents' values.

    Parameters
    ----------
    plan : FedCPQQPlan or FedCP2QQPlan
        The plan the agents followed (infeasible: ``values`` must be empty).
    values : sequence of float
        Each agent's released value, in agent order.

    Returns
    -------
    Calibration
        Threshold in [0, 1], coverage bounds and privacy of the release. Infeasible plan:
        threshold 1, ``feasible=False`` and the plan's reason. A feasible plan whose
        ``k``-th smallest value is the top of the range: a reason saying why.
    """
    name = MECHANISM_NAMES[plan.protocol]
    n_samples = int(sum(plan.agent_sizes))
    if not plan.feasible:
        return infeasible_calibration(
            name, n_samples, plan.alpha, plan.reason, **plan_details(plan)
        )
    values = np.asarray(values, dtype=np.float64)
    k = plan.server_rank
    threshold = float(np.partition(values, k - 1)[k - 1])
    # With S = F^{-1}(U) and every score likewise, the threshold is F^{-1} of the uniform
    # quantile of quantiles V, and {S <= threshold} adds to {U <= V} at most the event
    # that U falls in the flat piece of F^{-1} containing V: probability <= p_max.
    if isinstance(plan, FedCP2QQPlan):
        upper, slope, target = None, 0.0, plan.table_level
    else:
        upper, slope, target = plan.coverage_upper_bound, 1.0, 1.0 - plan.alpha
    return Calibration(
        mechanism=name,
        threshold=threshold,
        n_samples=n_samples,
        alpha=plan.alpha,
        privacy=plan_privacy(plan),
        coverage_lower_bound=plan.coverage_lower_bound,
        coverage_upper_bound=upper,
        upper_bound_atom_slope=slope,
        target_level=target,
        reason="" if threshold < 1.0 else _top_reason(plan, values),
        details={**plan_details(plan), "messages": values.tolist()},
    )
