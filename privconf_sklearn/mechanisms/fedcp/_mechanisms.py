"""The federated mechanisms FedCP-QQ and FedCP2-QQ (Humbert et al., ICML 2023).

They run, with every agent in one process, the plan, agent and server functions that
:mod:`privconf_sklearn.federated` sends over JSON; agent sizes are public, so the
coverage certificate takes ``agent_sizes=`` or the mechanism's ``n_agents``.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from ..._param_validation import Interval, check_alpha, validate_params
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
from ._plan import (
    MAX_AGENTS,
    PLAN_CONSTRAINTS,
    FedCP2QQPlan,
    FederatedPlan,
    check_agent_sizes,
    even_sizes,
    min_informative_size,
    validated_plan,
)
from ._server import federated_privacy, release_calibration


class _FederatedMechanism(QuantileMechanism):
    """Shared logic: groups -> agents -> plan -> releases -> the server's threshold."""

    requires_groups = True

    #: The mechanism's parameters that are :func:`make_plan` arguments.
    _plan_parameters: tuple[str, ...] = ()

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
        sizes (agent ``j``'s scores ``s = spread (i - 1/2) / n_j``): the server's release
        by a seeded Monte Carlo of the protocol, each agent's chance of sending something
        other than the top exactly (``agent_informative_probabilities``; 0 or 1 for
        FedCP-QQ). No data are read, no privacy is spent.

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
        return self._forecast(self._validated_params(), n_samples, alpha, spread, agent_sizes)

    def _forecast(
        self, params: dict, n_samples: int, alpha: float, spread: float, agent_sizes=None
    ) -> Forecast:
        sizes = self._planned_sizes(params, n_samples, agent_sizes)
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

        The smallest ``n`` for which :meth:`coverage_certificate` of ``n_agents`` agents
        of ``n`` scores is feasible (found by doubling and bisection).

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
        return {name: params[name] for name in self._plan_parameters}

    def _privacy_guarantee(self, params: dict) -> PrivacyGuarantee:
        return federated_privacy(params.get("epsilon"))

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
        values = agent_values(statistics, parts, plan, noise) if plan.feasible else []
        return release_calibration(plan, values)


class FedCPQQ(_FederatedMechanism):
    """One-shot federated conformal calibration with the quantile of quantiles (FedCP-QQ).

    Humbert et al. (2023), Algorithm 1: each agent (a group of ``groups``) sends the
    ``l_j``-th smallest of its scores, the server returns the ``k``-th smallest message;
    the ranks come from public sizes only (Eq. (6) for equal sizes; the user guide
    describes the search for unequal ones). Marginal coverage at least ``M >= 1 - alpha``
    for i.i.d. scores, exactly ``M`` for continuous ones (Theorem 3.2); no privacy.
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


class FedCP2QQ(_FederatedMechanism):
    """Federated calibration with epsilon-locally-private agents (FedCP2-QQ).

    Humbert et al. (2023), Sec. 4 and Algorithm 3: the FedCP-QQ ranks for the level
    ``(1 - alpha) / (1 - gamma alpha)``, each agent's raised by a correction ``c_j``;
    agent ``j`` releases an exponential-mechanism quantile of its scores on ``B`` bins
    and the server keeps the ``k``-th smallest message. Each message is epsilon-DP in its
    agent's scores, so the server's view is epsilon-DP under add/remove and 2 epsilon-DP
    under replace-one (a record may move between agents); marginal coverage is at least
    ``(1 - gamma alpha) M >= 1 - alpha`` (Theorem 4.1). An infeasible request releases
    the top of the range without reading data, and warns. The user guide derives the
    corrections and the automatic choice of ``gamma`` and ``B``.

    Parameters
    ----------
    epsilon : float
        Local privacy budget of each agent's message, > 0 and finite (no default).
    n_bins : int or "auto", default="auto"
        Number ``B`` of uniform bins on [0, 1], 2 to 10^6 (the paper uses 100).
    gamma : float or "auto", default="auto"
        Share of ``alpha`` given to the privacy noise, in (0, 1).
    scaling : {"tight", "paper"}, default="tight"
        The agents' exponential-mechanism scaling and rank correction (``"paper"``:
        Algorithm 2 and Eq. (10)).
    n_agents : int or None, default=None
        As for :class:`FedCPQQ`.

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

    _plan_parameters = ("epsilon", "n_bins", "gamma", "scaling")
    _parameter_constraints: dict = {
        **_FederatedMechanism._parameter_constraints,
        "epsilon": [Interval(Real, 0.0, None, closed="neither")],
        **{name: PLAN_CONSTRAINTS[name] for name in ("n_bins", "gamma", "scaling")},
    }

    def __init__(self, epsilon, *, n_bins="auto", gamma="auto", scaling="tight", n_agents=None):
        self.epsilon = epsilon
        self.n_bins = n_bins
        self.gamma = gamma
        self.scaling = scaling
        self.n_agents = n_agents


def _agent_informative(plan: FederatedPlan, agent: int, spread: float) -> float:
    """Probability that ``agent``'s message is below the top, its used scores evenly spread."""
    if not plan.feasible or plan.sends_top(agent):
        return 0.0
    if not isinstance(plan, FedCP2QQPlan):  # a FedCP-QQ agent sends an exact statistic
        return 1.0
    used = plan.sample_sizes[agent]
    scores = spread * (np.arange(used) + 0.5) / used
    log_probabilities = agent_log_probabilities(scores, plan, agent)
    return max(0.0, float(-np.expm1(log_probabilities[-1])))
