"""Federated calibration with the quantile of quantiles: FedCP-QQ and FedCP2-QQ.

Paper 004 (Humbert, Le Bars, Bellet, Arlot, "One-Shot Federated Conformal Prediction",
ICML 2023). Calibration scores live with ``m`` agents (the ``groups`` passed to
``fit_calibrate``); each agent sends one message computed from its own scores and the
server keeps the ``k``-th smallest message. These mechanisms run exactly the functions
of :mod:`privconf_sklearn.federated` that real agents and servers run
(:func:`~privconf_sklearn.federated.make_plan`,
:func:`~privconf_sklearn.federated.agent_message`,
:func:`~privconf_sklearn.federated.aggregate`), with all agents in one process.

Agent sizes are public (as ``n`` is for every mechanism, DESIGN.md correction 6); the
coverage certificate, which is computed before any data is read, therefore needs them:
pass ``agent_sizes=`` to :meth:`FedCPQQ.coverage_certificate`, or set ``n_agents`` on
the mechanism to certify ``n_samples`` scores spread evenly over ``n_agents`` agents.
"""

from __future__ import annotations

import numbers
from abc import abstractmethod

import numpy as np

from .._random import NoiseSource
from .._validation import check_alpha
from ..privacy import PrivacyGuarantee
from ._base import Calibration, CoverageCertificate, QuantileMechanism
from ._fedcp_agent import agent_message
from ._fedcp_plan import FederatedPlan, check_private_parameters, even_sizes, make_plan
from ._fedcp_server import aggregate, federated_privacy

__all__ = ["FedCP2QQ", "FedCPQQ"]


def split_by_agent(scores: np.ndarray, groups: np.ndarray) -> list[np.ndarray]:
    """The scores of each agent, agents ordered by their sorted group labels.

    Raises
    ------
    ValueError
        If ``groups`` holds fewer than two distinct agents or labels that cannot be
        sorted.
    """
    try:
        labels, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    except TypeError as exc:
        raise ValueError(
            "groups must hold sortable agent ids of one type (e.g. all int or all str)."
        ) from exc
    if labels.shape[0] < 2:
        raise ValueError(
            "Federated calibration needs at least two agents; groups has a single "
            f"distinct value {labels.tolist()!r}."
        )
    order = np.argsort(inverse, kind="stable")
    return np.split(scores[order], np.cumsum(counts)[:-1])


class _FederatedMechanism(QuantileMechanism):
    """Shared logic: groups -> agents -> plan -> messages -> aggregate."""

    requires_groups = True

    def _check_n_agents(self) -> None:
        if self.n_agents is not None and (
            not isinstance(self.n_agents, numbers.Integral)
            or isinstance(self.n_agents, bool)
            or self.n_agents < 2
        ):
            raise ValueError(f"n_agents must be None or an integer >= 2; got {self.n_agents!r}.")

    def _check_params(self) -> None:
        self._check_n_agents()

    @abstractmethod
    def plan(self, agent_sizes, alpha: float) -> FederatedPlan:
        """The server's plan for these public agent sizes (no data read)."""

    def _planned_sizes(self, n_samples: int, agent_sizes) -> tuple[int, ...]:
        if agent_sizes is not None:
            return tuple(agent_sizes)
        if self.n_agents is None:
            raise ValueError(
                f"{type(self).__name__}.coverage_certificate needs the agents' sizes: pass "
                "agent_sizes=[n_1, ..., n_m] or set n_agents on the mechanism (n_samples "
                "is then spread evenly over n_agents agents)."
            )
        if n_samples < self.n_agents:
            raise ValueError(
                f"n_samples = {n_samples} cannot be spread over n_agents = {self.n_agents} "
                "agents with at least one score each."
            )
        return even_sizes(n_samples, self.n_agents)

    def coverage_certificate(
        self, n_samples: int, alpha: float, *, agent_sizes=None
    ) -> CoverageCertificate:
        """Coverage certified before any data is read, for public agent sizes.

        Parameters
        ----------
        n_samples : int
            Total number of calibration scores.
        alpha : float
            Miscoverage level.
        agent_sizes : sequence of int, default=None
            Size of each agent's calibration set (must sum to ``n_samples``). If None,
            ``n_samples`` is spread as evenly as possible over ``n_agents`` agents.

        Returns
        -------
        CoverageCertificate
            The plan's ``coverage_lower_bound`` and feasibility: what
            :meth:`calibrate` reports for groups of these sizes.
        """
        self._check_params()
        sizes = self._planned_sizes(int(n_samples), agent_sizes)
        if sum(sizes) != n_samples:
            raise ValueError(f"agent_sizes sum to {sum(sizes)}, not n_samples = {n_samples}.")
        plan = self.plan(sizes, check_alpha(alpha))
        if not plan.feasible:
            return CoverageCertificate(1.0, feasible=False, reason=plan.reason)
        return CoverageCertificate(plan.coverage_lower_bound)

    def _calibrate(
        self, scores: np.ndarray, alpha: float, groups, noise: NoiseSource
    ) -> Calibration:
        parts = split_by_agent(scores, groups)
        if self.n_agents is not None and len(parts) != self.n_agents:
            raise ValueError(f"groups define {len(parts)} agents but n_agents = {self.n_agents}.")
        plan = self.plan([part.shape[0] for part in parts], alpha)
        if not plan.feasible:
            return aggregate(plan, [])
        messages = [
            agent_message(part, plan, agent, random_state=noise) for agent, part in enumerate(parts)
        ]
        return aggregate(plan, messages)


class FedCPQQ(_FederatedMechanism):
    """One-shot federated conformal calibration with the quantile of quantiles.

    Paper 004 Algorithm 1 (FedCP-QQ): each agent sends the ``l``-th smallest of its
    scores, the server returns the ``k``-th smallest message. For equal local sizes
    ``(l, k) = argmin {M(l, k) : M(l, k) >= 1 - alpha}`` (Eq. (6)), with the coverage
    table ``M`` of Theorem 3.2 computed exactly; for unequal sizes
    ``l_j = ceil((1 - alpha)(n_j + 1))`` and the smallest ``k`` whose coverage
    (Poisson-binomial form) reaches ``1 - alpha`` (Appendix A.1).

    Guarantee: marginal coverage at least ``M(l, k) >= 1 - alpha`` for i.i.d. scores
    (Theorem 3.2), exactly ``M(l, k)`` for continuous scores (so at most
    ``M(l, k) + p_max`` with atoms of mass at most ``p_max``). No privacy: agents
    send exact order statistics.

    Use it with ``fit_calibrate(X, y, groups=agent_ids)``.

    Parameters
    ----------
    n_agents : int or None, default=None
        Number of agents, used only to certify coverage before data is seen
        (:meth:`coverage_certificate`) and checked against ``groups``.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.mechanisms import FedCPQQ
    >>> rng = np.random.default_rng(0)
    >>> scores, agents = rng.uniform(size=1000), np.repeat(np.arange(10), 100)
    >>> cal = FedCPQQ().calibrate(scores, alpha=0.1, groups=agents)
    >>> cal.details["local_ranks"][0], cal.details["server_rank"]
    (95, 1)
    >>> round(cal.coverage_lower_bound, 4)
    0.9002
    """

    def __init__(self, *, n_agents=None):
        self.n_agents = n_agents

    def privacy_guarantee(self) -> PrivacyGuarantee:
        """No privacy: agents send exact order statistics of their scores."""
        self._check_params()
        return federated_privacy(None)

    def plan(self, agent_sizes, alpha: float) -> FederatedPlan:
        """The FedCP-QQ plan for these public agent sizes (no data read)."""
        return make_plan(agent_sizes, alpha)


class FedCP2QQ(_FederatedMechanism):
    """Federated calibration with epsilon-local-DP agents (FedCP2-QQ).

    Paper 004 Sec. 4, Algorithm 3: the server finds the FedCP-QQ ranks
    ``(l_gamma, k_gamma)`` for the level ``(1 - alpha) / (1 - gamma alpha)``, raises
    the agents' rank by ``l_cor = ceil(2/eps log(B / (1 - (1 - gamma alpha)^(1/m))))``
    (Eq. (10)), and each agent releases the exponential-mechanism quantile of its
    scores on ``B`` uniform bins at level ``q = max((l_gamma + l_cor) / n, 1/2)``
    (Algorithm 2, utility scaled by its sensitivity ``max(1/q, 1/(1-q))``). The server
    keeps the ``k_gamma``-th smallest message. ``gamma="auto"`` takes the ``gamma``
    of :data:`~privconf_sklearn.federated.GAMMA_GRID` with the smallest
    ``M(l_gamma + l_cor, k_gamma)`` (Sec. 4). Unequal sizes use the Appendix A.1 ranks
    at the same level, agent by agent.

    Guarantees (Theorem 4.1): each agent's message is epsilon-local-DP; marginal
    coverage at least ``(1 - gamma alpha) M(l_gamma, k_gamma) >= 1 - alpha``. When
    ``l_gamma + l_cor`` reaches an agent's size, that agent's level would be 1 and it
    sends the top of the range without reading its data; if fewer than ``k_gamma``
    agents are left for every ``gamma``, the request is infeasible: the threshold is
    the top of the range (full sets, widest intervals), no data is read, a warning
    says why.

    Parameters
    ----------
    epsilon : float, default=1.0
        Local privacy budget of each agent's message, > 0 and finite.
    n_bins : int, default=100
        Number ``B >= 2`` of uniform bins on [0, 1].
    gamma : float or "auto", default="auto"
        Share of ``alpha`` given to the privacy noise, in (0, 1).
    n_agents : int or None, default=None
        Number of agents, used only to certify coverage before data is seen
        (:meth:`coverage_certificate`) and checked against ``groups``.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.mechanisms import FedCP2QQ
    >>> rng = np.random.default_rng(0)
    >>> scores, agents = rng.uniform(size=2400), np.repeat(np.arange(10), 240)
    >>> cal = FedCP2QQ(epsilon=1.0).calibrate(scores, 0.1, groups=agents, random_state=0)
    >>> cal.privacy.notion, cal.privacy.epsilon, cal.details["rank_correction"]
    ('local', 1.0, 21)
    >>> bool(cal.coverage_lower_bound >= 0.9)
    True
    """

    def __init__(self, epsilon: float = 1.0, *, n_bins=100, gamma="auto", n_agents=None):
        self.epsilon = epsilon
        self.n_bins = n_bins
        self.gamma = gamma
        self.n_agents = n_agents

    def _check_params(self) -> None:
        super()._check_params()
        check_private_parameters(self.epsilon, self.n_bins, self.gamma)

    def privacy_guarantee(self) -> PrivacyGuarantee:
        """Epsilon-local DP of each agent's message (recorded as epsilon)."""
        self._check_params()
        return federated_privacy(float(self.epsilon))

    def plan(self, agent_sizes, alpha: float) -> FederatedPlan:
        """The FedCP2-QQ plan for these public agent sizes (no data read)."""
        return make_plan(
            agent_sizes, alpha, epsilon=self.epsilon, n_bins=self.n_bins, gamma=self.gamma
        )
