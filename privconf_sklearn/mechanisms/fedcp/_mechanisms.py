"""Federated calibration with the quantile of quantiles: FedCP-QQ and FedCP2-QQ.

Humbert, Le Bars, Bellet and Arlot, "One-Shot Federated Conformal Prediction" (ICML
2023). Calibration scores live with ``m`` agents (the ``groups`` passed to
``fit_calibrate``); each agent sends one message computed from its own scores and the
server keeps the ``k``-th smallest message. These mechanisms run, with all agents in
one process, the plan, agent and server functions of :mod:`privconf_sklearn.mechanisms.fedcp`
that :mod:`privconf_sklearn.federated` sends over JSON to agents on other machines.

Agent sizes are public (as ``n`` is for every mechanism); the coverage certificate,
computed before any data is read, therefore needs them: pass ``agent_sizes=`` to
:meth:`FedCPQQ.coverage_certificate`, or set ``n_agents`` on the mechanism to certify
``n_samples`` scores spread evenly over ``n_agents`` agents. An agent with more than
10^4 scores uses a uniformly random subset of 10^4 (``details["sample_sizes"]``), so
that planning cost does not grow with the agents' sizes.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from ..._param_validation import Interval, StrOptions, check_alpha, validate_params
from ..._random import NoiseSource
from ...privacy import PrivacyGuarantee
from .._base import (
    Calibration,
    CoverageCertificate,
    Forecast,
    QuantileMechanism,
    monte_carlo_distribution,
    summarise_forecast,
)
from .._statistics import ScoreStatistics
from ._agent import agent_log_probabilities, agent_values
from ._correction import SCALINGS
from ._plan import (
    MAX_AGENTS,
    MAX_BINS,
    FedCP2QQPlan,
    FederatedPlan,
    check_agent_sizes,
    even_sizes,
    min_informative_size,
    validated_plan,
)
from ._server import federated_privacy, release_calibration

__all__ = ["FedCP2QQ", "FedCPQQ"]


class _FederatedMechanism(QuantileMechanism):
    """Shared logic: groups -> agents -> plan -> releases -> the server's threshold."""

    requires_groups = True

    _parameter_constraints: dict = {
        "n_agents": [None, Interval(Integral, 2, MAX_AGENTS, closed="both")],
    }

    def _planned_sizes(self, params: dict, n_samples: int, agent_sizes) -> tuple[int, ...]:
        """The given ``agent_sizes`` or ``n_samples`` spread over ``n_agents``, checked."""
        n_agents, owner = params["n_agents"], self._method("coverage_certificate")
        if agent_sizes is not None:
            sizes = check_agent_sizes(agent_sizes, owner)
            if sum(sizes) != n_samples:
                raise ValueError(
                    f"{type(self).__name__}: agent_sizes sum to {sum(sizes)}, not "
                    f"n_samples = {n_samples}."
                )
            return sizes
        if n_agents is None:
            raise ValueError(
                f"{type(self).__name__}.coverage_certificate needs the agents' sizes: pass "
                "agent_sizes=[n_1, ..., n_m] or set n_agents on the mechanism (n_samples "
                "is then spread evenly over n_agents agents)."
            )
        if n_samples < n_agents:
            raise ValueError(
                f"n_samples = {n_samples} cannot be spread over n_agents = {n_agents} "
                "agents with at least one score each."
            )
        return check_agent_sizes(even_sizes(n_samples, n_agents), owner)

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
        caller = self._method("coverage_certificate")
        params = self._validated_params()
        n_samples = validate_params(
            {"n_samples": [Interval(Integral, 2, None, closed="left")]},
            {"n_samples": n_samples},
            caller,
        )["n_samples"]
        alpha = check_alpha(alpha, caller)
        return self._coverage_certificate(params, n_samples, alpha, agent_sizes)

    def _coverage_certificate(
        self, params: dict, n_samples: int, alpha: float, agent_sizes=None
    ) -> CoverageCertificate:
        plan = self._plan(params, self._planned_sizes(params, n_samples, agent_sizes), alpha)
        if not plan.feasible:
            return CoverageCertificate(1.0, feasible=False, reason=plan.reason)
        return CoverageCertificate(plan.coverage_lower_bound)

    def forecast(
        self, n_samples: int, alpha: float, *, spread: float = 1.0, agent_sizes=None
    ) -> Forecast:
        """What a federated calibration will likely release, per agent and in all.

        As :meth:`QuantileMechanism.forecast
        <privconf_sklearn.mechanisms.QuantileMechanism.forecast>`, for public agent
        sizes: every agent's scores are spread evenly over the bottom ``spread`` of the
        range (``s = spread (i - 1/2) / n_j``). The server's release is forecast by a
        seeded Monte Carlo of the whole protocol; each agent's chance of sending
        something other than the top of the range is exact
        (``agent_informative_probabilities``; FedCP-QQ agents send an exact order
        statistic, so theirs is 0 or 1). No data are read, no privacy is spent.

        Parameters
        ----------
        n_samples : int
            Total number of calibration scores, in ``[2, 10^7]``.
        alpha : float
            Miscoverage level in (0, 1).
        spread : float, default=1.0
            Share of the public range the idealised scores fill, in (0, 1].
        agent_sizes : sequence of int, default=None
            Size of each agent's calibration set (summing to ``n_samples``); None
            spreads ``n_samples`` evenly over the mechanism's ``n_agents``.

        Returns
        -------
        Forecast
        """
        n_samples, alpha, spread = self._check_forecast_input(n_samples, alpha, spread, 2)
        params = self._validated_params()
        sizes = self._planned_sizes(params, n_samples, agent_sizes)
        return self._federated_forecast(params, sizes, alpha, spread)

    def _forecast(self, params: dict, n_samples: int, alpha: float, spread: float) -> Forecast:
        return self._federated_forecast(
            params, self._planned_sizes(params, n_samples, None), alpha, spread
        )

    def _federated_forecast(
        self, params: dict, sizes: tuple[int, ...], alpha: float, spread: float
    ) -> Forecast:
        """:meth:`forecast` from validated parameters and agent sizes."""
        plan = self._plan(params, sizes, alpha)
        certificate = self._coverage_certificate(params, sum(sizes), alpha, sizes)
        parts = [spread * (np.arange(size) + 0.5) / size for size in sizes]
        scores = np.concatenate(parts)
        groups = np.repeat(np.arange(len(sizes)), sizes)
        distribution = monte_carlo_distribution(self, params, scores, alpha, groups)
        agents = tuple(_agent_informative(plan, agent, spread) for agent in range(len(sizes)))
        return summarise_forecast(
            certificate,
            alpha,
            spread,
            scores,
            distribution,
            exact=False,
            agent_informative_probabilities=agents,
        )

    def min_informative_samples(self, alpha: float, *, n_agents=None) -> int:
        """Smallest per-agent calibration size with a feasible plan, from public quantities.

        For ``n_agents`` agents of equal size ``n`` (the mechanism's ``n_agents`` if not
        given), the smallest ``n`` for which :meth:`coverage_certificate` of
        ``n_agents * n`` scores is feasible; feasibility does not decrease with ``n``, so
        it is found by doubling and bisection.

        Parameters
        ----------
        alpha : float
            Miscoverage level.
        n_agents : int or None, default=None
            Number of agents; defaults to the mechanism's ``n_agents``.

        Returns
        -------
        int
            Calibration scores per agent (``10**9 + 1`` if no size up to ``10**9``
            suffices).
        """
        caller = self._method("min_informative_samples")
        params = self._validated_params()
        alpha = check_alpha(alpha, caller)
        n_agents = validate_params(
            {"n_agents": self._parameter_constraints["n_agents"]},
            {"n_agents": params["n_agents"] if n_agents is None else n_agents},
            caller,
        )["n_agents"]
        if n_agents is None:
            raise ValueError(
                f"{type(self).__name__}.min_informative_samples needs the number of agents: "
                "pass n_agents= or set n_agents on the mechanism."
            )
        return min_informative_size(n_agents, alpha, **self._plan_arguments(params))

    def _plan_arguments(self, params: dict) -> dict:
        """Keyword arguments of ``make_plan`` besides the sizes and ``alpha``."""
        return {}

    def plan(self, agent_sizes, alpha: float) -> FederatedPlan:
        """The server's plan for these public agent sizes (no data read).

        Parameters
        ----------
        agent_sizes : sequence of int
            Public calibration size of each agent.
        alpha : float
            Miscoverage level.

        Returns
        -------
        FedCPQQPlan or FedCP2QQPlan
            See :func:`privconf_sklearn.federated.make_plan`.
        """
        params = self._validated_params()
        alpha = check_alpha(alpha, self._method("plan"))
        return self._plan(params, check_agent_sizes(agent_sizes, self._method("plan")), alpha)

    def _plan(self, params: dict, sizes: tuple[int, ...], alpha: float) -> FederatedPlan:
        """``make_plan`` on validated parameters and agent sizes."""
        return validated_plan(sizes, alpha, **self._plan_arguments(params))

    def _calibrate_from_statistics(
        self, params: dict, statistics: ScoreStatistics, alpha: float, noise: NoiseSource
    ) -> Calibration:
        parts = statistics.agents()
        n_agents = params["n_agents"]
        if n_agents is not None and len(parts) != n_agents:
            raise ValueError(f"groups define {len(parts)} agents but n_agents = {n_agents}.")
        owner = f"{type(self).__name__} (the agents of groups)"
        sizes = check_agent_sizes([part.n_samples for part in parts], owner)
        plan = self._plan(params, sizes, alpha)
        if not plan.feasible:
            return release_calibration(plan, [])
        return release_calibration(plan, agent_values(statistics, parts, plan, noise))


class FedCPQQ(_FederatedMechanism):
    """One-shot federated conformal calibration with the quantile of quantiles.

    Humbert et al. (2023), Algorithm 1 (FedCP-QQ): each agent sends the ``l``-th
    smallest of its scores, the server returns the ``k``-th smallest message. For equal
    local sizes ``(l, k) = argmin {M(l, k) : M(l, k) >= 1 - alpha}`` (their Eq. (6)),
    with the coverage table ``M`` of Theorem 3.2 computed exactly. For unequal sizes the
    agents' ranks are searched too (from public sizes only; their Appendix A.1 fixes
    them), and when that search is not better than the equal-size plan at the smallest
    size, every agent uses a uniformly random subset of that size.

    Guarantee: marginal coverage at least ``M >= 1 - alpha`` for i.i.d. scores (Theorem
    3.2), exactly ``M`` for continuous scores (so at most ``M + p_max`` with atoms of
    mass at most ``p_max``). No privacy: agents send exact order statistics.

    Use it with ``fit_calibrate(X, y, groups=agent_ids)``.

    Parameters
    ----------
    n_agents : int or None, default=None
        Number of agents, used only to certify coverage before data is seen
        (:meth:`coverage_certificate`, :meth:`min_informative_samples`) and checked
        against ``groups``.

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
    >>> FedCPQQ().min_informative_samples(0.1, n_agents=2)  # M(n, 2) = 2n / (2n + 1)
    5
    """

    def __init__(self, *, n_agents=None):
        self.n_agents = n_agents

    def _privacy_guarantee(self, params: dict) -> PrivacyGuarantee:
        """No privacy: agents send exact order statistics of their scores."""
        return federated_privacy(None)


class FedCP2QQ(_FederatedMechanism):
    """Federated calibration with epsilon-locally-private agents (FedCP2-QQ).

    Humbert et al. (2023), Sec. 4 and Algorithm 3: the server finds the FedCP-QQ ranks
    ``l_j`` and ``k`` for the level ``(1 - alpha) / (1 - gamma alpha)`` and raises each
    agent's rank by a correction ``c_j``; agent ``j`` releases the exponential-mechanism
    quantile of its scores on ``B`` uniform bins at level ``q_j`` and the server keeps
    the ``k``-th smallest message.

    - ``scaling="tight"`` (default): exponent ``-epsilon max((1 - q) b_e, q a_e)`` and
      ``c_j`` the smallest integer with ``epsilon q_j (c_j + 1) >= log((B - 1)/delta)``,
      ``q_j = (l_j + c_j) / n_j``, ``delta = 1 - (1 - gamma alpha)^(1/m)`` (proof in the
      user guide): about half the paper's correction.
    - ``scaling="paper"``: their Algorithm 2 (``exp(-epsilon w / (2 Delta_q))``) and
      Eq. (10), ``c = ceil(2/epsilon log(B / delta))``, ``q_j = max((l_j + c)/n_j, 1/2)``.

    ``gamma="auto"`` and ``n_bins="auto"`` choose ``gamma`` on a grid of 0.05 to 0.95 and
    ``B`` on a log-spaced grid of 2 to 10^6, minimising the coverage of the non-private
    estimator at the corrected ranks plus ``1 / (2B)`` (the grid's mean rounding), from
    public quantities only (Sec. 4's choice of ``gamma``, extended to ``B``).

    Guarantees (Theorem 4.1): each agent's message is epsilon-DP in that agent's scores
    (replace-one and add/remove, sizes public), so the server's view is epsilon-DP
    under add/remove adjacency and 2 epsilon-DP under replace-one (a replaced record may
    move to another agent and change two messages), as
    :meth:`~privconf_sklearn.privacy.PrivacyGuarantee.under` states; marginal coverage
    at least ``(1 - gamma alpha) M >= 1 - alpha``. An agent whose corrected rank would exceed its
    size sends the top of the range without reading its data; if the server rank cannot
    be served, the request is infeasible: the threshold is the top of the range (full
    sets, widest intervals), no data is read, and a warning says why and from which
    size per agent it would be feasible.

    Parameters
    ----------
    epsilon : float
        Local privacy budget of each agent's message, > 0 and finite (no default).
    n_bins : int or "auto", default="auto"
        Number ``B`` of uniform bins on [0, 1], 2 to 10^6 (the paper uses 100).
    gamma : float or "auto", default="auto"
        Share of ``alpha`` given to the privacy noise, in (0, 1).
    scaling : {"tight", "paper"}, default="tight"
        The agents' exponential-mechanism scaling and the matching rank correction.
    n_agents : int or None, default=None
        Number of agents, used only to certify coverage before data is seen
        (:meth:`coverage_certificate`, :meth:`min_informative_samples`) and checked
        against ``groups``.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.mechanisms import FedCP2QQ
    >>> rng = np.random.default_rng(0)
    >>> scores, agents = rng.uniform(size=2400), np.repeat(np.arange(10), 240)
    >>> cal = FedCP2QQ(epsilon=1.0).calibrate(scores, 0.1, groups=agents, random_state=0)
    >>> cal.privacy.notion, cal.privacy.epsilon, cal.privacy.adjacency
    ('local', 1.0, 'add/remove')
    >>> cal.privacy.under("replace-one").epsilon
    2.0
    >>> bool(cal.coverage_lower_bound >= 0.9), cal.informative
    (True, True)
    """

    _parameter_constraints: dict = {
        **_FederatedMechanism._parameter_constraints,
        "epsilon": [Interval(Real, 0.0, None, closed="neither")],
        "n_bins": [StrOptions({"auto"}), Interval(Integral, 2, MAX_BINS, closed="both")],
        "gamma": [StrOptions({"auto"}), Interval(Real, 0.0, 1.0, closed="neither")],
        "scaling": [StrOptions(set(SCALINGS))],
    }

    def __init__(self, epsilon, *, n_bins="auto", gamma="auto", scaling="tight", n_agents=None):
        self.epsilon = epsilon
        self.n_bins = n_bins
        self.gamma = gamma
        self.scaling = scaling
        self.n_agents = n_agents

    def _privacy_guarantee(self, params: dict) -> PrivacyGuarantee:
        """Epsilon under add/remove adjacency (2 epsilon under replace-one).

        Each agent's message is epsilon-local-DP in that agent's scores; a replaced
        record may sit at another agent and change two messages.
        """
        return federated_privacy(params["epsilon"])

    def _plan_arguments(self, params: dict) -> dict:
        return {name: params[name] for name in ("epsilon", "n_bins", "gamma", "scaling")}


def _agent_informative(plan: FederatedPlan, agent: int, spread: float) -> float:
    """Probability that ``agent``'s message is below the top, its scores evenly spread.

    A subset agent (more scores than the protocol uses) is taken with its used number
    of scores spread evenly, the scenario's idealisation of its random subset.
    """
    if not plan.feasible or plan.sends_top(agent):
        return 0.0
    if not isinstance(plan, FedCP2QQPlan):  # a FedCP-QQ agent sends an exact statistic
        return 1.0
    used = plan.sample_sizes[agent]
    scores = spread * (np.arange(used) + 0.5) / used
    log_probabilities = agent_log_probabilities(scores, plan, agent)
    return max(0.0, float(-np.expm1(log_probabilities[-1])))
