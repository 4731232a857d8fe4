r"""Conformal risk control: release a risk-controlling candidate, privately or exactly.

Conformal risk control (Angelopoulos, Bates, Fisch, Lei and Schuster, "Conformal Risk
Control", ICLR 2024) picks a parameter ``lambda`` from a public grid so that a bounded
loss that does not increase in ``lambda`` has expected value at most ``alpha`` on a new
exchangeable point. Split conformal is the special case of the miscoverage loss
``1{s > lambda}`` with ``B = 1``. The mechanisms here read the calibration set only
through its summed loss curve ``S_j`` in integer units (:class:`LossCurve`):

- :class:`SplitCRC`: no privacy, the CRC parameter ``min{j : (S_j + B) / (n + 1) <
  alpha}`` computed exactly (MAPIE's ``MultiLabelClassificationController(method="crc")``
  rule, strict inequality included);
- :class:`ExponCRC`: pure ``epsilon``-DP, the shaped exponential mechanism of
  :mod:`._shaped` over the curve (the release behind ExponQ, whose curve is the miss
  count of a quantile), with the certificate ``E[L_{n+1}(lambda_J)] <= (B + floor(tau) +
  Gamma(phi)) / (n + 1) <= alpha``.

The user guide (Conformal risk control) has the proofs: the range-bounded privacy
analysis (a replaced row moves the curve up at some candidates and down at others, but
every change lies in one interval of length ``B``) and the layer-cake certificate.
"""

from __future__ import annotations

import math
from abc import ABCMeta, abstractmethod
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from .._param_validation import Interval, StrOptions, validate_params
from .._random import NoiseSource, check_noise_source
from .._warnings import warn_at_caller
from ..privacy import PrivacyGuarantee
from ._base import (
    InfeasibleCalibrationWarning,
    UninformativeCalibrationWarning,
    smallest_feasible_size,
)
from ._loss_curve import LossCurve, max_resolution
from ._shaped import (
    Shape,
    certified_level,
    choose_shape,
    sample_shaped,
    shaped_curve_log_probabilities,
    shaped_penalties,
)
from .expon_q import _lower_slope_fraction

__all__ = [
    "ExponCRC",
    "LossAssumptionWarning",
    "RiskCalibration",
    "RiskCertificate",
    "RiskControlMechanism",
    "RiskForecast",
    "SplitCRC",
    "warn_about_release",
]


class LossAssumptionWarning(UserWarning):
    """The calibration losses broke an assumption of the risk-control guarantee.

    Raised for the data owner (the counts are not private): rows with a positive loss
    at the most conservative candidate (the guarantee assumes 0 there), or rows whose
    loss increased with a more conservative candidate (their non-increasing envelope was
    controlled instead, which keeps the guarantee).
    """


@dataclass(frozen=True)
class RiskCertificate:
    """The risk bound a release would certify, from public quantities alone.

    Parameters
    ----------
    upper_bound : float
        Bound on ``E[L_{n+1}(lambda)]``: at most ``alpha`` when feasible, 0 otherwise
        (the most conservative candidate, whose loss the guarantee assumes is 0).
    feasible : bool, default=True
        False when no calibration set of this size certifies ``alpha``: the release is
        the most conservative candidate, chosen without reading data.
    reason : str, default=""
        Why it is infeasible, or empty.
    """

    upper_bound: float
    feasible: bool = True
    reason: str = ""


@dataclass(frozen=True, repr=False)
class RiskCalibration:
    """Result of a risk-control release: the candidate and its certificates.

    Parameters
    ----------
    mechanism : str
        Name of the mechanism class.
    index : int
        Released candidate, 0-based, in the order least to most conservative.
    n_candidates : int
        ``m``, the grid's size.
    n_samples : int
        Number of calibration rows (public).
    alpha : float
        Requested risk level, in loss units.
    loss_bound : float
        ``B``, the largest loss of one row.
    privacy : PrivacyGuarantee
        What the release promises (untouched when no data were read).
    risk_upper_bound : float
        Theorem-backed bound on ``E[L_{n+1}(lambda)]``, at most ``alpha`` (0 for an
        infeasible request: its most conservative candidate has loss 0 under the
        guarantee's assumption).
    target_risk : float or None, default=None
        The empirical mean loss the release aims at (``tau B / (n Q)`` for
        :class:`ExponCRC`, ``((n + 1) alpha - B) / n`` for :class:`SplitCRC`).
    feasible : bool, default=True
        False when ``alpha`` cannot be certified at this size: the release is the most
        conservative candidate, chosen without reading data.
    reason : str, default=""
        Why the release is infeasible or uninformative, or empty.
    details : dict, default={}
        Public or privacy-protected quantities (resolution, lower slope, target, ...).
    owner_diagnostics : dict, default={}
        Data-dependent values NOT covered by the privacy guarantee (rows that broke an
        assumption): for the data owner only.
    informative : bool
        Not a constructor argument: ``index < n_candidates - 1``. False when the release
        is the most conservative candidate (for prediction sets: every label).
    """

    mechanism: str
    index: int
    n_candidates: int
    n_samples: int
    alpha: float
    loss_bound: float
    privacy: PrivacyGuarantee
    risk_upper_bound: float
    target_risk: float | None = None
    feasible: bool = True
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    owner_diagnostics: dict[str, Any] = field(default_factory=dict)
    informative: bool = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "informative", bool(self.index < self.n_candidates - 1))

    @property
    def assumptions_hold(self) -> bool:
        """Owner-side: no calibration row had a positive loss at the last candidate."""
        return not self.owner_diagnostics.get("n_rows_top_loss_positive", 0)

    def __repr__(self) -> str:
        """A short multi-line summary."""
        lines = [
            f"RiskCalibration({self.mechanism})",
            f"  candidate   {self.index} of {self.n_candidates}"
            + ("" if self.informative else "  (the most conservative: trivial sets)"),
            f"  alpha       {self.alpha:.4g} (loss bound {self.loss_bound:.4g}), "
            f"n_samples = {self.n_samples}",
            f"  risk        E[loss] <= {self.risk_upper_bound:.4g}",
            f"  privacy     {self.privacy.notion} epsilon = {self.privacy.epsilon:.4g} "
            f"({self.privacy.adjacency})",
            f"  status      informative={self.informative}, feasible={self.feasible}",
        ]
        if self.reason:
            lines.append(f"  reason      {self.reason}")
        if not self.assumptions_hold:
            lines.append(
                "  ASSUMPTION  broken: calibration rows have a positive loss at the most "
                "conservative candidate; the risk bound does NOT hold (owner-side)"
            )
        return "\n".join(lines)

    __str__ = __repr__

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python representation (nested ``privacy`` as a dict)."""
        return asdict(self)


@dataclass(frozen=True)
class RiskForecast:
    """What a release would do on an idealised loss curve, before any data is read.

    Parameters
    ----------
    n_samples, alpha : int, float
        The planned calibration size and risk level.
    mean_loss : ndarray of shape (m,)
        The idealised mean calibration loss at every candidate (the assumption).
    certified_risk : float
        The bound the release certifies (at most ``alpha``; 0 when the level is
        unreachable and the release is the most conservative candidate).
    target_risk : float or None
        The empirical mean loss the release aims at (None when unreachable).
    crc_index : int
        The candidate exact (non-private) CRC would pick on this curve.
    index_probabilities : ndarray of shape (m,)
        The exact distribution of the released candidate on this curve.
    expected_index : float
        Its mean.
    informative_probability : float
        Probability that the release is not the most conservative candidate.
    expected_mean_loss : float
        ``sum_j P(J = j) mean_loss[j]``: the calibration mean loss at the release,
        in expectation over the noise.
    """

    n_samples: int
    alpha: float
    mean_loss: np.ndarray
    certified_risk: float
    target_risk: float | None
    crc_index: int
    index_probabilities: np.ndarray
    expected_index: float
    informative_probability: float
    expected_mean_loss: float


@dataclass(frozen=True)
class _Plan:
    """A release's public parameters: fixed from ``(n, alpha, m, Q, B)`` only."""

    n_samples: int
    n_candidates: int
    resolution: int
    loss_bound: float
    alpha: float
    epsilon: float = math.inf
    shape: Shape | None = None  # ExponCRC
    limit: int | None = None  # SplitCRC: the largest S_j the rule accepts
    risk_bound: float = 0.0

    @property
    def level_units(self) -> float:
        """``alpha / B`` in curve units per record: ``Q alpha / B``."""
        return self.resolution * self.alpha / self.loss_bound


class RiskControlMechanism(BaseEstimator, metaclass=ABCMeta):
    """Base class of the risk-control releases.

    A subclass declares its parameters' constraints, states its privacy guarantee
    (``_privacy_guarantee``), its public plan (``_plan``: the release's parameters from
    ``(n, alpha, m, Q, B)``, or None when ``alpha`` is unreachable), the exact
    distribution of its release given the curve (``_log_probabilities``) and its draw
    from it (``_draw``). Every public method validates the parameters once
    (:meth:`_validated_params`) and passes them to these hooks. :meth:`calibrate_curve`
    releases; the audits read the distribution through :meth:`release_distribution`, the
    planner through :meth:`forecast`.
    """

    #: Whether the release needs agent ids (never: risk control is central).
    requires_groups: bool = False
    #: Accepted forms of each constructor parameter (scikit-learn constraints).
    _parameter_constraints: dict[str, list] = {}

    def _validated_params(self) -> dict[str, Any]:
        """The constructor parameters, validated and in canonical form (one per call)."""
        return validate_params(
            self._parameter_constraints, self.get_params(deep=False), type(self).__name__
        )

    def _method(self, name: str) -> str:
        """``"ExponCRC.calibrate"``: the caller named in errors about a method's arguments."""
        return f"{type(self).__name__}.{name}"

    def privacy_guarantee(self) -> PrivacyGuarantee:
        """The guarantee a release carries, from parameters alone."""
        return self._privacy_guarantee(self._validated_params())

    @abstractmethod
    def _privacy_guarantee(self, params: dict) -> PrivacyGuarantee:
        """:meth:`privacy_guarantee` from validated parameters."""

    @abstractmethod
    def _plan(
        self, params: dict, n: int, alpha: float, m: int, resolution: int, bound: float
    ) -> _Plan | None:
        """The public parameters of a release; None if ``alpha`` is unreachable or ``m < 2``."""

    @abstractmethod
    def _log_probabilities(self, params: dict, curve: LossCurve, plan: _Plan) -> np.ndarray:
        """Exact ``log P(J = j)`` given the curve."""

    @abstractmethod
    def _draw(self, params: dict, curve: LossCurve, plan: _Plan, noise: NoiseSource) -> int:
        """The released candidate, drawn from :meth:`_log_probabilities`' distribution."""

    @abstractmethod
    def _unreachable(self, params: dict, n: int, alpha: float, m: int, bound: float) -> str:
        """Why ``alpha`` cannot be certified (public quantities only)."""

    # ------------------------------------------------------------ public plan
    def risk_certificate(
        self,
        n_samples: int,
        alpha: float,
        n_candidates: int,
        *,
        loss_bound: float = 1.0,
        resolution: int | None = None,
    ) -> RiskCertificate:
        """The bound a release on ``n_samples`` rows would certify (no data read).

        It equals the ``risk_upper_bound`` and ``feasible`` of the
        :class:`RiskCalibration` a release on a curve of ``n_samples`` rows at this
        resolution returns: ``feasible`` is False exactly when that release reads no
        data (the estimators reserve the privacy budget from it before reading any row).

        Parameters
        ----------
        n_samples : int
            Calibration size.
        alpha : float
            Risk level, in ``(0, loss_bound)``.
        n_candidates : int
            Size of the grid (the most conservative candidate included).
        loss_bound : float, default=1.0
            ``B``.
        resolution : int or None, default=None
            ``Q`` (None: :func:`~._loss_curve.max_resolution` of ``n_samples``).

        Returns
        -------
        RiskCertificate
        """
        caller = self._method("risk_certificate")
        n, alpha, m, bound = _check_plan_input(n_samples, alpha, n_candidates, loss_bound, caller)
        q = _check_resolution(resolution, n, caller)
        return self._risk_certificate(self._validated_params(), n, alpha, m, bound, q)

    def _risk_certificate(
        self, params: dict, n: int, alpha: float, m: int, bound: float, resolution: int
    ) -> RiskCertificate:
        plan = self._plan(params, n, alpha, m, resolution, bound)
        if plan is None:
            return RiskCertificate(0.0, False, self._unreachable(params, n, alpha, m, bound))
        return RiskCertificate(plan.risk_bound)

    def min_informative_samples(
        self, alpha: float, n_candidates: int, *, loss_bound: float = 1.0
    ) -> int:
        """Smallest calibration size whose certificate is feasible (public quantities).

        Below it the release is always the most conservative candidate (at the default
        resolution of each size).
        """
        caller = self._method("min_informative_samples")
        _, alpha, m, bound = _check_plan_input(1, alpha, n_candidates, loss_bound, caller)
        params = self._validated_params()
        return smallest_feasible_size(
            lambda n: (
                self._risk_certificate(params, n, alpha, m, bound, max_resolution(n)).feasible
            ),
            f"{self!r} at alpha = {alpha!r}",
        )

    # ---------------------------------------------------------------- release
    def calibrate(
        self, losses, alpha: float, *, loss_bound: float = 1.0, resolution=None, random_state=None
    ) -> RiskCalibration:
        """Release a candidate controlling the risk at ``alpha`` from a loss matrix.

        Parameters
        ----------
        losses : array-like of shape (n_samples, n_candidates)
            ``L_i(lambda_j)`` in ``[0, loss_bound]``, columns from the least to the most
            conservative candidate; the guarantee assumes every loss (of calibration
            and test rows) is non-increasing along a row and 0 at the last column.
            Losses are rounded up to multiples of ``loss_bound / resolution``.
        alpha : float
            Risk level in ``(0, loss_bound)``.
        loss_bound : float, default=1.0
            ``B``.
        resolution : int or None, default=None
            ``Q`` (None: :func:`~._loss_curve.max_resolution` of the number of rows).
        random_state : None, int, RandomState or Generator, default=None
            Source of the privacy noise (None: the operating system's cryptographic
            generator; anything else is reproducible, for tests and examples).

        Returns
        -------
        RiskCalibration
        """
        params = self._validated_params()
        curve = LossCurve.from_losses(losses, loss_bound, resolution)
        calibration = self._release(params, curve, alpha, check_noise_source(random_state))
        warn_about_release(self, calibration)
        return calibration

    def calibrate_curve(
        self, curve: LossCurve, alpha: float, *, random_state=None
    ) -> RiskCalibration:
        """Release a candidate from a :class:`~._loss_curve.LossCurve` (see :meth:`calibrate`).

        Warns (:class:`~.UninformativeCalibrationWarning`, or its subclass
        :class:`~.InfeasibleCalibrationWarning`) when the release is the most
        conservative candidate, and (:class:`LossAssumptionWarning`, owner-side) when
        rows broke an assumption.
        """
        params = self._validated_params()
        calibration = self._release(params, curve, alpha, check_noise_source(random_state))
        warn_about_release(self, calibration)
        return calibration

    def _release(
        self, params: dict, curve: LossCurve, alpha: float, noise: NoiseSource
    ) -> RiskCalibration:
        """The release on validated parameters, without warnings (the estimators warn)."""
        if not isinstance(curve, LossCurve):
            raise TypeError(f"curve must be a LossCurve; got {type(curve).__name__}.")
        n, alpha, m, bound = _check_plan_input(
            curve.n_samples, alpha, curve.n_candidates, curve.loss_bound, self._method("calibrate")
        )
        plan = self._plan(params, n, alpha, m, curve.resolution, bound)
        if plan is None:
            return self._trivial(params, n, alpha, m, bound, curve)
        index = self._draw(params, curve, plan, noise)
        reason = ""
        if index == m - 1:
            reason = (
                "the release is the most conservative candidate: the calibration losses "
                "reach the target only there, or the privacy noise moved the release there."
            )
        return RiskCalibration(
            mechanism=type(self).__name__,
            index=int(index),
            n_candidates=m,
            n_samples=n,
            alpha=alpha,
            loss_bound=bound,
            privacy=self._privacy_guarantee(params),
            risk_upper_bound=plan.risk_bound,
            target_risk=self._target_risk(plan),
            reason=reason,
            details=self._details(params, plan),
            owner_diagnostics=dict(curve.owner_diagnostics),
        )

    def _trivial(
        self, params: dict, n: int, alpha: float, m: int, bound: float, curve: LossCurve
    ) -> RiskCalibration:
        """The most conservative candidate, chosen from public quantities only."""
        return RiskCalibration(
            mechanism=type(self).__name__,
            index=m - 1,
            n_candidates=m,
            n_samples=n,
            alpha=alpha,
            loss_bound=bound,
            privacy=PrivacyGuarantee.untouched(
                "Infeasible request: the most conservative candidate was chosen from "
                "public quantities only, without reading the calibration data."
            ),
            risk_upper_bound=0.0,
            feasible=False,
            reason=self._unreachable(params, n, alpha, m, bound),
            details={"resolution": curve.resolution},
            owner_diagnostics=dict(curve.owner_diagnostics),
        )

    def _target_risk(self, plan: _Plan) -> float | None:
        return None

    def _details(self, params: dict, plan: _Plan) -> dict[str, Any]:
        return {"resolution": plan.resolution}

    # ------------------------------------------------------------ for audits
    def release_distribution(self, curve: LossCurve, alpha: float) -> np.ndarray:
        """The exact distribution of the candidate :meth:`calibrate_curve` releases.

        For audits and tests: it reads the curve, spends no budget and is **not**
        private.

        Returns
        -------
        ndarray of shape (m,)
            ``log P(J = j)`` (the last candidate with probability 1 when ``alpha`` is
            unreachable).
        """
        return self._release_distribution(self._validated_params(), curve, alpha)

    def _release_distribution(self, params: dict, curve: LossCurve, alpha: float) -> np.ndarray:
        n, alpha, m, bound = _check_plan_input(
            curve.n_samples,
            alpha,
            curve.n_candidates,
            curve.loss_bound,
            self._method("release_distribution"),
        )
        return self._distribution(
            params, curve, self._plan(params, n, alpha, m, curve.resolution, bound)
        )

    def _distribution(self, params: dict, curve: LossCurve, plan: _Plan | None) -> np.ndarray:
        """``log P(J = j)`` under a plan (the last candidate surely when there is none)."""
        if plan is None:
            log_probabilities = np.full(curve.n_candidates, -np.inf)
            log_probabilities[-1] = 0.0
            return log_probabilities
        return self._log_probabilities(params, curve, plan)

    def forecast(
        self,
        n_samples: int,
        alpha: float,
        n_candidates: int,
        *,
        loss_bound: float = 1.0,
        mean_loss=None,
        resolution: int | None = None,
    ) -> RiskForecast:
        """A data-free forecast of the release under an idealised loss curve.

        The curve is ``S_j = ceil(n Q mean_loss[j] / B)``: a calibration set whose mean
        loss at candidate ``j`` is ``mean_loss[j]``. By default ``mean_loss`` falls
        linearly from ``B`` at the first candidate to 0 at the last, ``B (m - 1 - j) /
        (m - 1)`` (for the false-negative rate on MAPIE's grid of thresholds
        ``0, 0.01, ..., 0.99``, a model whose positive labels have uniformly
        distributed probabilities). Pass a curve measured on public or non-sensitive
        data for a sharper forecast. Nothing is read from any calibration set.

        Parameters
        ----------
        n_samples : int
            Planned calibration size.
        alpha : float
            Risk level in ``(0, loss_bound)``.
        n_candidates : int
            Size of the grid.
        loss_bound : float, default=1.0
            ``B``.
        mean_loss : array-like of shape (n_candidates,) or None, default=None
            Non-increasing, in ``[0, B]``, 0 at the last candidate.
        resolution : int or None, default=None
            ``Q`` (None: :func:`~._loss_curve.max_resolution` of ``n_samples``).

        Returns
        -------
        RiskForecast
        """
        caller = self._method("forecast")
        n, alpha, m, bound = _check_plan_input(n_samples, alpha, n_candidates, loss_bound, caller)
        q = _check_resolution(resolution, n, caller)
        mean_loss = _check_mean_loss(mean_loss, m, bound)
        params = self._validated_params()
        sums = np.minimum(np.ceil(n * q * (mean_loss / bound)), n * q).astype(np.int64)
        curve = LossCurve(sums, n, q, bound)
        plan = self._plan(params, n, alpha, m, q, bound)
        probabilities = np.exp(self._distribution(params, curve, plan))
        exact = SplitCRC()  # no parameters: nothing to validate
        crc = exact._distribution({}, curve, exact._plan({}, n, alpha, m, q, bound))
        return RiskForecast(
            n_samples=n,
            alpha=alpha,
            mean_loss=mean_loss,
            certified_risk=0.0 if plan is None else plan.risk_bound,
            target_risk=None if plan is None else self._target_risk(plan),
            crc_index=int(np.argmax(crc)),
            index_probabilities=probabilities,
            expected_index=float(probabilities @ np.arange(m)),
            informative_probability=float(1.0 - probabilities[-1]),
            expected_mean_loss=float(probabilities @ mean_loss),
        )


def warn_about_release(owner, calibration: RiskCalibration) -> None:
    """The warnings of a release, at the user's line: trivial, and broken assumptions.

    An :class:`~.UninformativeCalibrationWarning` (its subclass
    :class:`~.InfeasibleCalibrationWarning` for an infeasible request) when the release
    is the most conservative candidate; a :class:`LossAssumptionWarning` for the data
    owner when rows broke an assumption (it quotes data-dependent counts).

    Parameters
    ----------
    owner : object
        The mechanism or estimator named in the messages.
    calibration : RiskCalibration
        The release.
    """
    name = type(owner).__name__
    if not calibration.informative:
        category = (
            UninformativeCalibrationWarning
            if calibration.feasible
            else InfeasibleCalibrationWarning
        )
        message = f"{name}: {calibration.reason} Prediction sets will hold every label."
        warn_at_caller(message, category)
    diagnostics = calibration.owner_diagnostics
    if diagnostics.get("n_rows_top_loss_positive"):
        warn_at_caller(
            f"{name}: {diagnostics['n_rows_top_loss_positive']} calibration rows have a "
            "positive loss at the most conservative candidate; the risk guarantee assumes "
            "the loss is 0 there for every row, so for such data it does NOT hold "
            "(owner-side diagnostic, not private).",
            LossAssumptionWarning,
        )
    if diagnostics.get("n_rows_loss_increasing"):
        warn_at_caller(
            f"{name}: the loss of {diagnostics['n_rows_loss_increasing']} calibration rows "
            "increased with a more conservative candidate; their non-increasing envelope "
            "max_{j' >= j} L(j') was controlled instead (at least the loss, so the "
            "guarantee holds). Owner-side diagnostic, not private.",
            LossAssumptionWarning,
        )


#: The arguments of a release's public plan.
_PLAN_CONSTRAINTS = {
    "n_samples": [Interval(Integral, 1, None, closed="left")],
    "alpha": [Interval(Real, 0, None, closed="neither")],
    "n_candidates": [Interval(Integral, 1, None, closed="left")],
    "loss_bound": [Interval(Real, 0, None, closed="neither")],
}


def _check_plan_input(
    n_samples, alpha, n_candidates, loss_bound, caller: str
) -> tuple[int, float, int, float]:
    """Validated ``(n, alpha, m, B)``, with ``0 < alpha < B``."""
    checked = validate_params(
        _PLAN_CONSTRAINTS,
        {
            "n_samples": n_samples,
            "alpha": alpha,
            "n_candidates": n_candidates,
            "loss_bound": loss_bound,
        },
        caller,
    )
    alpha, bound = checked["alpha"], checked["loss_bound"]
    if not alpha < bound:
        raise ValueError(
            f"alpha must lie in (0, loss_bound) = (0, {bound!r}): any release has risk at "
            f"most loss_bound; got alpha = {alpha!r}."
        )
    return checked["n_samples"], alpha, checked["n_candidates"], bound


def _check_resolution(resolution, n: int, caller: str) -> int:
    """``Q``: the given positive integer, or :func:`~._loss_curve.max_resolution` of ``n``."""
    checked = validate_params(
        {"resolution": [None, Interval(Integral, 1, None, closed="left")]},
        {"resolution": resolution},
        caller,
    )["resolution"]
    return max_resolution(n) if checked is None else checked


def _check_mean_loss(mean_loss, m: int, bound: float) -> np.ndarray:
    """The forecast's idealised curve (the linear default when None)."""
    if mean_loss is None:
        return bound * np.arange(m - 1, -1, -1, dtype=np.float64) / max(m - 1, 1)
    values = np.asarray(mean_loss, dtype=np.float64)
    if (
        values.shape != (m,)
        or not np.isfinite(values).all()
        or values.min() < 0
        or values.max() > bound
        or (np.diff(values) > 0).any()
        or values[-1] != 0
    ):
        raise ValueError(
            f"mean_loss must have one entry per candidate ({m}), non-increasing, in "
            f"[0, loss_bound], and 0 at the last candidate."
        )
    return values


# ------------------------------------------------------------------ mechanisms
class SplitCRC(RiskControlMechanism):
    """Conformal risk control without privacy (epsilon = infinity), computed exactly.

    Angelopoulos, Bates, Fisch, Lei and Schuster (2024), Theorem 1: the released
    candidate is the least conservative ``j`` with

    ``(n / (n + 1)) R_hat(lambda_j) + B / (n + 1) < alpha``, i.e.
    ``(S_j + B) / (n + 1) < alpha``,

    with the strict inequality of MAPIE's ``MultiLabelClassificationController``
    (``method="crc"``), in exact rational arithmetic on the integer curve. For
    exchangeable data with every loss non-increasing and 0 at the last candidate,
    ``E[L_{n+1}(lambda)] <= alpha``. If ``B / (n + 1) >= alpha`` no candidate can
    qualify: the release is the last candidate, without reading data.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.mechanisms import SplitCRC
    >>> losses = np.array([[1.0, 0.5, 0.0], [0.5, 0.0, 0.0]] * 20)
    >>> SplitCRC().calibrate(losses, alpha=0.5).index
    1
    """

    def __init__(self):
        pass

    def _privacy_guarantee(self, params: dict) -> PrivacyGuarantee:
        """No privacy: the release is an exact function of the data."""
        return PrivacyGuarantee.no_privacy("Exact conformal risk control: no privacy protection.")

    def _plan(self, params, n, alpha, m, resolution, bound) -> _Plan | None:
        if m < 2:
            return None
        # S_j + Q < (n + 1) Q alpha / B  <=>  S_j <= ceil((n + 1) Q alpha / B - Q) - 1.
        room = Fraction(n + 1) * resolution * Fraction(alpha) / Fraction(bound) - resolution
        limit = math.ceil(room) - 1
        if limit < 0:
            return None
        return _Plan(n, m, resolution, bound, alpha, limit=limit, risk_bound=alpha)

    def _draw(self, params: dict, curve: LossCurve, plan: _Plan, noise: NoiseSource) -> int:
        """The least conservative accepted candidate (the last if none is): no noise."""
        return _first_accepted(curve, plan)

    def _log_probabilities(self, params: dict, curve: LossCurve, plan: _Plan) -> np.ndarray:
        log_probabilities = np.full(curve.n_candidates, -np.inf)
        log_probabilities[_first_accepted(curve, plan)] = 0.0
        return log_probabilities

    def _target_risk(self, plan: _Plan) -> float:
        return ((plan.n_samples + 1) * plan.alpha - plan.loss_bound) / plan.n_samples

    def _details(self, params: dict, plan: _Plan) -> dict[str, Any]:
        return {"resolution": plan.resolution, "largest_accepted_sum": plan.limit}

    def _unreachable(self, params, n, alpha, m, bound) -> str:
        if m == 1:
            return "a grid of one candidate has nothing to choose."
        return (
            f"B / (n + 1) = {bound}/{n + 1} >= alpha = {alpha}: even a candidate with zero "
            "calibration loss does not qualify; more rows are needed."
        )


def _first_accepted(curve: LossCurve, plan: _Plan) -> int:
    """SplitCRC's candidate: the first ``j`` with ``S_j <= limit``, else the last one."""
    accepted = np.flatnonzero(curve.sums <= plan.limit)
    return int(accepted[0]) if accepted.size else curve.n_candidates - 1


class ExponCRC(RiskControlMechanism):
    """Private conformal risk control by the shaped exponential mechanism.

    Candidate ``j`` (from least to most conservative) is released with probability
    proportional to

    ``exp(-epsilon max(s_l (S_j - tau), s_h (tau - S_{j-1}), 0) / B)``

    over the summed loss curve ``S_j`` in integer units (losses rounded up to steps of
    ``B / Q``), ``s_l + s_h = 1`` and a target ``tau`` fixed from public quantities
    (:mod:`._shaped`, the release behind ExponQ's default utility: a quantile is the
    case of the miscoverage loss). ``tau`` is the largest level whose certificate
    ``(B + floor(tau) + Gamma(phi)) / (n + 1)`` (in units) is at most ``alpha``; ``s_l``
    is chosen by the criterion of :func:`._shaped.choose_shape` (the expected released
    candidate over idealised loss curves falling over part of the grid).

    Guarantees: pure ``epsilon``-DP of the calibration rows under replace-one and
    add/remove adjacency (with ``n`` public; every utility change of a neighbouring
    pair lies in an interval of length 1, although a replaced row moves the curve up at
    some candidates and down at others), and ``E[L_{n+1}(lambda_J)] <= alpha`` for
    exchangeable data whose losses are non-increasing and 0 at the last candidate, with
    no failure probability. Proofs in the user guide (Conformal risk control).

    Parameters
    ----------
    epsilon : float
        Privacy budget, > 0 and finite.
    lower_slope : float or "auto", default="auto"
        ``s_l``, a multiple of 0.01 in (0, 1], or ``"auto"`` (the criterion).

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.mechanisms import ExponCRC
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(size=(2000, 1))
    >>> grid = np.linspace(1, 0, 51)  # thresholds, least conservative first
    >>> losses = (p <= grid).astype(float)  # miss: the score is not above the threshold
    >>> cal = ExponCRC(epsilon=1.0).calibrate(losses, alpha=0.1, random_state=0)
    >>> cal.privacy.epsilon, bool(cal.risk_upper_bound <= 0.1)
    (1.0, True)
    """

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "lower_slope": [StrOptions({"auto"}), Interval(Real, 0, 1, closed="right")],
    }

    def __init__(self, epsilon, *, lower_slope="auto"):
        self.epsilon = epsilon
        self.lower_slope = lower_slope

    def _validated_params(self) -> dict[str, Any]:
        """The parameters; a numeric ``lower_slope`` as the exact multiple of 0.01 it is."""
        params = super()._validated_params()
        if params["lower_slope"] != "auto":
            params["lower_slope"] = _lower_slope_fraction(params["lower_slope"])
        return params

    def _privacy_guarantee(self, params: dict) -> PrivacyGuarantee:
        """Pure epsilon-DP under replace-one and add/remove adjacency."""
        return PrivacyGuarantee.pure(
            params["epsilon"],
            adjacency="replace-one and add/remove",
            description="Range-bounded exponential mechanism over a grid of risk-control "
            "parameters with the shaped utility (utility changes within an interval of "
            "length 1).",
        )

    def _plan(self, params, n, alpha, m, resolution, bound) -> _Plan | None:
        epsilon, slope = params["epsilon"], params["lower_slope"]
        slope = None if slope == "auto" else slope
        if m < 2:
            return None
        level = resolution * alpha / bound
        shape = choose_shape(n, level, epsilon, m, slope, resolution)
        if shape is None:
            return None
        risk = min(alpha, certified_level(n, epsilon, shape) * bound / resolution)
        return _Plan(n, m, resolution, bound, alpha, epsilon, shape, risk_bound=risk)

    def _log_probabilities(self, params: dict, curve: LossCurve, plan: _Plan) -> np.ndarray:
        assert plan.shape is not None
        return shaped_curve_log_probabilities(curve.curve, plan.shape, plan.epsilon)

    def _draw(self, params: dict, curve: LossCurve, plan: _Plan, noise: NoiseSource) -> int:
        """``j`` with probability proportional to ``exp(-epsilon f_j)``, exact penalties."""
        assert plan.shape is not None
        numerators, denominator = shaped_penalties(curve.curve, plan.shape)
        return sample_shaped(numerators, denominator, plan.epsilon, noise)

    def _target_risk(self, plan: _Plan) -> float:
        assert plan.shape is not None
        return float(plan.shape.target) * plan.loss_bound / (plan.n_samples * plan.resolution)

    def _details(self, params: dict, plan: _Plan) -> dict[str, Any]:
        assert plan.shape is not None
        return {
            "resolution": plan.resolution,
            "lower_slope": float(plan.shape.lower_slope),
            "lower_slope_auto": params["lower_slope"] == "auto",
            "target_units": float(plan.shape.target),
        }

    def _unreachable(self, params, n, alpha, m, bound) -> str:
        if m == 1:
            return "a grid of one candidate has nothing to choose."
        epsilon = params["epsilon"]
        return (
            f"no target level certifies alpha = {alpha} with n = {n} rows, {m} candidates "
            f"and epsilon = {epsilon} (the certificate (B + tau + Gamma) / (n + 1) exceeds "
            "alpha even at tau = 0): more rows, a larger epsilon or a coarser grid."
        )
