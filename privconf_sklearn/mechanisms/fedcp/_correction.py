"""How far above its target rank a FedCP2-QQ agent's private quantile must aim.

Humbert, Le Bars, Bellet and Arlot (ICML 2023), Theorem 4.1: the coverage proof needs
every agent's private message ``Q_j`` to reach the ``l_j``-th smallest of its
(discretised) scores with probability at least ``1 - delta``,
``delta = 1 - (1 - gamma alpha)^(1/m)``, so the agent aims ``c_j`` ranks higher.

**Tight scaling** (the default; exponent ``-epsilon max((1 - q) b_e, q a_e)`` of
:func:`~privconf_sklearn.mechanisms.expon_q.quantile_log_probabilities`, with the strict
counts ``b_e = #{[s] < e}``, ``a_e = #{[s] > e}`` of the ``n`` discretised scores).
Let ``r = l + c`` and ``q = r / n``. The edge ``e*`` of the ``r``-th smallest
discretised score has ``b <= r - 1`` and ``a <= n - r``, so its exponent is at most
``epsilon max((1 - q)(r - 1), q (n - r)) = epsilon n q (1 - q)``. An edge ``e`` with
fewer than ``l`` discretised scores at or below it has ``a_e >= n - l + 1``, so its
exponent is at least ``epsilon q (n - l + 1)``. There are at most ``B - 1`` such edges
(``e*`` is not one), each at most ``exp(-epsilon q (n - l + 1 - n (1 - q)))`` times as
likely as ``e*``, hence

``P(#{[s] <= Q} <= l - 1) <= (B - 1) exp(-epsilon q (c + 1))``,

and ``c = l_cor`` is the smallest integer with ``epsilon q (c + 1) >= log((B - 1) /
delta)``, ``q = (l + c) / n`` (:func:`tight_correction`). ``#{[s] <= Q} >= l`` means
``Q >= [s]_(l) >= s_(l)``. Nothing requires ``q >= 1/2`` (the paper's Lemma C.4 does,
for its scaling), and ``q = 1`` is allowed: the exponent ``epsilon a_e`` is then still
epsilon-DP. The correction is about half the paper's at ``q`` near 1.

**Paper scaling** (``exp(-epsilon w / (2 Delta_q))``, their Algorithm 2): Eq. (10),
``l_cor = ceil(2 / epsilon log(B / delta))``, ``q = max((l + l_cor) / n, 1/2) < 1``
(:func:`paper_correction`).
"""

from __future__ import annotations

import math
import sys

__all__ = [
    "agent_failure_probability",
    "largest_releasable_rank",
    "paper_correction",
    "tight_correction",
    "tight_level",
]

#: Relative safety margin on the floating-point comparisons of the proofs' conditions.
_MARGIN = 1e-12

#: A correction this large exceeds every agent's size (at most 10^9): none can release.
_UNREACHABLE_CORRECTION = 2.0**53


def agent_failure_probability(gamma: float, alpha: float, n_agents: int) -> float:
    """``delta = 1 - (1 - gamma alpha)^(1/m)``, rounded down (never above the exact value).

    Computed as ``-expm1(log1p(-gamma alpha) / m)`` and lowered by a relative 1e-12, so
    that ``(1 - delta)^m >= 1 - gamma alpha`` holds despite rounding. That holds while
    every intermediate is a normal float; below the smallest normal float (a vanishing
    ``gamma alpha``) subnormal rounding is coarser than the margin, and the result is
    0.0: no failure probability is allowed, so no agent can release (callers check).
    """
    delta = -math.expm1(math.log1p(-gamma * alpha) / n_agents)
    return delta * (1.0 - _MARGIN) if delta >= sys.float_info.min else 0.0


def tight_level(local_rank: int, correction: int, n_samples: int) -> float:
    """``q = (l + c) / n``, the level a tight-scaling agent releases at."""
    return (local_rank + correction) / n_samples


def _tight_condition(local_rank: int, correction: int, n_samples: int, epsilon, log_term):
    q = tight_level(local_rank, correction, n_samples)
    return epsilon * q * (correction + 1) >= log_term * (1.0 + _MARGIN)


def tight_correction(
    local_rank: int, n_samples: int, epsilon: float, n_bins: int, delta: float
) -> int | None:
    """Smallest ``c >= 0`` with ``epsilon q (c + 1) >= log((B - 1) / delta)``, ``q = (l+c)/n``.

    See the module docstring for the proof. The condition is monotone in ``c``; its
    root comes from the quadratic ``(l + c)(c + 1) = n log((B - 1)/delta) / epsilon``.

    Parameters
    ----------
    local_rank : int
        ``l``, the rank the non-private estimator would use.
    n_samples : int
        ``n``, the agent's number of scores.
    epsilon : float
        The agent's privacy budget.
    n_bins : int
        ``B >= 2``.
    delta : float
        Failure probability allowed to the agent.

    Returns
    -------
    int or None
        ``c``, or None when even ``c = n - l`` (``q = 1``) is not enough: the agent then
        sends the top of the range without reading its data.
    """
    log_term = math.log((n_bins - 1) / delta)
    room = n_samples - local_rank
    if room < 0 or not _tight_condition(local_rank, room, n_samples, epsilon, log_term):
        return None
    root = 0.5 * (
        -(local_rank + 1) + math.sqrt((local_rank - 1) ** 2 + 4.0 * n_samples * log_term / epsilon)
    )
    c = min(max(math.ceil(root), 0), room)
    while c > 0 and _tight_condition(local_rank, c - 1, n_samples, epsilon, log_term):
        c -= 1
    while not _tight_condition(local_rank, c, n_samples, epsilon, log_term):
        c += 1
    return c


def paper_correction(epsilon: float, n_bins: int, delta: float) -> int | None:
    """``l_cor = ceil(2/epsilon log(B / delta))``, Eq. (10) of Humbert et al. (2023).

    None when it exceeds ``2^53`` (every agent's size), e.g. for a vanishing epsilon.
    """
    correction = 2.0 / epsilon * math.log(n_bins / delta)
    return math.ceil(correction) if correction < _UNREACHABLE_CORRECTION else None


def largest_releasable_rank(
    n_samples: int, epsilon: float, n_bins: int, delta: float, scaling: str
) -> int:
    """Largest ``l`` whose corrected rank stays within the agent's data (0 if none).

    Tight: ``c(l)`` exists, i.e. ``epsilon (n - l + 1) >= log((B - 1)/delta)`` (the
    condition at ``q = 1``). Paper: ``l + l_cor <= n - 1`` (the level must stay below 1).
    """
    if scaling == "paper":
        correction = paper_correction(epsilon, n_bins, delta)
        return 0 if correction is None else max(n_samples - 1 - correction, 0)
    # Releasable iff c = n - l (q = 1 exactly) satisfies the condition:
    # epsilon (n - l + 1) >= log((B - 1)/delta) (1 + margin), and that set of l is
    # {1..l_max} (a releasable l - 1 needs at most one more correction step).
    log_term = math.log((n_bins - 1) / delta)
    estimate = n_samples + 1 - log_term * (1.0 + _MARGIN) / epsilon  # -inf: none
    rank = math.floor(min(max(estimate, 0.0), n_samples))
    while rank > 0 and not _tight_condition(rank, n_samples - rank, n_samples, epsilon, log_term):
        rank -= 1
    while rank < n_samples and _tight_condition(
        rank + 1, n_samples - rank - 1, n_samples, epsilon, log_term
    ):
        rank += 1
    return rank
