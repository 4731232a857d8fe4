"""Mondrian (group-conditional) private calibration: one threshold per group.

``PrivateConformalClassifier(mondrian="class")`` calibrates one threshold per label,
``mondrian=callable`` one per group id ``callable(X)`` returns (a public function of the
features). Every group's threshold is released by a copy of the estimator's mechanism on
that group's rows, so each group's sets cover with at least the mechanism's bound *within
the group*. This module holds the pieces the estimators use:

- :class:`PrivateGroupSizes`: release the group sizes privately instead of treating them
  as public;
- :func:`mondrian_privacy`: the composed privacy guarantee of all releases, exactly, for
  add/remove and replace-one adjacency, from how many groups read rows
  (``planned_groups_read`` before the data are read, ``groups_read`` after);
- :class:`MondrianCalibration` and :class:`GroupCalibration`: the record kept as
  ``calibration_``;
- :func:`calibrate_groups`: the per-group releases;
- :func:`forecast_groups`: the data-free forecast of every group's release, from
  planned group sizes.

The user guide (Mondrian calibration) proves the privacy and coverage statements.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable
from dataclasses import asdict, dataclass, field
from numbers import Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, clone

from ._param_validation import Interval, InvalidParameterError, validate_params
from ._random import NoiseSource
from ._warnings import warn_at_caller
from .mechanisms import (
    PCOQS,
    Calibration,
    InfeasibleCalibrationWarning,
    QuantileMechanism,
    UninformativeCalibrationWarning,
    infeasible_calibration,
)
from .privacy import DiscreteLaplaceMechanism, PrivacyGuarantee, gaussian_epsilon, zcdp_epsilon

__all__ = [
    "GroupCalibration",
    "MondrianCalibration",
    "PrivateGroupSizes",
    "UninformativePredictionWarning",
    "UnseenGroupWarning",
    "forecast_groups",
    "mondrian_privacy",
    "private_sizes_coverage_floor",
    "size_grid_floor",
]


class UninformativePredictionWarning(UninformativeCalibrationWarning):
    """Every prediction set returned by one call is full (every interval spans the bounds).

    Raised by ``predict_set`` / ``predict_interval``; it reads only the test inputs,
    so it costs no privacy.
    """


class UnseenGroupWarning(UninformativeCalibrationWarning):
    """Test rows fell in a group without a calibrated threshold: they get the trivial set.

    Prediction sets for such rows hold every label, intervals are as wide as the public
    score bounds allow.
    """


# ------------------------------------------------------------------ group sizes
#: Released sizes are rounded down to this grid: every integer up to 64, then steps of
#: ``floor(v / 64)`` (``g_{j+1} = g_j + floor(g_j / 64)``), so at most 1/64 of a group's
#: rows is dropped and the coverage floor is a minimum over about ``64 ln(n / 64)`` sizes.
_EXACT_GRID_END = 64


def size_grid_floor(value: int) -> int:
    """The largest size of the private-size grid that is at most ``value`` (0 if < 1)."""
    if value < 1:
        return 0
    if value <= _EXACT_GRID_END:
        return int(value)
    size = _EXACT_GRID_END
    while size + size // _EXACT_GRID_END <= value:
        size += size // _EXACT_GRID_END
    return size


def _size_grid(n_max: int) -> list[int]:
    sizes = list(range(1, min(n_max, _EXACT_GRID_END) + 1))
    size = _EXACT_GRID_END
    while True:
        size += size // _EXACT_GRID_END
        if size > n_max:
            return sizes
        sizes.append(size)


def private_sizes_coverage_floor(mechanism: QuantileMechanism, alpha: float, n_max: int) -> float:
    """The smallest marginal coverage bound the mechanism certifies at a grid size <= ``n_max``.

    ``min`` over the sizes ``v`` of the private-size grid in ``[1, n_max]`` at which the
    mechanism's :meth:`~privconf_sklearn.mechanisms.QuantileMechanism.coverage_certificate`
    is feasible, of ``lower_bound * confidence`` (a bound that holds with probability
    ``confidence`` over the noise is, marginally, at least their product); 1 when no
    size is feasible (every release is then the trivial set, which always covers).
    Public quantities only; remembered for the last few mechanisms.
    """
    key = (
        type(mechanism).__module__,
        type(mechanism).__qualname__,
        repr(sorted(mechanism.get_params(deep=False).items())),
        float(alpha),
        int(n_max),
    )
    if key not in _FLOOR_CACHE:
        floor = 1.0
        for size in _size_grid(int(n_max)):
            certificate = mechanism.coverage_certificate(size, alpha)
            if certificate.feasible:
                floor = min(floor, certificate.lower_bound * certificate.confidence)
        if len(_FLOOR_CACHE) >= 64:
            _FLOOR_CACHE.pop(next(iter(_FLOOR_CACHE)))
        _FLOOR_CACHE[key] = floor
    return _FLOOR_CACHE[key]


#: Coverage floors by (mechanism class, parameters, alpha, n_max); public quantities only.
_FLOOR_CACHE: dict[tuple, float] = {}


def forecast_groups(
    mechanism: QuantileMechanism, group_sizes, alpha: float, *, spread: float = 1.0
) -> dict:
    """What a Mondrian calibration would likely release in every group, before any data.

    Every group's threshold is released by the estimator's mechanism on that group's
    rows alone (disjoint rows, each at the mechanism's full budget), so the forecast of
    a group is :meth:`QuantileMechanism.forecast
    <privconf_sklearn.mechanisms.QuantileMechanism.forecast>` at the group's size: its
    certified level, the distribution of its released rank and the probability that its
    release is informative. The sizes are the owner's *planning* numbers (for example
    the expected class counts of the calibration set); nothing here reads data or
    spends privacy, and the result is for the owner's eyes (actual group sizes are
    private unless released by :class:`PrivateGroupSizes`).

    Parameters
    ----------
    mechanism : QuantileMechanism
        A central mechanism, as passed to the estimator.
    group_sizes : mapping of group id to int
        Planned number of calibration rows of each group (at least 1 each).
    alpha : float
        Miscoverage level in (0, 1).
    spread : float, default=1.0
        Share of the public range the idealised scores fill, in (0, 1], as for
        ``forecast``.

    Returns
    -------
    dict
        ``{group id: Forecast}``, in the order of ``group_sizes``.

    Raises
    ------
    InvalidParameterError
        For a mechanism that is not a central quantile mechanism, sizes that are not a
        non-empty mapping, or a bad size, ``alpha`` or ``spread`` (naming the group).
    """
    validate_params(
        {"mechanism": [QuantileMechanism], "group_sizes": [dict]},
        {"mechanism": mechanism, "group_sizes": group_sizes},
        "forecast_groups",
    )
    if mechanism.requires_groups:
        raise InvalidParameterError(
            f"forecast_groups: the 'mechanism' parameter must be a central mechanism; "
            f"{type(mechanism).__name__} is federated (forecast it with its agents' sizes)."
        )
    if not group_sizes:
        raise InvalidParameterError("forecast_groups: the 'group_sizes' parameter is empty.")
    forecasts = {}
    for group, size in group_sizes.items():
        try:
            forecasts[group] = mechanism.forecast(size, alpha, spread=spread)
        except InvalidParameterError as error:
            raise InvalidParameterError(f"forecast_groups, group {group!r}: {error}") from None
    return forecasts


class PrivateGroupSizes(BaseEstimator):
    """Release the Mondrian group sizes privately, with their own budget.

    Pass as ``group_sizes=PrivateGroupSizes(epsilon=...)`` to a conformal estimator with
    ``mondrian`` set. Each group ``g`` gets the noisy lower bound

    ``m_g = grid_floor(min(n, max(0, n_g + Z_g - c)))``,

    with integer noise ``Z_g``, ``P(Z_g = z)`` proportional to ``exp(-epsilon |z|)``
    (:class:`~privconf_sklearn.privacy.DiscreteLaplaceMechanism`, sampled exactly), and
    ``c`` the smallest integer ``>= 0`` with ``P(Z_g > c) <= beta``
    (``P(Z_g > c) = e^{-epsilon (c + 1)} / (1 + e^{-epsilon})``), so that
    ``m_g <= n_g`` with probability at least ``1 - beta``; ``n`` is the (public)
    calibration size and ``grid_floor``
    rounds down to :func:`size_grid_floor`'s grid. The group's mechanism then runs with
    ``n = m_g`` on ``m_g`` of the group's rows drawn uniformly at random (and, in the
    event ``m_g > n_g``, on all of them plus ``m_g - n_g`` scores at the top of the range).

    **Privacy.** The vector of counts has l1 sensitivity 1 under add/remove adjacency,
    so the sizes are ``epsilon``-DP (discrete Laplace mechanism), ``2 epsilon`` under replace-one
    (a row moving between groups changes two counts). See :func:`mondrian_privacy` for
    the composed guarantee.

    **Coverage.** Within each group, coverage is at least
    ``(1 - beta) * private_sizes_coverage_floor(mechanism, alpha, n)``; the user guide
    gives the proof.

    Parameters
    ----------
    epsilon : float
        Budget of the size release, > 0 (pure DP under add/remove adjacency).
    beta : float, default=1e-3
        Probability that a group's released lower bound exceeds its size, in (0, 1).
        The group coverage bound loses the factor ``1 - beta``.
    group_ids : list, tuple or 1-d array, or None, default=None
        The public list of group ids. Required for a ``mondrian`` callable (the set of
        groups present in the calibration data would otherwise be disclosed); for
        ``mondrian="class"`` the groups are the classifier's ``classes_`` and this must
        be None.

    Examples
    --------
    >>> from privconf_sklearn.mondrian import PrivateGroupSizes
    >>> sizes = PrivateGroupSizes(epsilon=0.1)
    >>> sizes.privacy_guarantee().epsilon, sizes.privacy_guarantee().adjacency
    (0.1, 'add/remove')
    >>> sizes.offset()
    62
    """

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0.0, None, closed="neither")],
        "beta": [Interval(Real, 0.0, 1.0, closed="neither")],
        "group_ids": [None, list, tuple, np.ndarray],
    }

    def __init__(self, epsilon: float, *, beta: float = 1e-3, group_ids=None):
        self.epsilon = epsilon
        self.beta = beta
        self.group_ids = group_ids

    def _checked(self) -> dict:
        """The parameters, validated (once per public call; helpers get the result)."""
        return validate_params(
            self._parameter_constraints, self.get_params(deep=False), type(self).__name__
        )

    def privacy_guarantee(self) -> PrivacyGuarantee:
        """Pure epsilon-DP of the released sizes under add/remove adjacency."""
        epsilon = self._checked()["epsilon"]
        return PrivacyGuarantee.pure(
            epsilon,
            adjacency="add/remove",
            description="Discrete Laplace noise of scale 1/epsilon on each group's "
            "calibration size (l1 sensitivity 1 under add/remove), sampled exactly.",
        )

    def offset(self) -> int:
        """``c``: the smallest integer ``>= 0`` with ``P(Z_g > c) <= beta``."""
        checked = self._checked()
        return self._noise(checked).noise_isf(checked["beta"])

    @staticmethod
    def _noise(checked: dict) -> DiscreteLaplaceMechanism:
        return DiscreteLaplaceMechanism(checked["epsilon"], 1, adjacency="add/remove")

    def release(self, counts: np.ndarray, n_samples: int, noise: NoiseSource) -> np.ndarray:
        """The released lower bounds ``m_g`` for the true counts ``n_g`` (see the class)."""
        checked = self._checked()
        mechanism = self._noise(checked)
        noisy = mechanism.randomise(np.asarray(counts, dtype=np.int64), noise)
        lower = np.clip(noisy - mechanism.noise_isf(checked["beta"]), 0, n_samples)
        lower = lower.astype(np.int64)
        return np.array([size_grid_floor(int(v)) for v in lower], dtype=np.int64)


# --------------------------------------------------------------------- privacy
def _compose(parts: list[PrivacyGuarantee], adjacency: str, *, gaussian: bool, description: str):
    """Sequential composition of independent releases, each stated under ``adjacency``.

    Pure parts add their epsilons. With a zCDP part the rhos add (a pure epsilon-DP part
    is ``epsilon^2 / 2``-zCDP, Bun and Steinke 2016, Proposition 1.4) and the total is
    converted at the parts' delta: exactly for Gaussian mechanisms (``mu = sqrt(2 rho)``,
    Dong, Roth and Su 2022), else with Canonne, Kamath and Steinke (2020).
    """
    if not parts:
        return PrivacyGuarantee.untouched(description).under(adjacency)
    if any(part.notion == "none" for part in parts):
        return PrivacyGuarantee.no_privacy(description).under(adjacency)
    holds = all(part.holds for part in parts)
    epsilon = _summed_epsilon(parts, holds)
    if all(part.notion == "pure" for part in parts):
        return PrivacyGuarantee("pure", epsilon, 0.0, None, adjacency, holds, description)
    rho = _summed_rho(parts)
    delta = max(part.delta for part in parts if part.notion == "zcdp")
    if math.isfinite(epsilon):
        all_gaussian = gaussian and all(part.notion == "zcdp" for part in parts)
        epsilon = (
            gaussian_epsilon(math.sqrt(2.0 * rho), delta)
            if all_gaussian
            else zcdp_epsilon(rho, delta)
        )
    return PrivacyGuarantee("zcdp", epsilon, delta, rho, adjacency, holds, description)


def _summed_epsilon(parts: list[PrivacyGuarantee], holds: bool) -> float:
    """The parts' epsilons added up; ``inf`` if one is infinite or does not hold."""
    if not holds or any(math.isinf(part.epsilon) for part in parts):
        return math.inf
    return math.fsum(part.epsilon for part in parts)


def _summed_rho(parts: list[PrivacyGuarantee]) -> float:
    """The parts' zCDP rhos added up, a pure epsilon-DP part counting ``epsilon^2 / 2``."""
    return math.fsum(
        float(part.rho or 0.0) if part.notion == "zcdp" else part.epsilon**2 / 2.0 for part in parts
    )


def _weaker(a: PrivacyGuarantee, b: PrivacyGuarantee) -> PrivacyGuarantee:
    """The weaker of two statements, each for its own class of neighbouring pairs.

    A statement not holding (or infinite) is weakest; then the larger rho (zCDP: its
    conversion at the common delta grows with rho, and a conversion rounding both to
    epsilon = 0 must not pick the smaller rho); then the larger epsilon. Ties: ``a``.
    """

    def weakness(g: PrivacyGuarantee) -> tuple:
        return (not g.is_private, float(g.rho or 0.0), g.epsilon)

    return a if weakness(a) >= weakness(b) else b


def mondrian_privacy(
    mechanism: QuantileMechanism,
    group_sizes,
    adjacency: str,
    *,
    n_groups_read: int = 2,
    n_groups: int = 2,
) -> PrivacyGuarantee:
    """Privacy of a Mondrian calibration: all group releases (and sizes) together.

    Let ``P`` be the mechanism's guarantee, ``P_ro = P.under("replace-one")`` and
    ``P_ar = P.under("add/remove")``; groups are disjoint, so a row touches one group
    (parallel composition), except that under replace-one a replaced row may move
    from one group to another and touch two.

    - Public sizes (``group_sizes="public"``; each group's mechanism uses its size, which
      is disclosed, as the whole calibration size is): add/remove touches one group:
      ``P_ar``. Replace-one within a group: ``P_ro``; moving between groups removes a
      row from one and adds one to another: ``P_ar`` composed with ``P_ar``. The result
      is the worse of the two (pure: ``max(eps_ro, 2 eps_ar)``; zCDP: the larger rho).
    - Private sizes (:class:`PrivateGroupSizes` with budget ``epsilon_s``; each group's
      mechanism runs on a fixed number ``m_g`` of rows, subsampled or padded): adding
      or removing a row changes one count and one group's input by one replacement:
      ``epsilon_s`` composed with ``P_ro``. Replace-one: a row moving between groups
      changes two counts and two groups' inputs: ``2 epsilon_s`` composed with ``P_ro``
      twice.

    Parameters
    ----------
    mechanism : QuantileMechanism
        The mechanism every group's release uses (a copy of it).
    group_sizes : "public" or PrivateGroupSizes
        How group sizes are treated.
    adjacency : {"replace-one", "add/remove"}
        The neighbouring relation to state the guarantee for.
    n_groups_read : int, default=2
        How many group releases read rows, whatever their converted epsilon (a zCDP
        release may convert to epsilon = 0 at its delta and still read its rows; only a
        trivial release, decided from public quantities, reads none): see
        ``planned_groups_read`` and ``groups_read``. Only ``0``, ``1`` and
        ``>= 2`` differ: one row touches at most two groups. The default (2) is the most
        a calibration can cost.
    n_groups : int, default=2
        Number of groups (public). With a single group a replaced row cannot move
        between groups (and the sizes, being the total, do not change).

    Returns
    -------
    PrivacyGuarantee
        Stated under ``adjacency``.

    Examples
    --------
    >>> from privconf_sklearn.mechanisms import ExponQ
    >>> from privconf_sklearn.mondrian import PrivateGroupSizes, mondrian_privacy
    >>> mondrian_privacy(ExponQ(epsilon=1.0), "public", "add/remove").epsilon
    1.0
    >>> mondrian_privacy(ExponQ(epsilon=1.0), "public", "replace-one").epsilon
    2.0
    >>> mondrian_privacy(ExponQ(epsilon=1.0), PrivateGroupSizes(0.1), "replace-one").epsilon
    2.2
    """
    base = mechanism.privacy_guarantee()
    replace_one, add_remove = base.under("replace-one"), base.under("add/remove")
    touched = min(max(int(n_groups_read), 0), 2)
    moves = int(n_groups) >= 2  # a replaced row can change group
    gaussian = isinstance(mechanism, PCOQS)
    name = type(mechanism).__name__
    if isinstance(group_sizes, PrivateGroupSizes):
        sizes = group_sizes.privacy_guarantee()
        what = (
            f"Mondrian calibration with private group sizes: {name} on a fixed number of "
            "rows per group (subsampled or padded) and Laplace noise on the sizes"
        )
        if adjacency == "add/remove":
            parts = [sizes] + [replace_one] * min(touched, 1)
        elif moves:
            parts = [sizes.under("replace-one")] + [replace_one] * touched
        else:
            parts = [replace_one] * min(touched, 1)
        return _compose(parts, adjacency, gaussian=gaussian, description=what + ".")
    what = f"Mondrian calibration with public group sizes: {name} per group"
    if adjacency == "add/remove":
        return _compose(
            [add_remove] * min(touched, 1), adjacency, gaussian=gaussian, description=what + "."
        )
    within = _compose(
        [replace_one] * min(touched, 1),
        adjacency,
        gaussian=gaussian,
        description=what + " (a replaced row that stays in its group).",
    )
    if not moves:
        return within
    moving = _compose(
        [add_remove] * touched,
        adjacency,
        gaussian=gaussian,
        description=what + " (a replaced row that moves between groups touches two releases).",
    )
    return _weaker(moving, within)


def groups_read(releases: list[Calibration], group_sizes) -> int:
    """How many group releases read rows, for :func:`mondrian_privacy` (after the releases).

    Private sizes: every group (the size release reads every group's count, and which
    groups then read rows depends on the noisy sizes). Public sizes: the releases that
    read rows (:attr:`PrivacyGuarantee.reads_data`: all but the trivial releases decided
    from public quantities, also a zCDP release whose converted epsilon is 0).
    """
    if isinstance(group_sizes, PrivateGroupSizes):
        return len(releases)
    return sum(c.privacy.reads_data for c in releases)


def planned_groups_read(
    mechanism: QuantileMechanism, group_sizes, alpha: float, counts: np.ndarray
) -> int:
    """``groups_read`` from public quantities, before any score is computed.

    Private sizes: the number of groups. Public sizes (each group's count is public):
    the groups with rows whose mechanism certificate at that count is feasible (an
    infeasible request is released as the top of the range without reading rows),
    counted up to 2, the most that makes a difference to :func:`mondrian_privacy`.
    """
    if isinstance(group_sizes, PrivateGroupSizes):
        return int(counts.shape[0])
    read = 0
    for count in counts.tolist():
        if count > 0 and mechanism.coverage_certificate(int(count), alpha).feasible:
            read += 1
            if read == 2:
                break
    return read


# -------------------------------------------------------------------- records
@dataclass(frozen=True)
class GroupCalibration:
    """One group's release in a Mondrian calibration.

    Parameters
    ----------
    group : hashable
        The group id (a label for ``mondrian="class"``).
    calibration : Calibration
        The release of the group's mechanism (on the public range [0, 1]), made with
        ``n = calibration.n_samples`` scores: the group's size (public sizes) or its
        private lower bound ``m_g`` (private sizes).
    coverage_lower_bound : float
        Lower bound on coverage *within the group*, ``P(Y in C(X) | X in the group)``.
    lower_bound_confidence : float, default=1.0
        1 for a marginal bound; ``1 - beta`` when it holds with that probability over
        the mechanism's noise (as for P-COQS's approximate bound).
    """

    group: Hashable
    calibration: Calibration
    coverage_lower_bound: float
    lower_bound_confidence: float = 1.0

    @property
    def informative(self) -> bool:
        """False when the group's sets are trivial (threshold at the top of the range)."""
        return self.calibration.informative


@dataclass(frozen=True)
class MondrianCalibration:
    """Record of a Mondrian calibration: every group's release and their joint guarantee.

    Parameters
    ----------
    mechanism : str
        Name of the mechanism class used in every group.
    alpha : float
        Requested miscoverage level, in every group.
    n_samples : int
        Number of calibration rows (all groups).
    group_sizes : {"public", "private"}
        Whether group sizes were treated as public or released privately.
    groups : tuple of GroupCalibration
        One record per group, in the order of the estimator's ``groups_``.
    privacy : PrivacyGuarantee
        Guarantee of everything released (all thresholds, and the sizes when private),
        stated under the estimator's ``adjacency`` (:func:`mondrian_privacy`).
    details : dict, default={}
        Public or privacy-protected quantities: the released sizes, the size-release
        parameters, the coverage floor.
    owner_diagnostics : dict, default={}
        Data-dependent values NOT covered by the privacy guarantee (e.g. the exact group
        sizes when they were released privately). Never publish them.
    coverage_lower_bound : float
        Not a constructor argument: ``min`` over groups of ``coverage_lower_bound *
        lower_bound_confidence``, a marginal bound on ``P(Y in C(X))`` (coverage is an
        average of the groups' coverages; unseen groups get the full set).
    lower_bound_confidence : float
        Not a constructor argument: 1.
    feasible, informative, coverage_holds : bool
        Not constructor arguments: true iff true for every group.
    reason : str
        Not a constructor argument: the groups' reasons, ``"group <id>: <reason>"``.
    """

    mechanism: str
    alpha: float
    n_samples: int
    group_sizes: str
    groups: tuple[GroupCalibration, ...]
    privacy: PrivacyGuarantee
    details: dict[str, Any] = field(default_factory=dict)
    owner_diagnostics: dict[str, Any] = field(default_factory=dict)
    coverage_lower_bound: float = field(init=False)
    lower_bound_confidence: float = field(init=False)
    feasible: bool = field(init=False)
    informative: bool = field(init=False)
    coverage_holds: bool = field(init=False)
    reason: str = field(init=False)

    def __post_init__(self):
        groups = self.groups
        derived = {
            "coverage_lower_bound": min(
                (g.coverage_lower_bound * g.lower_bound_confidence for g in groups), default=1.0
            ),
            "lower_bound_confidence": 1.0,
            "feasible": all(g.calibration.feasible for g in groups),
            "informative": all(g.calibration.informative for g in groups),
            "coverage_holds": all(g.calibration.coverage_holds for g in groups),
            "reason": "; ".join(
                f"group {g.group!r}: {g.calibration.reason}" for g in groups if g.calibration.reason
            ),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @property
    def group_ids(self) -> tuple:
        """The group ids, in order."""
        return tuple(g.group for g in self.groups)

    def group(self, group_id) -> GroupCalibration:
        """The record of one group.

        Raises
        ------
        KeyError
            If no group has this id.
        """
        for record in self.groups:
            if record.group == group_id:
                return record
        raise KeyError(f"no calibrated group {group_id!r}; groups are {list(self.group_ids)}.")

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python representation (nested records as dicts)."""
        return asdict(self)

    def __repr__(self) -> str:
        trivial = [g.group for g in self.groups if not g.calibration.informative]
        return (
            f"MondrianCalibration(mechanism={self.mechanism!r}, alpha={self.alpha}, "
            f"n_samples={self.n_samples}, group_sizes={self.group_sizes!r}, "
            f"{len(self.groups)} groups ({len(trivial)} trivial), "
            f"epsilon={self.privacy.epsilon:.4g} ({self.privacy.adjacency}), "
            f"coverage_lower_bound={self.coverage_lower_bound:.4g})"
        )


# ---------------------------------------------------------------- calibration
@dataclass
class GroupRelease:
    """One group's release and the calibration rows its mechanism read (for estimators)."""

    calibration: Calibration
    rows: np.ndarray


def _trivial(mechanism: QuantileMechanism, alpha: float, reason: str) -> Calibration:
    return infeasible_calibration(type(mechanism).__name__, 0, alpha, reason)


def private_size_rows(rows: np.ndarray, size: int, noise: NoiseSource) -> tuple[np.ndarray, int]:
    """The rows a group's release reads at its private size, and how many to pad.

    ``size`` of the group's ``rows`` uniformly at random (in the order drawn), or all of
    them and ``size - len(rows)`` padding rows, chosen without looking at the data
    (:class:`PrivateGroupSizes`).
    """
    if rows.shape[0] >= size:
        return rows[np.argsort(noise.uniform(rows.shape[0]), kind="stable")[:size]], 0
    return rows, size - rows.shape[0]


def _subsample_or_pad(rows: np.ndarray, unit_scores, size: int, noise: NoiseSource):
    """``size`` of the rows uniformly at random, or all rows plus top scores to ``size``."""
    chosen, n_padding = private_size_rows(rows, size, noise)
    return np.sort(chosen), np.concatenate([unit_scores[chosen], np.ones(n_padding)])


def calibrate_groups(
    mechanism: QuantileMechanism,
    unit_scores: np.ndarray,
    codes: np.ndarray,
    group_ids: tuple,
    alpha: float,
    *,
    group_sizes,
    noise: NoiseSource,
) -> tuple[list[GroupRelease], dict, dict]:
    """Release one threshold per group with a copy of ``mechanism``.

    Parameters
    ----------
    mechanism : QuantileMechanism
        Central mechanism (validated), cloned per group.
    unit_scores : ndarray of shape (n_samples,)
        Calibration scores on [0, 1].
    codes : ndarray of shape (n_samples,)
        Group code of every row, in ``0..len(group_ids) - 1``.
    group_ids : tuple
        The groups, in code order.
    alpha : float
        Miscoverage level.
    group_sizes : "public" or PrivateGroupSizes
        Size treatment.
    noise : NoiseSource
        Privacy noise for every release (one stream, so the releases are independent).

    Returns
    -------
    releases : list of GroupRelease
        One per group, in code order.
    details : dict
        Public quantities of the sizes (``group_calibration_sizes``, and for private
        sizes ``size_epsilon``, ``size_beta``, ``size_offset``).
    owner_diagnostics : dict
        For private sizes: the exact ``group_sizes`` (not covered by the guarantee).
    """
    n_samples = unit_scores.shape[0]
    counts = np.bincount(codes, minlength=len(group_ids))
    private = isinstance(group_sizes, PrivateGroupSizes)
    sizes = group_sizes.release(counts, n_samples, noise) if private else counts
    releases = []
    for code in range(len(group_ids)):
        rows = np.flatnonzero(codes == code)
        size = int(sizes[code])
        if size == 0:
            why = (
                f"the private lower bound of the group's size is 0 (beta = {group_sizes.beta})"
                if private
                else "no calibration rows fall in this group"
            )
            releases.append(GroupRelease(_trivial(mechanism, alpha, why), rows[:0]))
            continue
        if private:
            rows, scores = _subsample_or_pad(rows, unit_scores, size, noise)
        else:
            scores = unit_scores[rows]
        with warnings.catch_warnings():
            # Trivial groups are reported together, naming them (warn_trivial_groups).
            warnings.simplefilter("ignore", UninformativeCalibrationWarning)
            calibration = clone(mechanism).calibrate(scores, alpha, random_state=noise)
        releases.append(GroupRelease(calibration, rows))
    details: dict[str, Any] = {"group_calibration_sizes": [int(v) for v in sizes]}
    owner: dict[str, Any] = {}
    if private:
        details.update(
            size_epsilon=float(group_sizes.epsilon),
            size_beta=float(group_sizes.beta),
            size_offset=group_sizes.offset(),
        )
        owner["group_sizes"] = [int(v) for v in counts]
    return releases, details, owner


def group_records(
    releases: list[Calibration],
    group_ids: tuple,
    *,
    group_sizes,
    mechanism: QuantileMechanism,
    alpha: float,
    n_samples: int,
) -> tuple[tuple[GroupCalibration, ...], dict]:
    """Per-group coverage statements for the final per-group calibrations.

    Public sizes: each group's calibration's own bound (conditional on the sizes).
    Private sizes: ``(1 - beta) * private_sizes_coverage_floor`` for every group whose
    release is not trivial, 1 for a trivial one. Returns the records and the public
    details of the bound.
    """
    details: dict[str, Any] = {}
    if isinstance(group_sizes, PrivateGroupSizes):
        floor = private_sizes_coverage_floor(mechanism, alpha, n_samples)
        bound = (1.0 - float(group_sizes.beta)) * floor
        details["coverage_floor"] = floor
        records = tuple(
            GroupCalibration(group, cal, bound if cal.informative else 1.0, 1.0)
            for group, cal in zip(group_ids, releases, strict=True)
        )
        return records, details
    records = tuple(
        GroupCalibration(group, cal, cal.coverage_lower_bound, cal.lower_bound_confidence)
        for group, cal in zip(group_ids, releases, strict=True)
    )
    return records, details


def warn_trivial_groups(records) -> None:
    """One warning naming every group whose sets are trivial, and why."""
    trivial = [g for g in records if not g.calibration.informative]
    if not trivial:
        return
    infeasible = any(not g.calibration.feasible for g in trivial)
    shown = "; ".join(
        f"group {g.group!r} (n = {g.calibration.n_samples}): "
        f"{g.calibration.reason or 'the released threshold is the top of the range'}"
        for g in trivial[:10]
    )
    more = f"; and {len(trivial) - 10} more" if len(trivial) > 10 else ""
    warn_at_caller(
        f"Mondrian calibration: {len(trivial)} of {len(records)} groups get the trivial "
        f"set (every label / the widest interval): {shown}{more}.",
        InfeasibleCalibrationWarning if infeasible else UninformativeCalibrationWarning,
    )
