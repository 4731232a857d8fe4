"""The server's plan for one-shot federated calibration, from public quantities only.

Paper 004 (Humbert, Le Bars, Bellet, Arlot, ICML 2023). Before any data is read the
server fixes, from the number of agents, their (public) calibration sizes, ``alpha``
and, for the private protocol, ``epsilon``, the number of bins and ``gamma``:

- FedCP-QQ (Algorithm 1): the rank ``l`` each agent's message targets and the rank
  ``k`` of the message the server keeps, ``(l*, k*) = argmin {M(l, k) >= 1 - alpha}``
  (Eq. (6)) for equal sizes; for unequal sizes ``l_j = ceil((1 - alpha)(n_j + 1))``
  and the smallest ``k`` whose Poisson-binomial coverage reaches ``1 - alpha``
  (Appendix A.1).
- FedCP2-QQ (Algorithm 3): the same at level ``(1 - alpha) / (1 - gamma alpha)``, each
  agent's rank raised by ``l_cor = ceil(2/eps log(B / (1 - (1 - gamma alpha)^(1/m))))``
  (Eq. (10)); agent ``j`` releases the exponential-mechanism quantile at level
  ``q_j = max((l_j + l_cor) / n_j, 1/2)``. ``gamma="auto"`` picks, on
  :data:`GAMMA_GRID`, the ``gamma`` with the smallest ``M(l_gamma + l_cor, k_gamma)``
  (Sec. 4, "Choosing gamma").

The plan is a frozen dataclass that serialises to plain JSON (:meth:`FederatedPlan.to_dict`,
:meth:`FederatedPlan.from_dict`) so that it can be sent to agents on other machines.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from .._validation import (
    check_alpha,
    check_in_open_interval,
    check_positive_finite,
    conformal_rank,
    split_conformal_rank,
)
from ._fedcp_coverage import (
    qq_coverage,
    qq_orders,
    unequal_coverage_column,
    unequal_server_rank,
)

__all__ = [
    "GAMMA_GRID",
    "PROTOCOL_VERSION",
    "FederatedPlan",
    "check_private_parameters",
    "even_sizes",
    "make_plan",
    "rank_correction",
]

#: Version of the plan and message format; agents and server must agree on it.
PROTOCOL_VERSION = 1

#: Non-private and private protocol names.
FEDCP_QQ = "FedCP-QQ"
FEDCP2_QQ = "FedCP2-QQ"

#: Candidate ``gamma`` values for ``gamma="auto"`` (paper 004 Sec. 4 searches a grid).
GAMMA_GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))


@dataclass(frozen=True)
class FederatedPlan:
    """What every agent and the server must know before the single round.

    Everything here is computed from public quantities; no score has been read.

    Attributes
    ----------
    protocol : {"FedCP-QQ", "FedCP2-QQ"}
        Non-private or epsilon-local-DP protocol.
    version : int
        :data:`PROTOCOL_VERSION`.
    alpha : float
        Target miscoverage.
    agent_sizes : tuple of int
        Calibration size ``n_j`` of each agent (public), in agent order ``0..m-1``.
    table_ranks : tuple of int
        Ranks ``l_j`` of the non-private estimator the coverage table is evaluated at
        (``l*`` or ``l_gamma`` for equal sizes; Appendix A.1 ranks otherwise).
    local_ranks : tuple of int
        Rank each agent's message targets: ``l_j`` (FedCP-QQ) or ``l_j + l_cor``
        (FedCP2-QQ). An agent with ``local_ranks[j] > n_j`` (FedCP-QQ) or
        ``>= n_j`` (FedCP2-QQ, level 1) sends the top of the range, 1.0, without
        reading its data.
    server_rank : int or None
        ``k``: the server keeps the ``k``-th smallest message (None if infeasible).
    table_level : float
        Level of the coverage-table search: ``1 - alpha`` or
        ``(1 - alpha) / (1 - gamma alpha)``.
    table_coverage : float or None
        ``M`` at ``(table_ranks, server_rank)`` (Theorem 3.2 / Appendix A.1).
    coverage_lower_bound : float
        Guaranteed marginal coverage: ``table_coverage`` (Theorem 3.2) or
        ``(1 - gamma alpha) table_coverage`` (proof of Theorem 4.1); at least
        ``1 - alpha`` when feasible.
    coverage_upper_bound : float or None
        Exact coverage for continuous scores (FedCP-QQ, Theorem 3.2); add the largest
        atom of the score distribution otherwise. None for FedCP2-QQ.
    epsilon, n_bins, gamma : float, int, float or None
        Privacy parameters of FedCP2-QQ (None for FedCP-QQ).
    rank_correction : int or None
        ``l_cor`` of Eq. (10).
    local_levels : tuple of float or None
        ``q_j = max((l_j + l_cor) / n_j, 1/2)`` of each agent (FedCP2-QQ).
    feasible : bool
        False when no rank pair certifies the level; the threshold is then the top of
        the range and no agent reads its data.
    reason : str
        Why the plan is infeasible, or empty.
    """

    protocol: str
    version: int
    alpha: float
    agent_sizes: tuple[int, ...]
    table_ranks: tuple[int, ...]
    local_ranks: tuple[int, ...]
    server_rank: int | None
    table_level: float
    table_coverage: float | None
    coverage_lower_bound: float
    coverage_upper_bound: float | None
    epsilon: float | None = None
    n_bins: int | None = None
    gamma: float | None = None
    rank_correction: int | None = None
    local_levels: tuple[float, ...] | None = None
    feasible: bool = True
    reason: str = ""

    @property
    def n_agents(self) -> int:
        """Number of agents ``m``."""
        return len(self.agent_sizes)

    @property
    def private(self) -> bool:
        """Whether agents release epsilon-local-DP messages."""
        return self.protocol == FEDCP2_QQ

    def sends_top(self, agent: int) -> bool:
        """Whether ``agent``'s message is the top of the range, chosen without its data."""
        rank, size = self.local_ranks[agent], self.agent_sizes[agent]
        return rank >= size if self.private else rank > size

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable representation (tuples become lists)."""
        out = asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FederatedPlan:
        """Rebuild a plan from :meth:`to_dict` output (e.g. after ``json.loads``).

        Raises
        ------
        ValueError
            If the protocol or version is unknown or fields are missing.
        """
        if not isinstance(data, dict):
            raise ValueError(f"A plan must be a dict; got {type(data).__name__}.")
        if data.get("protocol") not in (FEDCP_QQ, FEDCP2_QQ):
            raise ValueError(f"Unknown protocol {data.get('protocol')!r} in plan.")
        if data.get("version") != PROTOCOL_VERSION:
            raise ValueError(
                f"Plan version {data.get('version')!r} differs from this library's "
                f"protocol version {PROTOCOL_VERSION}."
            )
        names = set(cls.__dataclass_fields__)
        missing = names - set(data)
        unknown = set(data) - names
        if missing or unknown:
            raise ValueError(
                f"Plan fields do not match: missing {sorted(missing)}, unknown {sorted(unknown)}."
            )
        values = {
            key: tuple(value) if isinstance(value, list) else value for key, value in data.items()
        }
        return cls(**values)


def _check_sizes(agent_sizes) -> tuple[int, ...]:
    sizes = tuple(agent_sizes)
    if len(sizes) < 2:
        raise ValueError(
            f"Federated calibration needs at least two agents; got {len(sizes)} "
            f"(agent_sizes={list(sizes)})."
        )
    bad = [s for s in sizes if not isinstance(s, numbers.Integral) or isinstance(s, bool) or s < 1]
    if bad:
        raise ValueError(f"agent_sizes must be positive integers; got {bad[:5]}.")
    return tuple(int(s) for s in sizes)


def check_private_parameters(epsilon, n_bins, gamma) -> tuple[float, int, float | None]:
    """Validate FedCP2-QQ's ``epsilon``, ``n_bins`` and ``gamma`` (None for "auto")."""
    return check_positive_finite(epsilon, "epsilon"), _check_bins(n_bins), _check_gamma(gamma)


def _check_bins(n_bins) -> int:
    if not isinstance(n_bins, numbers.Integral) or isinstance(n_bins, bool) or n_bins < 2:
        raise ValueError(f"n_bins must be an integer >= 2; got {n_bins!r}.")
    return int(n_bins)


def _check_gamma(gamma) -> float | None:
    if isinstance(gamma, str) and gamma == "auto":
        return None
    return check_in_open_interval(gamma, "gamma")


def make_plan(agent_sizes, alpha: float, *, epsilon=None, n_bins=100, gamma="auto"):
    """The server's plan for FedCP-QQ (``epsilon=None``) or FedCP2-QQ.

    Parameters
    ----------
    agent_sizes : sequence of int
        Public calibration size of each agent (at least two agents).
    alpha : float
        Target miscoverage in (0, 1).
    epsilon : float or None, default=None
        Local privacy budget of each agent's message; None for the non-private
        FedCP-QQ.
    n_bins : int, default=100
        Number ``B`` of uniform bins on [0, 1] (FedCP2-QQ).
    gamma : float or "auto", default="auto"
        Share of ``alpha`` given to the privacy noise (FedCP2-QQ), in (0, 1).

    Returns
    -------
    FederatedPlan
        Cached: the same public inputs give the same plan object.
    """
    sizes = _check_sizes(agent_sizes)
    alpha = check_alpha(alpha)
    if epsilon is None:
        return _plan_qq(sizes, alpha)
    return _plan_qq2(sizes, alpha, *check_private_parameters(epsilon, n_bins, gamma))


def rank_correction(epsilon: float, n_bins: int, gamma: float, alpha: float, n_agents: int):
    """``l_cor = ceil(2/eps log(B / (1 - (1 - gamma alpha)^(1/m))))`` (paper 004 Eq. (10)).

    ``1 - (1 - gamma alpha)^(1/m)`` is computed as ``-expm1(log1p(-gamma alpha) / m)``.
    """
    delta = -math.expm1(math.log1p(-gamma * alpha) / n_agents)
    return math.ceil(2.0 / epsilon * math.log(n_bins / delta))


def _table(sizes: tuple[int, ...], level: float, *, alpha: float | None = None):
    """Non-private ranks ``(l_j)``, server rank and coverage at ``level``, or None.

    Equal sizes: the optimal pair of Eq. (6). Unequal sizes: Appendix A.1 ranks
    ``ceil((n_j + 1) level)``; with ``alpha`` given (``level = 1 - alpha``) they are
    ``ceil((n_j + 1)(1 - alpha))`` computed without rounding ``1 - alpha``.
    """
    if len(set(sizes)) == 1:
        orders = qq_orders(len(sizes), sizes[0], level)
        if orders is None:
            return None
        return (orders.local_rank,) * len(sizes), orders.server_rank, orders.coverage
    if alpha is not None:
        ranks = tuple(split_conformal_rank(n, alpha) for n in sizes)
    else:
        ranks = tuple(conformal_rank(n, level) for n in sizes)
    found = unequal_server_rank(sizes, ranks, level)
    if found is None:
        return None
    return ranks, found[0], found[1]


def _infeasible_plan(protocol: str, sizes, alpha: float, reason: str, **private) -> FederatedPlan:
    """The plan of an unreachable level (``feasible=False``, ``reason`` says why)."""
    return FederatedPlan(
        protocol=protocol,
        version=PROTOCOL_VERSION,
        alpha=alpha,
        agent_sizes=sizes,
        table_ranks=(),
        local_ranks=(),
        server_rank=None,
        table_level=1.0 - alpha,
        table_coverage=None,
        coverage_lower_bound=1.0,
        coverage_upper_bound=1.0,
        feasible=False,
        reason=reason,
        **private,
    )


@lru_cache(maxsize=256)
def _plan_qq(sizes: tuple[int, ...], alpha: float) -> FederatedPlan:
    level = 1.0 - alpha
    table = _table(sizes, level, alpha=alpha)
    if table is None:
        return _infeasible_plan(
            FEDCP_QQ,
            sizes,
            alpha,
            f"no quantile-of-quantiles ranks reach coverage 1 - alpha = {level:g} "
            f"with agent sizes {_describe(sizes)}: more agents or larger local "
            "calibration sets are needed.",
        )
    ranks, k, coverage = table
    return FederatedPlan(
        protocol=FEDCP_QQ,
        version=PROTOCOL_VERSION,
        alpha=alpha,
        agent_sizes=sizes,
        table_ranks=ranks,
        local_ranks=ranks,
        server_rank=k,
        table_level=level,
        table_coverage=coverage,
        coverage_lower_bound=coverage,
        coverage_upper_bound=coverage,
    )


def _reachable(n_agents: int, n_per_agent: int, max_rank: int, level: float) -> bool:
    """Whether some pair with ``l <= max_rank`` reaches ``level`` (``M`` is monotone)."""
    return max_rank >= 1 and float(qq_coverage(max_rank, n_agents, n_agents, n_per_agent)) >= level


def _corrected_coverage(sizes, ranks, k, corrected) -> float:
    """``M`` at the corrected ranks, the score of Sec. 4's choice of ``gamma``."""
    if len(set(sizes)) == 1:
        return float(qq_coverage(corrected[0], k, len(sizes), sizes[0]))
    finite = tuple(c if c < n else n + 1 for c, n in zip(corrected, sizes, strict=True))
    return float(unequal_coverage_column(sizes, finite)[k - 1])


@lru_cache(maxsize=256)
def _plan_qq2(sizes, alpha, epsilon, n_bins, gamma) -> FederatedPlan:
    m = len(sizes)
    best = None
    corrections = []
    for candidate in GAMMA_GRID if gamma is None else (gamma,):
        correction = rank_correction(epsilon, n_bins, candidate, alpha, m)
        level = (1.0 - alpha) / (1.0 - candidate * alpha)
        corrections.append(correction)
        if correction >= max(sizes):  # l_j + l_cor > n_j for every agent
            continue
        if len(set(sizes)) == 1 and not _reachable(m, sizes[0], sizes[0] - 1 - correction, level):
            continue  # l_gamma would exceed n - 1 - l_cor: skip the full search
        table = _table(sizes, level)
        if table is None:
            continue
        ranks, k, coverage = table
        corrected = tuple(r + correction for r in ranks)
        releasing = sum(c < n for c, n in zip(corrected, sizes, strict=True))
        if releasing < k:
            continue
        score = _corrected_coverage(sizes, ranks, k, corrected)
        if best is None or score < best[0]:
            best = (score, candidate, correction, level, ranks, corrected, k, coverage)
    if best is None:
        return _infeasible_plan(
            FEDCP2_QQ,
            sizes,
            alpha,
            _infeasible_private_reason(sizes, alpha, epsilon, n_bins, min(corrections)),
            epsilon=epsilon,
            n_bins=n_bins,
            gamma=gamma,
        )
    _, chosen, correction, level, ranks, corrected, k, coverage = best
    return FederatedPlan(
        protocol=FEDCP2_QQ,
        version=PROTOCOL_VERSION,
        alpha=alpha,
        agent_sizes=sizes,
        table_ranks=ranks,
        local_ranks=corrected,
        server_rank=k,
        table_level=level,
        table_coverage=coverage,
        coverage_lower_bound=(1.0 - chosen * alpha) * coverage,
        coverage_upper_bound=None,
        epsilon=epsilon,
        n_bins=n_bins,
        gamma=chosen,
        rank_correction=correction,
        local_levels=tuple(max(c / n, 0.5) for c, n in zip(corrected, sizes, strict=True)),
    )


def _describe(sizes: tuple[int, ...]) -> str:
    if len(set(sizes)) == 1:
        return f"m = {len(sizes)} agents x n = {sizes[0]}"
    return f"m = {len(sizes)} agents, n_j in [{min(sizes)}, {max(sizes)}]"


def _infeasible_private_reason(sizes, alpha, epsilon, n_bins, smallest) -> str:
    return (
        f"with {_describe(sizes)}, epsilon = {epsilon:g} and {n_bins} bins, the privacy "
        f"correction l_cor (at least {smallest} for the gamma values tried) added to the "
        "rank l_gamma needed for coverage (1 - alpha)/(1 - gamma alpha) leaves fewer than "
        f"k_gamma agents with a level q_j < 1 (alpha = {alpha:g}): a larger epsilon, fewer "
        "bins or larger local calibration sets are needed."
    )


def even_sizes(n_samples: int, n_agents: int) -> tuple[int, ...]:
    """``n_samples`` spread over ``n_agents`` as evenly as possible (sizes differ by 1)."""
    base, extra = divmod(int(n_samples), int(n_agents))
    return tuple(np.where(np.arange(n_agents) < extra, base + 1, base).tolist())
