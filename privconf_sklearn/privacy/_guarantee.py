"""The privacy statement every release carries: notion, parameters, adjacency."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from ._conversions import zcdp_epsilon

__all__ = [
    "ADJACENCIES",
    "ADJACENCY_STATEMENTS",
    "Adjacency",
    "PrivacyGuarantee",
    "PrivacyNotion",
]

PrivacyNotion = Literal["pure", "zcdp", "local", "none"]

#: A neighbouring relation a user can state: datasets that differ by replacing one
#: record, or by adding or removing one.
Adjacency = Literal["replace-one", "add/remove"]

#: The relations of :data:`Adjacency`, in order.
ADJACENCIES: tuple[str, ...] = ("replace-one", "add/remove")

#: The ``adjacency`` value of a guarantee that holds under both relations.
_BOTH = "replace-one and add/remove"

#: Every value :attr:`PrivacyGuarantee.adjacency` can take.
ADJACENCY_STATEMENTS: tuple[str, ...] = (*ADJACENCIES, _BOTH)


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
    adjacency : {"replace-one", "add/remove", "replace-one and add/remove"}, \
            default="replace-one"
        Neighbouring relation(s) the statement is made for. The papers treat the
        calibration size n as public; see the user guide. :meth:`under` restates the
        guarantee for the relation a user names.
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
    def reads_data(self) -> bool:
        """False only for the zero loss of :meth:`untouched` (pure, epsilon = delta = 0).

        A zCDP statement whose (epsilon, delta) conversion rounds to epsilon = 0 (e.g.
        rho = 1e-6 at delta = 1e-3) still reads data: it has rho > 0 and delta > 0.
        """
        return not (self.notion == "pure" and self.epsilon == 0.0 and self.delta == 0.0)

    @property
    def is_private(self) -> bool:
        """True when the release has a finite privacy loss that holds."""
        return self.holds and math.isfinite(self.epsilon)

    @property
    def adjacencies(self) -> tuple[str, ...]:
        """The relations of :data:`ADJACENCIES` the statement holds under as given."""
        if self.adjacency == _BOTH:
            return ADJACENCIES
        if self.adjacency not in ADJACENCIES:
            raise ValueError(
                f"adjacency must be one of {[*ADJACENCIES, _BOTH]}; got {self.adjacency!r}."
            )
        return (self.adjacency,)

    def under(self, adjacency: str) -> PrivacyGuarantee:
        """The guarantee restated for the neighbouring relation ``adjacency``.

        - If it holds under both relations, itself: the stronger statement is kept, so a
          card checked against a contract under the other relation still finds it.
        - If it already holds under ``adjacency`` (or reads no data,
          :attr:`reads_data`, or promises no privacy), the same numbers with
          ``adjacency`` recorded.
        - Add/remove to replace-one: replacing a record is removing it and adding
          another, so by group privacy for two steps a pure or local epsilon-DP
          statement becomes 2 epsilon-DP, and a rho-zCDP one 4 rho-zCDP (Bun and
          Steinke 2016, Proposition 1.9), reported with the generic conversion to
          (epsilon, delta) at the same delta (Canonne, Kamath and Steinke 2020).
        - Replace-one to add/remove is not implied (with ``n`` public the relation is
          not even defined for the mechanism): the result is marked as not holding,
          with infinite epsilon.

        Parameters
        ----------
        adjacency : {"replace-one", "add/remove"}
            The relation the user states.

        Returns
        -------
        PrivacyGuarantee
        """
        if adjacency not in ADJACENCIES:
            raise ValueError(f"adjacency must be one of {list(ADJACENCIES)}; got {adjacency!r}.")
        if adjacency in self.adjacencies and self.adjacency == _BOTH:
            return self  # it holds under both: keep the stronger statement
        if adjacency in self.adjacencies or self.notion == "none" or not self.reads_data:
            return replace(self, adjacency=adjacency)
        if adjacency == "add/remove":
            return replace(
                self,
                adjacency=adjacency,
                epsilon=math.inf,
                holds=False,
                description=f"{self.description} NOT HOLDING under add/remove adjacency: "
                "the statement is for replace-one neighbours only.".strip(),
            )
        note = f"{self.description} Stated under replace-one by group privacy (2 steps)."
        if self.notion == "zcdp":
            rho = 4.0 * float(self.rho if self.rho is not None else 0.0)
            return replace(
                self,
                adjacency=adjacency,
                rho=rho,
                epsilon=zcdp_epsilon(rho, self.delta),
                description=note.strip(),
            )
        return replace(
            self, adjacency=adjacency, epsilon=2.0 * self.epsilon, description=note.strip()
        )

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
