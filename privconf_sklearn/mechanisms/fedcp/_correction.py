"""How far above its target rank a FedCP2-QQ agent aims: one strategy per scaling.

Humbert, Le Bars, Bellet and Arlot (ICML 2023), Theorem 4.1: each releasing agent's
message must reach the ``l``-th smallest of its discretised scores with probability at
least ``1 - delta``, so it aims ``c`` ranks higher, at level ``q``. Each scaling of the
exponential mechanism is one :class:`AgentScaling`; proofs in the user guide's
FedCP2-QQ page.
"""

from __future__ import annotations

import math
import sys
from abc import ABC, abstractmethod

#: Relative safety margin on the floating-point comparisons of the proofs' conditions.
_MARGIN = 1e-12

#: A correction this large exceeds every agent's size (at most 10^9): none can release.
_UNREACHABLE_CORRECTION = 2.0**53


def agent_failure_probability(gamma: float, alpha: float, n_agents: int) -> float:
    """``delta = 1 - (1 - gamma alpha)^(1/m)`` (Theorem 4.1), lowered by a relative 1e-12.

    So ``(1 - delta)^m >= 1 - gamma alpha`` despite rounding; 0.0 (no agent can release)
    below the smallest normal float.
    """
    delta = -math.expm1(math.log1p(-gamma * alpha) / n_agents)
    return delta * (1.0 - _MARGIN) if delta >= sys.float_info.min else 0.0


class AgentScaling(ABC):
    """The exponential-mechanism scaling of FedCP2-QQ agents and its rank correction.

    A new scaling is one more subclass registered in :data:`AGENT_SCALINGS`.
    """

    #: The ``scaling`` value that selects this strategy.
    name: str

    #: The levels :meth:`valid_level` accepts, for error messages.
    levels: str

    @abstractmethod
    def correction(
        self, rank: int, n_samples: int, epsilon: float, n_bins: int, delta: float
    ) -> int | None:
        """Smallest ``c >= 0`` with ``P(message >= l-th smallest score) >= 1 - delta``.

        None when no ``c`` keeps the agent within its ``n`` scores: it then sends the
        top of the range without reading its data.
        """

    @abstractmethod
    def level(self, rank: int, correction: int, n_samples: int) -> float:
        """The level ``q`` the agent releases at, aiming at rank ``l + c``."""

    @abstractmethod
    def largest_rank(self, n_samples: int, epsilon: float, n_bins: int, delta: float) -> int:
        """Largest ``l`` whose :meth:`correction` exists (0 if none); every smaller one has one."""

    @abstractmethod
    def slopes(self, q: float, epsilon: float) -> tuple[float, float]:
        """Growth of the exponent per score below and per score above an edge."""

    @abstractmethod
    def valid_level(self, q: float) -> bool:
        """Whether ``q`` is a level this scaling's mechanism is epsilon-DP at."""


class TightScaling(AgentScaling):
    """Exponent ``-epsilon max((1 - q) b_e, q a_e)``; ``P(fail) <= (B - 1) e^{-eps q (c + 1)}``.

    ``c`` is the smallest with ``epsilon q (c + 1) >= log((B - 1) / delta)``, ``q = (l + c) / n``
    (``q = 1`` allowed: the exponent ``epsilon a_e`` is epsilon-DP).
    """

    name = "tight"
    levels = "(0, 1]"

    @staticmethod
    def _reaches(rank, correction, n_samples, epsilon, log_term) -> bool:
        q = (rank + correction) / n_samples
        return epsilon * q * (correction + 1) >= log_term * (1.0 + _MARGIN)

    def correction(self, rank, n_samples, epsilon, n_bins, delta):
        # Monotone in c: start at the root of (l + c)(c + 1) = n log((B - 1)/delta) / epsilon.
        log_term = math.log((n_bins - 1) / delta)
        room = n_samples - rank
        if room < 0 or not self._reaches(rank, room, n_samples, epsilon, log_term):
            return None
        discriminant = (rank - 1) ** 2 + 4.0 * n_samples * log_term / epsilon
        root = 0.5 * (-(rank + 1) + math.sqrt(discriminant))
        c = min(max(math.ceil(root), 0), room)
        while c > 0 and self._reaches(rank, c - 1, n_samples, epsilon, log_term):
            c -= 1
        while not self._reaches(rank, c, n_samples, epsilon, log_term):
            c += 1
        return c

    def level(self, rank, correction, n_samples):
        return (rank + correction) / n_samples

    def largest_rank(self, n_samples, epsilon, n_bins, delta):
        # The largest l with epsilon (n - l + 1) >= log((B - 1)/delta), i.e. c = n - l.
        log_term = math.log((n_bins - 1) / delta)
        estimate = n_samples + 1 - log_term * (1.0 + _MARGIN) / epsilon  # -inf: none
        rank = math.floor(min(max(estimate, 0.0), n_samples))
        while rank > 0 and not self._reaches(rank, n_samples - rank, n_samples, epsilon, log_term):
            rank -= 1
        while rank < n_samples and self._reaches(
            rank + 1, n_samples - rank - 1, n_samples, epsilon, log_term
        ):
            rank += 1
        return rank

    def slopes(self, q, epsilon):
        return epsilon * (1.0 - q), epsilon * q

    def valid_level(self, q):
        return 0.0 < q <= 1.0


class PaperScaling(AgentScaling):
    """Humbert et al. (2023), Algorithm 2 (``exp(-epsilon w / (2 Delta_q))``) and Eq. (10).

    ``c = ceil(2 / epsilon log(B / delta))`` if ``l + c <= n - 1``, at level
    ``q = max((l + c) / n, 1/2) < 1`` (the sensitivity needs ``q < 1``).
    """

    name = "paper"
    levels = "[0.5, 1)"

    def correction(self, rank, n_samples, epsilon, n_bins, delta):
        correction = 2.0 / epsilon * math.log(n_bins / delta)
        if correction >= _UNREACHABLE_CORRECTION or rank + math.ceil(correction) > n_samples - 1:
            return None
        return math.ceil(correction)

    def level(self, rank, correction, n_samples):
        return max((rank + correction) / n_samples, 0.5)

    def largest_rank(self, n_samples, epsilon, n_bins, delta):
        correction = 2.0 / epsilon * math.log(n_bins / delta)
        if correction >= _UNREACHABLE_CORRECTION:
            return 0
        return max(n_samples - 1 - math.ceil(correction), 0)

    def slopes(self, q, epsilon):
        # epsilon / (2 Delta_q q) and epsilon / (2 Delta_q (1 - q)).
        sensitivity = max(1.0 / q, 1.0 / (1.0 - q))
        return epsilon / (2 * sensitivity * q), epsilon / (2 * sensitivity * (1 - q))

    def valid_level(self, q):
        return 0.5 <= q < 1.0


#: The agents' scalings by name, the default first.
SCALINGS: dict[str, AgentScaling] = {s.name: s for s in (TightScaling(), PaperScaling())}
