"""The quantile-mechanism interface and the records it returns.

A :class:`QuantileMechanism` turns calibration scores that already lie in the public
range [0, 1] into a :class:`Calibration`: the threshold plus everything needed to state
and re-check its guarantees. Mechanisms never see features, labels or models.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from dataclasses import asdict, dataclass, field
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from .._param_validation import Interval, check_alpha, validate_params
from .._random import NoiseSource, check_noise_source
from .._validation import check_unit_scores
from .._warnings import warn_at_caller
from ..privacy import PrivacyGuarantee
from ._statistics import ScoreArray, ScoreStatistics

__all__ = [
    "Calibration",
    "CoverageCertificate",
    "Forecast",
    "InfeasibleCalibrationWarning",
    "QuantileMechanism",
    "UninformativeCalibrationWarning",
    "smallest_feasible_size",
]

#: :meth:`QuantileMechanism.min_informative_samples` gives up beyond this size.
MAX_PLANNED_SAMPLES = 10**15


class UninformativeCalibrationWarning(UserWarning):
    """The released threshold is the top of the public range: the output is trivial.

    Prediction sets then hold every label and intervals are as wide as the public
    bounds allow, whatever the reason (unreachable level, noisy counts that never
    reached their target, every federated agent at the top, ...).
    :attr:`Calibration.informative` is False and :attr:`Calibration.reason` says why.
    """


class InfeasibleCalibrationWarning(UninformativeCalibrationWarning):
    """The requested coverage cannot be certified with this calibration set.

    The threshold is then the top of the public range (full prediction sets, widest
    intervals), chosen without reading the data, and the :class:`Calibration` records
    why. A special case of :class:`UninformativeCalibrationWarning`.
    """


@dataclass(frozen=True, repr=False)
class Calibration:
    """Result of a private calibration: threshold plus its certificates.

    All quantities are on the public score range [0, 1] the mechanism works on;
    estimators map the threshold back to score units.

    Parameters
    ----------
    mechanism : str
        Name of the mechanism class.
    threshold : float
        Score threshold in [0, 1]; prediction sets are ``{y : score(x, y) <= threshold}``.
    n_samples : int
        Number of calibration scores (treated as public).
    alpha : float
        Requested miscoverage level.
    privacy : PrivacyGuarantee
        What this release promises (zero loss if the data were not touched).
    coverage_lower_bound : float
        Theorem-backed lower bound on marginal coverage ``P(Y in C(X))``.
    lower_bound_confidence : float, default=1.0
        1 for a marginal guarantee; ``1 - beta`` when the lower bound only holds with
        that probability over the mechanism's noise (approximate bounds, e.g. P-COQS).
    coverage_upper_bound : float or None, default=None
        Upper bound on marginal coverage for scores without atoms, when a theorem gives
        one. With atoms, add ``upper_bound_atom_slope * p_max`` (``p_max`` = largest
        probability of a single score value, or of one bin for binned mechanisms) and
        cap at 1.
    upper_bound_atom_slope : float, default=0.0
        See ``coverage_upper_bound``.
    target_level : float or None, default=None
        The (possibly inflated) empirical quantile level the mechanism aimed at.
    feasible : bool, default=True
        False when the requested coverage could not be certified; the threshold is then
        1 (the top of the range) and ``reason`` says why.
    reason : str, default=""
        Why the calibration is infeasible or uninformative, or empty.
    informative : bool
        Not a constructor argument: always ``threshold < 1``. False when the threshold
        is the top of the public range: every label is in every set, intervals are as
        wide as the bounds, whatever the reason (``reason`` says why when the mechanism
        knows).
    details : dict, default={}
        Mechanism-specific quantities that are public or covered by the privacy
        guarantee (bins, gamma, target rank, ...): safe to publish.
    owner_diagnostics : dict, default={}
        Data-dependent diagnostics computed without noise (e.g. DP-APS's non-private grid
        threshold and certificate width, P-COQS's clip counts). NOT covered by the
        privacy guarantee: for the data owner only, never published by default.
    coverage_holds : bool, default=True
        False when an assumption of the coverage guarantee broke; ``reason`` says why.
    """

    mechanism: str
    threshold: float
    n_samples: int
    alpha: float
    privacy: PrivacyGuarantee
    coverage_lower_bound: float
    lower_bound_confidence: float = 1.0
    coverage_upper_bound: float | None = None
    upper_bound_atom_slope: float = 0.0
    target_level: float | None = None
    feasible: bool = True
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    owner_diagnostics: dict[str, Any] = field(default_factory=dict)
    coverage_holds: bool = True
    informative: bool = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "informative", bool(self.threshold < 1.0))

    def __repr__(self) -> str:
        """A short multi-line summary: threshold, level, bounds, privacy, status, details."""
        lines = [
            f"Calibration({self.mechanism})",
            f"  threshold   {_short(self.threshold)}"
            + ("" if self.informative else "  (top of the range: trivial sets)"),
            f"  alpha       {_short(self.alpha)}, n_samples = {self.n_samples}"
            + ("" if self.target_level is None else f", target level {_short(self.target_level)}"),
            f"  coverage    {self._coverage_summary()}",
            f"  privacy     {_privacy_summary(self.privacy)}",
            f"  status      informative={self.informative}, feasible={self.feasible}"
            + ("" if self.coverage_holds else ", coverage guarantee NOT HOLDING"),
        ]
        if self.reason:
            lines.append(f"  reason      {self.reason}")
        if self.details:
            lines.append(f"  details     {_dict_summary(self.details)}")
        if self.owner_diagnostics:
            lines.append(
                f"  owner_diagnostics  {len(self.owner_diagnostics)} entries, not private "
                f"({', '.join(sorted(self.owner_diagnostics))})"
            )
        return "\n".join(lines)

    __str__ = __repr__

    def _coverage_summary(self) -> str:
        text = f">= {_short(self.coverage_lower_bound)}"
        text += (
            " (marginal)"
            if self.lower_bound_confidence == 1.0
            else f" (with probability {_short(self.lower_bound_confidence)} over the noise)"
        )
        if self.coverage_upper_bound is not None:
            text += f", <= {_short(self.coverage_upper_bound)}"
            if self.upper_bound_atom_slope:
                text += f" + {_short(self.upper_bound_atom_slope)} p_max"
        return text

    def upper_bound_with_atoms(self, p_max: float) -> float | None:
        """Coverage upper bound when single score values (or bins) have mass ``p_max``."""
        if self.coverage_upper_bound is None:
            return None
        return min(1.0, self.coverage_upper_bound + self.upper_bound_atom_slope * p_max)

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python representation (nested ``privacy`` as a dict)."""
        out = asdict(self)
        out["details"] = dict(self.details)
        out["owner_diagnostics"] = dict(self.owner_diagnostics)
        return out


def _short(value) -> str:
    """A number with 4 significant digits (other values through ``repr``, cut short)."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, float | np.floating):
        return f"{float(value):.4g}"
    text = repr(value)
    return text if len(text) <= 24 else text[:21] + "..."


def _dict_summary(values: dict[str, Any], limit: int = 6) -> str:
    shown = [f"{key}={_short(value)}" for key, value in list(values.items())[:limit]]
    more = len(values) - limit
    return ", ".join(shown) + (f", ... ({more} more)" if more > 0 else "")


def _privacy_summary(privacy: PrivacyGuarantee) -> str:
    if privacy.notion == "none":
        text = "none (epsilon = inf)"
    elif privacy.notion == "zcdp":
        text = (
            f"zCDP rho = {_short(privacy.rho)}, i.e. "
            f"({_short(privacy.epsilon)}, {_short(privacy.delta)})-DP"
        )
    else:
        text = f"{privacy.notion} epsilon = {_short(privacy.epsilon)}"
    text += f" ({privacy.adjacency})"
    return text if privacy.holds else text + ", NOT HOLDING"


@dataclass(frozen=True)
class CoverageCertificate:
    """Coverage a mechanism certifies from public quantities alone, before any data.

    What a calibration with ``n_samples`` scores at level ``alpha`` would be
    guaranteed, computed without reading data (so without spending privacy). Used by
    contract cards and the certificate-aware search ("Contract Cards for Auditable
    Private Conformal Prediction", 2026, Sec. 4).

    Parameters
    ----------
    lower_bound : float
        Lower bound ``L(c)`` on marginal coverage.
    confidence : float, default=1.0
        1 for a marginal guarantee; ``1 - beta`` if ``lower_bound`` only holds with that
        probability over the mechanism's noise.
    feasible : bool, default=True
        False when the level is unreachable: the calibration would return the trivial
        threshold (coverage 1, uninformative sets) without reading data.
    reason : str, default=""
        Why it is infeasible, or empty.
    """

    lower_bound: float
    confidence: float = 1.0
    feasible: bool = True
    reason: str = ""


@dataclass(frozen=True)
class Forecast:
    """What a calibration of ``n_samples`` rows at ``alpha`` will likely release.

    Parameters
    ----------
    n_samples : int
        Calibration size (public).
    alpha : float
        Miscoverage level.
    spread : float
        The public scenario: scores spread evenly over ``[0, spread]`` of the range.
    certificate : CoverageCertificate
        The coverage the mechanism certifies at this size (``feasible`` False: the
        release is the top of the range, without reading data).
    informative_probability : float
        Probability that the release is not the top of the range, in the scenario.
    expected_coverage : float
        Expected coverage of a new score drawn uniformly from ``[0, spread]``.
    ranks : ndarray of int
        Possible numbers ``C`` of calibration scores at or below the release.
    rank_probabilities : ndarray of float
        Their probabilities in the scenario.
    exact : bool
        True if computed from the mechanism's exact release distribution, False for a
        seeded Monte Carlo of :data:`MONTE_CARLO_RUNS` releases.
    agent_informative_probabilities : tuple of float or None, default=None
        Federated mechanisms: for each agent, the probability that its own message is
        not the top of the range (exact); None for central mechanisms.
    """

    n_samples: int
    alpha: float
    spread: float
    certificate: CoverageCertificate
    informative_probability: float
    expected_coverage: float
    ranks: np.ndarray
    rank_probabilities: np.ndarray
    exact: bool
    agent_informative_probabilities: tuple[float, ...] | None = None

    def summary(self) -> str:
        """One sentence for warnings and reports."""
        if not self.certificate.feasible:
            return f"at n = {self.n_samples} the level is unreachable (always trivial)"
        return (
            f"at n = {self.n_samples}, with scores filling the bottom {self.spread:.0%} of the "
            f"range, a release is informative with probability "
            f"{self.informative_probability:.3g} and covers about "
            f"{self.expected_coverage:.3f} on average"
        )


def summarise_forecast(
    certificate: CoverageCertificate,
    alpha: float,
    spread: float,
    scores: np.ndarray,
    distribution: tuple[np.ndarray, np.ndarray],
    **fields,
) -> Forecast:
    """The :class:`Forecast` of a release distribution on the idealised ``scores``.

    ``distribution`` is ``(values, log_probabilities)`` of the released threshold;
    ``fields`` are the remaining :class:`Forecast` fields (``exact``, and the agents'
    probabilities of federated mechanisms).
    """
    values, log_probabilities = distribution
    probabilities = np.exp(log_probabilities)
    scores = np.sort(scores)
    covered = np.searchsorted(scores, values, side="right")
    ranks, inverse = np.unique(covered, return_inverse=True)
    return Forecast(
        n_samples=int(scores.size),
        alpha=alpha,
        spread=spread,
        certificate=certificate,
        informative_probability=min(1.0, float(probabilities[values < 1.0].sum())),
        expected_coverage=min(1.0, float(probabilities @ np.minimum(values / spread, 1.0))),
        ranks=ranks,
        rank_probabilities=np.bincount(inverse, weights=probabilities, minlength=ranks.size),
        **fields,
    )


def _idealised_scores(n: int, spread: float) -> np.ndarray:
    return spread * (np.arange(n) + 0.5) / n


def infeasible_calibration(
    mechanism: str, n_samples: int, alpha: float, reason: str, **details
) -> Calibration:
    """The trivial release: threshold 1, full coverage, no data touched.

    What a mechanism returns for a request its coverage certificate says is infeasible
    (:meth:`QuantileMechanism.coverage_certificate`), decided from public quantities:
    it reads no score and carries a zero privacy loss.

    Parameters
    ----------
    mechanism : str
        The mechanism's name.
    n_samples : int
        Number of calibration scores (public).
    alpha : float
        Miscoverage level.
    reason : str
        Why the request is infeasible (public quantities only).
    **details
        Public details of the release.

    Returns
    -------
    Calibration
    """
    return Calibration(
        mechanism=mechanism,
        threshold=1.0,
        n_samples=n_samples,
        alpha=alpha,
        privacy=PrivacyGuarantee.untouched(
            "Infeasible request: the threshold is the top of the public range and was "
            "chosen from public quantities only, without reading the calibration data."
        ),
        coverage_lower_bound=1.0,
        coverage_upper_bound=1.0,
        feasible=False,
        reason=reason,
        details=details,
    )


class QuantileMechanism(BaseEstimator, metaclass=ABCMeta):
    """Base class of the (private) quantile mechanisms.

    Subclasses store their parameters untouched in ``__init__`` (so they work with
    ``clone``, ``set_params`` and ``GridSearchCV`` as ``mechanism__<param>``) and declare
    their accepted forms in ``_parameter_constraints`` (scikit-learn constraints, see
    :mod:`privconf_sklearn._param_validation`). Every public method validates them once
    (:meth:`_validated_params`) and passes the validated values, ``params``, to the
    helpers it calls; helpers never validate again. Subclasses implement
    ``_privacy_guarantee(params)``, ``_coverage_certificate(params, n_samples, alpha)``
    and either ``_calibrate_from_statistics(params, statistics, alpha, noise)`` (a
    release from the exact statistics of
    :class:`~privconf_sklearn.mechanisms.ScoreStatistics`, which makes
    :meth:`calibrate_from_statistics` available too; every mechanism of the library does
    this) or ``_calibrate(params, scores, alpha, groups, noise)`` (a release that needs
    the scores themselves).
    """

    #: Whether :meth:`calibrate` needs ``groups`` (one agent id per score).
    requires_groups: bool = False

    #: Largest ``n`` :meth:`forecast` computes from the exact release distribution
    #: (above it, a seeded Monte Carlo of the release).
    _exact_forecast_limit: int = 20_000

    #: Accepted forms of each constructor parameter (scikit-learn constraints).
    _parameter_constraints: dict[str, list] = {}

    def _validated_params(self) -> dict[str, Any]:
        """The constructor parameters, validated and in canonical form.

        The one validation of a public call. Subclasses add checks between parameters.

        Raises
        ------
        InvalidParameterError
            If a parameter has a form its constraints do not accept (naming it).
        """
        return validate_params(
            self._parameter_constraints, self.get_params(deep=False), type(self).__name__
        )

    def _method(self, name: str) -> str:
        """``"ExponQ.calibrate"``: the caller named in errors about a method's arguments."""
        return f"{type(self).__name__}.{name}"

    def privacy_guarantee(self) -> PrivacyGuarantee:
        """The guarantee a release of this mechanism carries, from parameters alone.

        Used to check a privacy budget before any data is read.
        """
        return self._privacy_guarantee(self._validated_params())

    @abstractmethod
    def _privacy_guarantee(self, params: dict) -> PrivacyGuarantee:
        """:meth:`privacy_guarantee` from validated parameters."""

    def coverage_certificate(self, n_samples: int, alpha: float) -> CoverageCertificate:
        """The coverage guarantee of a calibration on ``n_samples`` scores at ``alpha``.

        Computed from public quantities only; it equals the ``coverage_lower_bound``,
        ``lower_bound_confidence`` and ``feasible`` of the :class:`Calibration` that
        :meth:`calibrate` returns for the same ``(n_samples, alpha)``. ``feasible`` is
        False exactly when that release reads no data (:func:`infeasible_calibration`):
        the estimators reserve the privacy budget from it before reading any row.
        """
        alpha = check_alpha(alpha, self._method("coverage_certificate"))
        return self._coverage_certificate(self._validated_params(), n_samples, alpha)

    @abstractmethod
    def _coverage_certificate(
        self, params: dict, n_samples: int, alpha: float
    ) -> CoverageCertificate:
        """:meth:`coverage_certificate` from validated parameters and ``alpha``."""

    def _calibrate(
        self,
        params: dict,
        scores: np.ndarray,
        alpha: float,
        groups: np.ndarray | None,
        noise: NoiseSource,
    ) -> Calibration:
        """Compute the calibration on validated parameters and scores in [0, 1].

        The library's mechanisms release from exact statistics of the scores
        (:meth:`_calibrate_from_statistics`), so that :meth:`calibrate` and
        :meth:`calibrate_from_statistics` run the same code. A mechanism that needs the
        scores themselves overrides this method instead.
        """
        statistics = ScoreArray._checked(scores, groups)
        return self._calibrate_from_statistics(params, statistics, alpha, noise)

    def _calibrate_from_statistics(
        self, params: dict, statistics: ScoreStatistics, alpha: float, noise: NoiseSource
    ) -> Calibration:
        """Compute the calibration from the statistics of validated scores in [0, 1]."""
        raise NotImplementedError(
            f"{type(self).__name__} releases from the scores themselves, not from score "
            "statistics: use calibrate(scores, alpha)."
        )

    def calibrate(self, scores, alpha: float, *, groups=None, random_state=None) -> Calibration:
        """Release a threshold for ``1 - alpha`` coverage from scores in [0, 1].

        Parameters
        ----------
        scores : array-like of shape (n_samples,)
            Calibration scores already mapped to the public range [0, 1].
        alpha : float
            Miscoverage level in (0, 1).
        groups : array-like of shape (n_samples,), default=None
            Agent of each score, for federated mechanisms; must be None otherwise.
        random_state : None, int, RandomState or Generator, default=None
            Source of the privacy noise. ``None`` uses the operating system's
            cryptographic generator; anything else is reproducible and not meant for
            production.

        Returns
        -------
        Calibration
            Threshold and guarantees. A release at the top of the range (infeasible
            request, or noise that left the threshold there) comes with an
            :class:`UninformativeCalibrationWarning` and ``informative=False``.
        """
        scores, alpha, params = self._check_calibration_input(scores, alpha, "calibrate")
        groups = self._check_groups(groups, scores.shape[0])
        noise = check_noise_source(random_state)
        calibration = self._calibrate(params, scores, alpha, groups, noise)
        self._warn_if_trivial(params, calibration)
        return calibration

    def calibrate_from_statistics(
        self, statistics: ScoreStatistics, alpha: float, *, random_state=None
    ) -> Calibration:
        """Release a threshold from exact statistics of the scores instead of the scores.

        The release :meth:`calibrate` makes, computed from the answers of ``statistics``
        (bin counts, order statistics, count queries: see
        :class:`~privconf_sklearn.mechanisms.ScoreStatistics`): :meth:`calibrate` is this
        method on :class:`~privconf_sklearn.mechanisms.ScoreArray`, so for exact answers
        and the same ``random_state`` the two return the same :class:`Calibration`.
        :func:`privconf_sklearn.dask.fit_calibrate` answers from scores spread over a
        dask cluster. The mechanism fixes its parameters from ``statistics.n_samples``,
        ``alpha`` and its budget before asking anything, and an infeasible request asks
        nothing.

        Parameters
        ----------
        statistics : ScoreStatistics
            The calibration scores' statistics (scores in [0, 1], validated by whoever
            built them); with agent ids for federated mechanisms.
        alpha : float
            Miscoverage level in (0, 1).
        random_state : None, int, RandomState or Generator, default=None
            Source of the privacy noise, as for :meth:`calibrate`.

        Returns
        -------
        Calibration
            As :meth:`calibrate`.

        Raises
        ------
        InvalidParameterError
            For a bad ``alpha``, ``statistics`` that is not a
            :class:`~privconf_sklearn.mechanisms.ScoreStatistics`, or a bad parameter
            (a ``ValueError`` and a ``TypeError``).
        ValueError
            For groups given to a central mechanism (missing for a federated one).
        NotImplementedError
            For a mechanism that needs the scores themselves.
        """
        caller = self._method("calibrate_from_statistics")
        alpha = check_alpha(alpha, caller)
        params = self._validated_params()
        validate_params({"statistics": [ScoreStatistics]}, {"statistics": statistics}, caller)
        self._check_groups_given(statistics.has_groups)
        if statistics.n_samples < 1:
            raise ValueError("scores is empty: calibration needs at least one score.")
        noise = check_noise_source(random_state)
        calibration = self._calibrate_from_statistics(params, statistics, alpha, noise)
        self._warn_if_trivial(params, calibration)
        return calibration

    def _warn_if_trivial(self, params: dict, calibration: Calibration) -> None:
        if calibration.informative:
            return
        category = (
            UninformativeCalibrationWarning
            if calibration.feasible
            else InfeasibleCalibrationWarning
        )
        warn_at_caller(
            f"{type(self).__name__}: "
            f"{calibration.reason or 'the released threshold is the top of the range.'} "
            "Prediction sets will be the whole label set / intervals the whole score "
            f"range. {self._trivial_causes(params, calibration)}",
            category,
        )

    def _trivial_causes(self, params: dict, calibration: Calibration) -> str:
        """Every possible cause of a trivial release, with this mechanism's forecast."""
        n, alpha = calibration.n_samples, calibration.alpha
        if not calibration.feasible:
            return ""
        if not self._has_exact_distribution() or n > self._exact_forecast_limit:
            return (
                "Possible causes: (1) too few rows for this budget (mechanism.forecast(n, "
                "alpha) says how likely an informative release is at this size); (2) the "
                "model's own scores sit at the top of the range (check with SplitConformal() "
                "on non-sensitive data)."
            )
        try:
            filled = self._forecast(params, n, alpha, 1.0)
            half = self._forecast(params, n, alpha, 0.5)
            forecast = (
                f"(1) Too few rows for this budget: at n = {n} a release is informative with "
                f"probability {filled.informative_probability:.2g} when the scores fill the "
                f"public range and {half.informative_probability:.2g} when they fill its "
                "bottom half (mechanism.forecast(n, alpha)); more rows or a larger epsilon "
                "help. "
            )
        except ValueError:  # a forecast too large to simulate
            forecast = "(1) Too few rows for this budget (see mechanism.forecast(n, alpha)). "
        return (
            "Possible causes: "
            + forecast
            + "(2) The model's own scores sit at the top of the range: a forest's "
            "probabilities come in steps of 1/n_estimators, APS/RAPS scores of a binary "
            "task are often 1, a weak model's LAC scores crowd near 1; then no private or "
            "non-private threshold below the top covers enough scores. To tell which, "
            "calibrate the same model with SplitConformal() on non-sensitive data: if its "
            "sets are full too, the scores are the cause."
        )

    def min_informative_samples(self, alpha: float) -> int:
        """Smallest calibration size ``n`` with ``coverage_certificate(n, alpha).feasible``.

        From public quantities only (no data, no privacy spent): below this size the
        mechanism can only return the top of the range (all labels, intervals as wide
        as the bounds). Feasibility is non-decreasing in ``n`` for every mechanism of
        the library, so the answer is found by doubling and bisection
        (:func:`smallest_feasible_size`).

        Parameters
        ----------
        alpha : float
            Miscoverage level in (0, 1).

        Returns
        -------
        int

        Raises
        ------
        ValueError
            If no ``n`` up to ``10^15`` is feasible (e.g. a vanishing epsilon).
        """
        alpha = check_alpha(alpha, self._method("min_informative_samples"))
        return self._min_informative_samples(self._validated_params(), alpha)

    def _min_informative_samples(self, params: dict, alpha: float) -> int:
        """:meth:`min_informative_samples` from validated parameters and ``alpha``."""
        return smallest_feasible_size(
            lambda n: self._feasible(params, n, alpha), f"{self!r} at alpha = {alpha!r}"
        )

    def forecast(self, n_samples: int, alpha: float, *, spread: float = 1.0) -> Forecast:
        """What a calibration of ``n_samples`` rows will likely release, before any data.

        ``min_informative_samples`` says from which size the mechanism *can* release
        something other than the top of the range; the forecast says how likely it is
        to, and where the release will land. It runs the mechanism's own exact release
        distribution (``threshold_distribution``) on public, idealised scores: ``n``
        distinct scores spread evenly over the bottom ``spread`` of the public range,
        ``s_i = spread (i - 1/2) / n``, the rest empty. ``spread = 1`` is a model whose
        scores fill the range; a small ``spread`` is the case that makes private
        releases wander (an accurate classifier, regression scores under loose bounds).
        A mechanism without an exact distribution is forecast by a seeded Monte Carlo
        of its own release on the same scores. No data are read, no privacy is spent.

        Parameters
        ----------
        n_samples : int
            Calibration size (public), at most ``10^7``.
        alpha : float
            Miscoverage level in (0, 1).
        spread : float, default=1.0
            Share of the public range the idealised scores fill, in (0, 1].

        Returns
        -------
        Forecast
        """
        n_samples, alpha, spread = self._check_forecast_input(n_samples, alpha, spread, 1)
        return self._forecast(self._validated_params(), n_samples, alpha, spread)

    def _check_forecast_input(
        self, n_samples, alpha, spread, smallest: int
    ) -> tuple[int, float, float]:
        """Validated ``(n_samples, alpha, spread)`` of :meth:`forecast`."""
        caller = self._method("forecast")
        alpha = check_alpha(alpha, caller)
        checked = validate_params(
            {
                "n_samples": [Interval(Integral, smallest, MAX_FORECAST_SAMPLES, closed="both")],
                "spread": [Interval(Real, 0, 1, closed="right")],
            },
            {"n_samples": n_samples, "spread": spread},
            caller,
        )
        return checked["n_samples"], alpha, checked["spread"]

    def _forecast(self, params: dict, n_samples: int, alpha: float, spread: float) -> Forecast:
        """:meth:`forecast` from validated parameters and arguments."""
        certificate = self._coverage_certificate(params, n_samples, alpha)
        scores = spread * (np.arange(n_samples) + 0.5) / n_samples
        exact = self._has_exact_distribution() and n_samples <= self._exact_forecast_limit
        if exact:
            values, log_probabilities = self._forecast_distribution(params, scores, alpha)
        else:
            values, log_probabilities = monte_carlo_distribution(self, params, scores, alpha)
        return summarise_forecast(
            certificate, alpha, spread, scores, (values, log_probabilities), exact=exact
        )

    def _has_exact_distribution(self) -> bool:
        """Whether the mechanism computes its release's exact distribution."""
        return type(self)._threshold_distribution is not QuantileMechanism._threshold_distribution

    def _threshold_distribution(self, params: dict, scores: np.ndarray, alpha: float):
        """``(values, log_probabilities)`` of the release on validated scores, if exact."""
        raise NotImplementedError(f"{type(self).__name__} has no exact release distribution.")

    def _forecast_distribution(self, params: dict, scores: np.ndarray, alpha: float):
        """The release distribution a forecast uses (absolute accuracy suffices)."""
        return self._threshold_distribution(params, scores, alpha)

    def _needed_samples(self, params: dict, alpha: float) -> str:
        """``"at least N calibration scores"``, for messages; never raises.

        When no size up to :data:`MAX_PLANNED_SAMPLES` is feasible (a vanishing epsilon or
        alpha), says so instead of the error :meth:`min_informative_samples` raises.
        """
        try:
            return f"at least {self._min_informative_samples(params, alpha)} calibration scores"
        except ValueError:
            return f"more than {MAX_PLANNED_SAMPLES:.0e} calibration scores"

    def _feasible(self, params: dict, n_samples: int, alpha: float) -> bool:
        """Whether ``(n_samples, alpha)`` is feasible; subclasses may answer faster."""
        return self._coverage_certificate(params, n_samples, alpha).feasible

    def _check_calibration_input(
        self, scores, alpha, method: str
    ) -> tuple[np.ndarray, float, dict[str, Any]]:
        """Validated ``(scores, alpha, params)`` of a public method (errors in this order)."""
        alpha = check_alpha(alpha, self._method(method))
        params = self._validated_params()
        return check_unit_scores(scores), alpha, params

    def _check_groups_given(self, given: bool) -> None:
        if not self.requires_groups and given:
            raise ValueError(
                f"{type(self).__name__} is a central mechanism and takes no groups; "
                "pass groups only to federated mechanisms."
            )
        if self.requires_groups and not given:
            raise ValueError(
                f"{type(self).__name__} needs groups (one agent id per calibration row)."
            )

    def _check_groups(self, groups, n_samples: int):
        self._check_groups_given(groups is not None)
        if not self.requires_groups:
            return None
        groups = np.asarray(groups)
        if groups.ndim != 1 or groups.shape[0] != n_samples:
            raise ValueError(
                f"groups must be one-dimensional with one entry per calibration row "
                f"({n_samples}); got shape {groups.shape}."
            )
        return groups


def smallest_feasible_size(feasible, owner: str = "mechanism") -> int:
    """Smallest ``n >= 1`` with ``feasible(n)``, for a predicate non-decreasing in ``n``.

    Doubling finds a feasible size, bisection the smallest one: about ``2 log2(n)``
    evaluations.

    Raises
    ------
    ValueError
        If nothing up to :data:`MAX_PLANNED_SAMPLES` is feasible.
    """
    high = 1
    while not feasible(high):
        if high >= MAX_PLANNED_SAMPLES:
            raise ValueError(
                f"{owner}: no calibration size up to {MAX_PLANNED_SAMPLES:.0e} can return "
                "non-trivial sets at this level and budget."
            )
        high = min(2 * high, MAX_PLANNED_SAMPLES)
    low = high // 2  # infeasible (or 0)
    while high - low > 1:
        middle = (low + high) // 2
        if feasible(middle):
            high = middle
        else:
            low = middle
    return high


#: Runs of the Monte Carlo forecast for mechanisms without an exact distribution.
MONTE_CARLO_RUNS = 400

#: Largest calibration size a forecast simulates (its idealised scores are materialised).
MAX_FORECAST_SAMPLES = 10**7


def monte_carlo_distribution(
    mechanism: QuantileMechanism,
    params: dict,
    scores: np.ndarray,
    alpha: float,
    groups: np.ndarray | None = None,
):
    """Released thresholds of a seeded Monte Carlo, as (values, log-probabilities).

    Runs the release itself (``_calibrate``, without the trivial-release warning, which
    would ask for this very forecast); ``groups`` are the agent ids of a federated one.
    """
    noise = check_noise_source(np.random.default_rng(0))
    released = np.array(
        [
            mechanism._calibrate(params, scores, alpha, groups, noise).threshold
            for _ in range(MONTE_CARLO_RUNS)
        ]
    )
    values, counts = np.unique(released, return_counts=True)
    return values, np.log(counts / counts.sum())
