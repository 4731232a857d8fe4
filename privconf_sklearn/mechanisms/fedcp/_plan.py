"""The server's plan for one-shot federated calibration, from public quantities only.

Humbert, Le Bars, Bellet and Arlot (ICML 2023): the ranks of FedCP-QQ (Algorithm 1,
Eq. (6); searched per agent for unequal sizes) and the bins, ``gamma`` and corrected
ranks of FedCP2-QQ (Algorithm 3), as cached frozen dataclasses of public quantities.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache, partial
from numbers import Integral, Real
from typing import ClassVar

import numpy as np

from ..._param_validation import Interval, InvalidParameterError, StrOptions, validate_params
from .._base import smallest_feasible_size
from ._choice import private_choice
from ._correction import SCALINGS
from ._search import Table, equal_table, threshold_sizes, thresholded_table, unequal_table

#: Protocol names.
FEDCP_QQ = "FedCP-QQ"
FEDCP2_QQ = "FedCP2-QQ"

#: Candidate ``gamma`` values for ``gamma="auto"``: the grid 0.05, ..., 0.95 of Sec. 4 of
#: Humbert et al. (2023), extended below 0.05 (with the tight correction, large agents
#: often do best with a small share of ``alpha`` for the privacy noise).
GAMMA_GRID = (0.002, 0.005, 0.01, 0.02, 0.03, 0.04, *(round(0.05 * i, 2) for i in range(1, 20)))

#: Candidate numbers of bins for ``n_bins="auto"``: 63 log-spaced values from 2 to 10^6.
BIN_GRID = tuple(int(b) for b in np.unique(np.round(np.geomspace(2, 10**6, 64)).astype(np.int64)))

#: Largest number of agents a plan is made for.
MAX_AGENTS = 10_000

#: Largest calibration size of one agent.
MAX_AGENT_SIZE = 10**9

#: Largest number of scores an agent uses: a larger agent uses a uniformly random subset
#: of this size (its ``sample_sizes`` entry), and the plan is made and certified for the
#: sizes so capped (planning cost grows with the sizes; the certified excess is ~1e-5).
MAX_SAMPLE_SIZE = 10**4

#: Largest number of bins (each agent allocates one count per bin).
MAX_BINS = 10**6


def _describe(sizes: tuple[int, ...]) -> str:
    if len(set(sizes)) == 1:
        return f"m = {len(sizes)} agents x n = {sizes[0]}"
    return f"m = {len(sizes)} agents, n_j in [{min(sizes)}, {max(sizes)}]"


@dataclass(frozen=True)
class FedCPQQPlan:
    """What every agent and the server must know before a FedCP-QQ round (public only).

    Attributes
    ----------
    alpha : float
        Target miscoverage.
    agent_sizes : tuple of int
        Public calibration size ``n_j`` of each agent, in agent order ``0..m-1``.
    feasible : bool
        False when no ranks certify ``1 - alpha``; the threshold is then the top of the
        range and no agent reads its data.
    reason : str
        Why the plan is infeasible, or empty.
    sample_sizes : tuple of int
        ``n'_j <= min(n_j, MAX_SAMPLE_SIZE)``: agent ``j`` uses a uniformly random subset
        of ``n'_j`` of its scores (all of them when ``n'_j = n_j``); empty when infeasible.
    local_ranks : tuple of int
        ``l_j``: agent ``j`` sends the ``l_j``-th smallest score of its subset, or the
        top of the range (1.0) without reading its data when ``l_j > n'_j``.
    server_rank : int
        ``k``: the server keeps the ``k``-th smallest message (0 when infeasible).
    coverage_lower_bound, coverage_upper_bound : float
        Certified marginal coverage ``M_k`` (Theorem 3.2 / Appendix A.1), at least
        ``1 - alpha`` when feasible (1 when infeasible: the trivial release), and the
        upper bound: the exact coverage for continuous scores (add the largest atom of
        the score distribution otherwise).
    """

    protocol: ClassVar[str] = FEDCP_QQ
    private: ClassVar[bool] = False

    alpha: float
    agent_sizes: tuple[int, ...]
    feasible: bool
    reason: str
    sample_sizes: tuple[int, ...]
    local_ranks: tuple[int, ...]
    server_rank: int
    coverage_lower_bound: float
    coverage_upper_bound: float

    @property
    def n_agents(self) -> int:
        """Number of agents ``m``."""
        return len(self.agent_sizes)

    def sends_top(self, agent: int) -> bool:
        """Whether ``agent``'s message is the top of the range, chosen without its data."""
        return self.local_ranks[agent] > self.sample_sizes[agent]


@dataclass(frozen=True)
class FedCP2QQPlan:
    """What every agent and the server must know before a FedCP2-QQ round (public only).

    Attributes
    ----------
    alpha, agent_sizes, feasible, reason, sample_sizes, server_rank
        As for :class:`FedCPQQPlan`.
    epsilon : float
        Local privacy budget of each agent's message.
    scaling : {"tight", "paper"}
        Exponential-mechanism scaling of the agents (and the matching correction).
    n_bins_request, gamma_request : int or "auto", float or "auto"
        The requested number of bins and ``gamma`` (public inputs of the plan).
    n_bins, gamma : int, float
        Number ``B`` of uniform bins on [0, 1] the agents release an edge of, and share
        of ``alpha`` given to the privacy noise (0 when infeasible with "auto").
    table_level : float
        ``(1 - alpha) / (1 - gamma alpha)`` (rounded to the nearest float).
    table_ranks : tuple of int
        Ranks ``l_j`` the coverage table is certified at; ``n'_j + 1`` (``+inf``) for
        agents that send the top of the range.
    rank_corrections, local_levels : tuple of int, tuple of float
        Correction ``c_j`` and level ``q_j`` of each agent's exponential mechanism (0
        for agents that send the top).
    releases : tuple of bool
        Whether agent ``j`` reads its data (False: it sends the top edge, 1.0).
    table_coverage : float
        Certified ``M_k`` at ``table_ranks`` (Theorem 3.2 / Appendix A.1).
    coverage_lower_bound : float
        ``(1 - gamma alpha) table_coverage`` (proof of Theorem 4.1), at least
        ``1 - alpha`` when feasible (1 when infeasible).
    """

    protocol: ClassVar[str] = FEDCP2_QQ
    private: ClassVar[bool] = True

    alpha: float
    agent_sizes: tuple[int, ...]
    epsilon: float
    scaling: str
    n_bins_request: int | str
    gamma_request: float | str
    feasible: bool
    reason: str
    n_bins: int
    gamma: float
    table_level: float
    sample_sizes: tuple[int, ...]
    table_ranks: tuple[int, ...]
    rank_corrections: tuple[int, ...]
    local_levels: tuple[float, ...]
    releases: tuple[bool, ...]
    server_rank: int
    table_coverage: float
    coverage_lower_bound: float

    @property
    def n_agents(self) -> int:
        """Number of agents ``m``."""
        return len(self.agent_sizes)

    def sends_top(self, agent: int) -> bool:
        """Whether ``agent``'s message is the top edge, chosen without its data."""
        return not self.releases[agent]


#: Either plan type.
FederatedPlan = FedCPQQPlan | FedCP2QQPlan


def _capped(sizes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(min(n, MAX_SAMPLE_SIZE) for n in sizes)


@lru_cache(maxsize=256)
def _fedcp_qq_table(sizes: tuple[int, ...], alpha: float) -> Table | None:
    """FedCP-QQ ranks for the capped sizes (Eq. (6); unequal: searched or thresholded).

    Unequal sizes take the lowest certified of the searched ranks and the equal-size plan
    at the smallest size (every thresholded plan when the search was cut).
    """
    sizes = _capped(sizes)
    level = 1 - Fraction(alpha)
    if len(set(sizes)) == 1:
        return equal_table(len(sizes), sizes[0], level)
    searched, complete = unequal_table(sizes, level)
    candidates = [] if searched is None else [searched]
    for size in [min(sizes)] if complete else threshold_sizes(sizes):
        table = equal_table(sum(n >= size for n in sizes), size, level)
        if table is not None:
            candidates.append(thresholded_table(sizes, size, table))
    # The smallest certified coverage; ties go to the searched plan, then the smaller size.
    return min(candidates, key=lambda table: table.coverage.key, default=None)


def _needed(n_agents: int, needed: int) -> str:
    if needed > MAX_SAMPLE_SIZE:
        return (
            f"every agent would need more than the {MAX_SAMPLE_SIZE} scores an agent uses "
            f"(larger agents subsample) for {n_agents} agents"
        )
    return f"every agent needs at least {needed} calibration scores for {n_agents} agents"


@lru_cache(maxsize=256)
def plan_fedcp_qq(sizes: tuple[int, ...], alpha: float) -> FedCPQQPlan:
    """The FedCP-QQ plan (validated inputs; see :func:`make_plan`)."""
    table = _fedcp_qq_table(sizes, alpha)
    if table is None:
        reason = (
            f"no quantile-of-quantiles ranks reach coverage 1 - alpha = {1 - alpha:g} with "
            f"{_describe(sizes)}: {_needed(len(sizes), min_informative_size(len(sizes), alpha))}"
            " (or use more agents)."
        )
        return FedCPQQPlan(alpha, sizes, False, reason, (), (), 0, 1.0, 1.0)
    return FedCPQQPlan(
        alpha=alpha,
        agent_sizes=sizes,
        feasible=True,
        reason="",
        sample_sizes=table.sample_sizes,
        local_ranks=table.local_ranks,
        server_rank=table.server_rank,
        coverage_lower_bound=table.coverage.lower_float,
        coverage_upper_bound=table.coverage.upper_float,
    )


def _choice(sizes, alpha, epsilon, n_bins_request, gamma_request, scaling):
    """:func:`~._choice.private_choice` for the capped sizes and the requested grids."""
    gammas = GAMMA_GRID if gamma_request == "auto" else (float(gamma_request),)
    bins = BIN_GRID if n_bins_request == "auto" else (int(n_bins_request),)
    return private_choice(_capped(sizes), alpha, epsilon, gammas, bins, scaling)


def _private_reason(sizes, alpha, epsilon, n_bins, gamma, scaling) -> str:
    """Why no FedCP2-QQ plan exists for this (validated) request."""
    bins = "bins chosen automatically" if n_bins == "auto" else f"{n_bins} bins"
    detail = (
        "fewer agents can release within their data than the server rank needs, for every gamma"
    )
    hint = "larger local calibration sets are needed"
    if len(set(sizes)) == 1:
        detail = (
            "the privacy correction added to the rank needed for coverage "
            "(1 - alpha)/(1 - gamma alpha) exceeds the agents' data for every gamma and "
            "number of bins tried"
        )
        needed = min_informative_size(
            len(sizes), alpha, epsilon=epsilon, n_bins=n_bins, gamma=gamma, scaling=scaling
        )
        hint = _needed(len(sizes), needed)
    return (
        f"with {_describe(sizes)}, epsilon = {epsilon:g} and {bins}, {detail} "
        f"(alpha = {alpha:g}): {hint}, or a larger epsilon."
    )


@lru_cache(maxsize=256)
def plan_fedcp2_qq(
    sizes: tuple[int, ...],
    alpha: float,
    epsilon: float,
    n_bins_request: int | str,
    gamma_request: float | str,
    scaling: str,
) -> FedCP2QQPlan:
    """The FedCP2-QQ plan (validated inputs; see :func:`make_plan`)."""
    request = (sizes, alpha, epsilon, n_bins_request, gamma_request, scaling)
    choice = _choice(*request)
    plan = partial(FedCP2QQPlan, alpha, sizes, epsilon, scaling, n_bins_request, gamma_request)
    if choice is None:
        reason = _private_reason(*request)
        n_bins = 0 if n_bins_request == "auto" else int(n_bins_request)
        gamma = 0.0 if gamma_request == "auto" else float(gamma_request)
        return plan(False, reason, n_bins, gamma, 1.0, (), (), (), (), (), 0, 1.0, 1.0)
    level = (1 - Fraction(alpha)) / (1 - Fraction(choice.gamma) * Fraction(alpha))
    return plan(
        feasible=True,
        reason="",
        n_bins=choice.n_bins,
        gamma=choice.gamma,
        table_level=float(level),
        sample_sizes=choice.table.sample_sizes,
        table_ranks=choice.table_ranks,
        rank_corrections=choice.corrections,
        local_levels=choice.levels,
        releases=choice.releases,
        server_rank=choice.table.server_rank,
        table_coverage=choice.table.coverage.lower_float,
        coverage_lower_bound=float(choice.lower_bound(alpha)),
    )


@lru_cache(maxsize=256)
def min_informative_size(
    n_agents: int,
    alpha: float,
    *,
    epsilon: float | None = None,
    n_bins: int | str = "auto",
    gamma: float | str = "auto",
    scaling: str = "tight",
) -> int:
    """Smallest size ``n`` at which ``n_agents`` agents of ``n`` scores get a feasible plan.

    Feasibility does not decrease with ``n`` (user guide, FedCP2-QQ page): doubling and
    bisection find it. ``MAX_AGENT_SIZE + 1`` if :data:`MAX_SAMPLE_SIZE` (the cap of
    every size) is infeasible.
    """

    def feasible(n: int) -> bool:
        if epsilon is None:
            return _fedcp_qq_table((n,) * n_agents, alpha) is not None
        return _choice((n,) * n_agents, alpha, epsilon, n_bins, gamma, scaling) is not None

    if not feasible(MAX_SAMPLE_SIZE):
        return MAX_AGENT_SIZE + 1
    return smallest_feasible_size(feasible)


def even_sizes(n_samples: int, n_agents: int) -> tuple[int, ...]:
    """``n_samples`` spread over ``n_agents`` as evenly as possible (sizes differ by 1)."""
    base, extra = divmod(int(n_samples), int(n_agents))
    return tuple(base + 1 if j < extra else base for j in range(n_agents))


#: Constraints on :func:`make_plan`'s scalar arguments.
PLAN_CONSTRAINTS = {
    "alpha": [Interval(Real, 0.0, 1.0, closed="neither")],
    "epsilon": [None, Interval(Real, 0.0, None, closed="neither")],
    "n_bins": [StrOptions({"auto"}), Interval(Integral, 2, MAX_BINS, closed="both")],
    "gamma": [StrOptions({"auto"}), Interval(Real, 0.0, 1.0, closed="neither")],
    "scaling": [StrOptions(set(SCALINGS))],
}

_SIZE = Interval(Integral, 1, MAX_AGENT_SIZE, closed="both")


def check_agent_sizes(agent_sizes, owner: str = "make_plan") -> tuple[int, ...]:
    """Validated agent sizes: 2 to :data:`MAX_AGENTS` integers in ``[1, MAX_AGENT_SIZE]``.

    Bools and floats are not sizes; an ``InvalidParameterError`` names the bad entry.
    """
    validate_params({"agent_sizes": [list, tuple, np.ndarray]}, {"agent_sizes": agent_sizes}, owner)
    if isinstance(agent_sizes, np.ndarray):
        if agent_sizes.ndim != 1:
            raise InvalidParameterError(
                f"{owner}: agent_sizes must be one-dimensional; got shape {agent_sizes.shape}."
            )
        agent_sizes = agent_sizes.tolist()
    if not 2 <= len(agent_sizes) <= MAX_AGENTS:
        raise InvalidParameterError(
            f"{owner}: federated calibration needs 2 to {MAX_AGENTS} agents; got "
            f"{len(agent_sizes)} (agent_sizes={list(agent_sizes)[:10]})."
        )
    entries = {f"agent_sizes[{j}]": size for j, size in enumerate(agent_sizes)}
    return tuple(validate_params({key: [_SIZE] for key in entries}, entries, owner).values())


def make_plan(
    agent_sizes, alpha: float, *, epsilon=None, n_bins="auto", gamma="auto", scaling="tight"
) -> FederatedPlan:
    """The server's plan for FedCP-QQ (``epsilon=None``) or FedCP2-QQ.

    Parameters
    ----------
    agent_sizes : sequence of int
        Public calibration size of each agent (2 to 10 000 agents, each at most 10^9).
        An agent with more than :data:`MAX_SAMPLE_SIZE` (10^4) scores uses a uniformly
        random subset of that size (the plan's ``sample_sizes``).
    alpha : float
        Target miscoverage in (0, 1).
    epsilon : float or None, default=None
        Local privacy budget of each agent's message; None for the non-private
        FedCP-QQ.
    n_bins : int or "auto", default="auto"
        Number ``B`` of uniform bins on [0, 1] (FedCP2-QQ), at most 10^6; "auto" chooses
        it from public quantities (see the user guide).
    gamma : float or "auto", default="auto"
        Share of ``alpha`` given to the privacy noise (FedCP2-QQ), in (0, 1).
    scaling : {"tight", "paper"}, default="tight"
        FedCP2-QQ agents' exponential-mechanism scaling and the matching rank
        correction (``"paper"``: Algorithm 2 and Eq. (10) of Humbert et al. 2023).

    Returns
    -------
    FedCPQQPlan or FedCP2QQPlan
        Cached: the same public inputs give the same plan object.

    Raises
    ------
    InvalidParameterError
        For arguments of the wrong type or value, naming the argument (a ``ValueError``
        and a ``TypeError``).
    """
    sizes = check_agent_sizes(agent_sizes)
    checked = validate_params(
        PLAN_CONSTRAINTS,
        {"alpha": alpha, "epsilon": epsilon, "n_bins": n_bins, "gamma": gamma, "scaling": scaling},
        "make_plan",
    )
    return validated_plan(sizes, **checked)


def validated_plan(
    sizes: tuple[int, ...],
    alpha: float,
    *,
    epsilon=None,
    n_bins="auto",
    gamma="auto",
    scaling="tight",
) -> FederatedPlan:
    """:func:`make_plan` on arguments already validated (the mechanisms' entry)."""
    if epsilon is None:
        return plan_fedcp_qq(sizes, alpha)
    return plan_fedcp2_qq(sizes, alpha, epsilon, n_bins, gamma, scaling)
