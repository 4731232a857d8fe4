"""The privacy statement every release carries: notion, parameters, adjacency."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

__all__ = ["PrivacyGuarantee", "PrivacyNotion"]

PrivacyNotion = Literal["pure", "zcdp", "local", "none"]


@dataclass(frozen=True)
class PrivacyGuarantee:
    """What one calibration release promises about the calibration set.

    Parameters
    ----------
    notion : {"pure", "zcdp", "local", "none"}
        ``"pure"``: epsilon-DP of the central calibration set. ``"zcdp"``: rho-zero
        concentrated DP, reported with an (epsilon, delta) conversion. ``"local"``:
        epsilon-local DP of each agent's message (federated mechanisms). ``"none"``: no
        privacy (epsilon is infinite).
    epsilon : float
        Privacy loss bound (``inf`` for ``"none"``, ``0`` when no data was touched).
    delta : float, default=0.0
        Failure probability of the (epsilon, delta) statement (0 for pure DP).
    rho : float or None, default=None
        zCDP parameter, for ``notion="zcdp"``.
    adjacency : str, default="replace-one"
        Neighbouring relation the statement is made for. The papers treat the
        calibration size n as public; see the user guide.
    holds : bool, default=True
        False when an assumption of the guarantee was broken (e.g. regression score
        bounds taken from the private data); the numbers are then not a guarantee.
    description : str, default=""
        One sentence an auditor can read.
    """

    notion: PrivacyNotion
    epsilon: float
    delta: float = 0.0
    rho: float | None = None
    adjacency: str = "replace-one"
    holds: bool = True
    description: str = ""

    @classmethod
    def pure(
        cls, epsilon: float, *, adjacency: str = "replace-one", description: str = ""
    ) -> PrivacyGuarantee:
        """Pure epsilon-DP."""
        return cls("pure", float(epsilon), 0.0, None, adjacency, True, description)

    @classmethod
    def no_privacy(cls, description: str = "Non-private calibration.") -> PrivacyGuarantee:
        """No privacy protection: infinite epsilon."""
        return cls("none", math.inf, 0.0, None, "replace-one", True, description)

    @classmethod
    def untouched(cls, description: str) -> PrivacyGuarantee:
        """The data were not read: zero privacy loss."""
        return cls("pure", 0.0, 0.0, None, "replace-one", True, description)

    @property
    def is_private(self) -> bool:
        """True when the release has a finite privacy loss that holds."""
        return self.holds and math.isfinite(self.epsilon)

    def accountant_spend(self) -> tuple[float, float]:
        """The (epsilon, delta) to record in a diffprivlib ``BudgetAccountant``."""
        return float(self.epsilon), float(self.delta)

    def broken(self, reason: str) -> PrivacyGuarantee:
        """A copy marked as not holding, with the reason appended."""
        return replace(
            self, holds=False, description=f"{self.description} NOT HOLDING: {reason}".strip()
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python representation."""
        return asdict(self)
