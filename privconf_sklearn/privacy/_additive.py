"""What every additive-noise mechanism on an l1-bounded query vector shares."""

from __future__ import annotations

from numbers import Real

from .._param_validation import Interval, StrOptions, validate_params
from ._guarantee import ADJACENCY_STATEMENTS, PrivacyGuarantee

__all__ = ["L1NoiseMechanism"]


class L1NoiseMechanism:
    """The parameters, ``repr`` and guarantee of a noise-adding mechanism.

    Noise of scale ``l1_sensitivity / epsilon`` (the Laplace mechanism, continuous or
    discrete) on a query vector of bounded l1 sensitivity.

    Subclasses define the noise (``scale``, sampling, distribution functions) and
    :meth:`_noise_description`.
    """

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "l1_sensitivity": [Interval(Real, 0, None, closed="neither")],
        "adjacency": [StrOptions(set(ADJACENCY_STATEMENTS))],
    }

    def __init__(
        self,
        epsilon: float,
        l1_sensitivity: float,
        *,
        adjacency: str = "replace-one and add/remove",
    ):
        checked = validate_params(
            self._parameter_constraints,
            {"epsilon": epsilon, "l1_sensitivity": l1_sensitivity, "adjacency": adjacency},
            type(self).__name__,
        )
        self.epsilon: float = checked["epsilon"]
        self.l1_sensitivity: float = checked["l1_sensitivity"]
        self.adjacency: str = checked["adjacency"]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(epsilon={self.epsilon!r}, l1_sensitivity="
            f"{self.l1_sensitivity!r}, adjacency={self.adjacency!r})"
        )

    def _noise_description(self) -> str:
        raise NotImplementedError

    def privacy_guarantee(self, description: str = "") -> PrivacyGuarantee:
        """Pure epsilon-DP under :attr:`adjacency`."""
        return PrivacyGuarantee.pure(
            self.epsilon,
            adjacency=self.adjacency,
            description=description or self._noise_description(),
        )
