"""Private conformal prediction intervals for any regressor.

Regression scores are unbounded, so privacy needs public score bounds: the scores are
clipped to ``score_bounds = (low, high)`` and mapped to [0, 1] before any mechanism sees
them. Without public bounds the range is taken from the calibration data, which leaks
it: the estimator then warns (``diffprivlib.utils.PrivacyLeakWarning``) and marks the
privacy guarantee as not holding.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
from diffprivlib.utils import PrivacyLeakWarning
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils import get_tags
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ._base import BasePrivateConformal
from .scores.regression import CQR, AbsoluteResidual, check_predictions

__all__ = ["PrivateConformalRegressor", "QuantilePair", "ScoreBoundsWarning"]


class ScoreBoundsWarning(UserWarning):
    """Calibration scores fell outside the public ``score_bounds``, or reached the top.

    Scores outside the bounds are clipped to them (counted in
    ``calibration_.details``); a threshold at the upper bound gives intervals as wide
    as the bounds allow.
    """


def check_score_bounds(score_bounds) -> tuple[float, float]:
    """Validate public score bounds ``(low, high)``.

    Parameters
    ----------
    score_bounds : tuple of two real numbers
        Public range of the conformity score.

    Returns
    -------
    (float, float)

    Raises
    ------
    ValueError
        Unless ``score_bounds`` is a pair of finite reals with ``low < high`` and a
        finite ``high - low``.
    """
    valid_pair = (
        isinstance(score_bounds, tuple | list | np.ndarray)
        and len(score_bounds) == 2
        and all(
            isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)
            for value in score_bounds
        )
    )
    if not valid_pair:
        raise ValueError(
            "score_bounds must be None or a pair (low, high) of real numbers, the public "
            f"range of the conformity score; got {score_bounds!r}."
        )
    low, high = float(score_bounds[0]), float(score_bounds[1])
    if not (math.isfinite(low) and math.isfinite(high) and math.isfinite(high - low)):
        raise ValueError(f"score_bounds must be finite; got {score_bounds!r}.")
    if not low < high:
        raise ValueError(f"score_bounds = (low, high) needs low < high; got {score_bounds!r}.")
    return low, high


def check_targets(y) -> np.ndarray:
    """Regression targets as a finite float64 vector.

    Raises
    ------
    ValueError
        If ``y`` is not numeric or holds NaN or infinite values (naming rows).
    """
    y = column_or_1d(y, warn=True)
    if y.dtype.kind not in "iufO":
        raise ValueError(f"y must hold real-valued targets; got dtype {y.dtype}.")
    try:
        y = y.astype(np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"y must hold real-valued targets; could not read them: {exc}") from exc
    bad = ~np.isfinite(y)
    if bad.any():
        rows = np.flatnonzero(bad)
        raise ValueError(
            f"y contains NaN or infinite targets in {rows.size} rows, e.g. rows "
            f"{rows[:5].tolist()}: calibration needs finite targets."
        )
    return y


def _check_not_a_pair(estimator) -> None:
    if isinstance(estimator, tuple | list):
        raise TypeError(
            "estimator must be one regressor; for two quantile regressors use "
            "estimator=QuantilePair(lower, upper) with conformity_score='cqr'."
        )


class QuantilePair(RegressorMixin, BaseEstimator):
    """Two quantile regressors as one estimator, for the CQR score.

    ``predict_quantiles(X)`` returns ``[lower.predict(X), upper.predict(X)]`` as an
    ``(n_samples, 2)`` array, which is what :class:`~privconf_sklearn.scores.CQR`
    reads. ``predict(X)`` returns the midpoint of the two, a point prediction for
    ``score`` and pipelines.

    If ``lower`` and ``upper`` are already fitted, the pair is usable as it is (use it
    with ``prefit=True``). :meth:`fit` fits clones of both on the same data (used by
    ``prefit=False``).

    Parameters
    ----------
    lower, upper : regressor
        Quantile regressors for the lower and upper quantile, e.g.
        ``GradientBoostingRegressor(loss="quantile", alpha=0.05)`` and ``alpha=0.95``.

    Attributes
    ----------
    lower_, upper_ : regressor
        The fitted clones (only after :meth:`fit`).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import QuantileRegressor
    >>> from privconf_sklearn import QuantilePair
    >>> X = np.arange(20.0)[:, None]; y = X.ravel() + np.tile([-1.0, 1.0], 10)
    >>> pair = QuantilePair(QuantileRegressor(quantile=0.1, alpha=0.0),
    ...                     QuantileRegressor(quantile=0.9, alpha=0.0)).fit(X, y)
    >>> pair.predict_quantiles(X[:1]).shape
    (1, 2)
    """

    def __init__(self, lower, upper):
        self.lower = lower
        self.upper = upper

    def fit(self, X, y, **fit_params):
        """Fit clones of ``lower`` and ``upper`` on ``(X, y)``.

        Returns
        -------
        self : object
        """
        y = column_or_1d(y, warn=True)  # one target: its lower and upper quantiles
        lower = clone(self.lower).fit(X, y, **fit_params)
        upper = clone(self.upper).fit(X, y, **fit_params)
        self.lower_, self.upper_ = lower, upper
        if hasattr(lower, "n_features_in_"):
            self.n_features_in_ = lower.n_features_in_
        if hasattr(lower, "feature_names_in_"):
            self.feature_names_in_ = lower.feature_names_in_
        return self

    def _models(self):
        if hasattr(self, "lower_"):
            return self.lower_, self.upper_
        for name in ("lower", "upper"):
            model = getattr(self, name)
            try:
                check_is_fitted(model)
            except NotFittedError as exc:
                raise NotFittedError(
                    f"QuantilePair: the {name} regressor {type(model).__name__} is not "
                    "fitted; fit both, or call QuantilePair.fit."
                ) from exc
        return self.lower, self.upper

    def __sklearn_is_fitted__(self) -> bool:
        try:
            self._models()
        except NotFittedError:
            return False
        return True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        lower, upper = get_tags(self.lower).input_tags, get_tags(self.upper).input_tags
        tags.input_tags.allow_nan = lower.allow_nan and upper.allow_nan
        tags.input_tags.sparse = lower.sparse and upper.sparse
        return tags

    def predict_quantiles(self, X) -> np.ndarray:
        """Lower and upper quantile predictions, shape ``(n_samples, 2)``."""
        lower, upper = self._models()
        columns = [
            check_predictions(
                model.predict(X),
                1,
                source=f"QuantilePair.{name} {type(model).__name__}.predict",
                expected="one quantile prediction per row",
            )
            for name, model in (("lower", lower), ("upper", upper))
        ]
        return np.column_stack(columns)

    def predict(self, X) -> np.ndarray:
        """Midpoint ``(lower + upper) / 2`` of the two quantile predictions."""
        quantiles = self.predict_quantiles(X)
        return 0.5 * (quantiles[:, 0] + quantiles[:, 1])


class PrivateConformalRegressor(RegressorMixin, BasePrivateConformal):
    """Prediction intervals with private conformal calibration for any regressor.

    Wraps a regressor (a diffprivlib ``LinearRegression``, any scikit-learn regressor,
    or a :class:`QuantilePair` of quantile regressors) and calibrates a score threshold
    ``threshold_`` on held-out data with a quantile ``mechanism``. The intervals
    ``{y : score(x, y) <= threshold_}`` contain the true target with probability at
    least ``calibration_.coverage_lower_bound`` (with probability
    ``calibration_.lower_bound_confidence`` over the noise) for exchangeable data, and
    the threshold is released under ``calibration_.privacy``.

    Public score bounds. Mechanisms work on the public range [0, 1]. Calibration scores
    are clipped to ``score_bounds = (low, high)`` and mapped by
    ``u = (s - low) / (high - low)``; the released threshold ``t`` in [0, 1] is mapped
    back to ``threshold_``, the largest score whose image is at most ``t``, found
    exactly on the float64 grid, so a score is covered iff its image is at most ``t``
    (the same floats at calibration and prediction). For a non-private mechanism
    (``SplitConformal``) the threshold is the calibration score the mechanism picked, so
    intervals equal MAPIE's ``SplitConformalRegressor`` ones bit for bit.

    - Scores below ``low`` never matter (they are covered by every interval). Scores
      above ``high`` are clipped to ``high``: calibration counts them
      (``calibration_.details["n_scores_above_bounds"]`` and
      ``"n_scores_below_bounds"``) and warns
      with :class:`ScoreBoundsWarning`. As long as the threshold is below ``high``,
      clipping does not change the coverage guarantee. In general the mechanism
      certifies the clipped score, so coverage is at least
      ``coverage_lower_bound - P(score > high)``: exactly the stated bound when the
      public bounds are right.
    - A threshold at the top of the range (``threshold_ == score_bounds_[1]``,
      ``threshold_at_upper_bound_`` and ``calibration_.details["threshold_at_upper_bound"]``
      True, e.g. an infeasible request) gives intervals as wide as the bounds allow.
      They miss every target whose score exceeds ``high``: the stated coverage then
      assumes the score never exceeds the upper bound
      (``calibration_.details["coverage_assumes_scores_within_bounds"]``). If
      calibration scores did exceed it, a :class:`ScoreBoundsWarning` says that the
      stated coverage does not hold (e.g. a model whose predictions are far off the
      public target range: every score is clipped, the threshold goes to the top, and
      almost no interval covers).
    - ``score_bounds=None`` takes ``(min, max)`` of the calibration scores. That reveals
      them: a ``diffprivlib.utils.PrivacyLeakWarning`` is raised and
      ``calibration_.privacy.holds`` is False. Use it for non-private experiments only.

    The clipping counts and the ``score_bounds=None`` range are data-dependent
    diagnostics for the data owner; they are not covered by the privacy guarantee.

    Parameters
    ----------
    estimator : regressor
        Fitted (``prefit=True``) or to be fitted (``prefit=False``) regressor. Features
        are passed to it untouched. For ``conformity_score="cqr"`` it must give two
        quantiles per row (see :class:`~privconf_sklearn.scores.CQR`), e.g. a
        :class:`QuantilePair`.
    mechanism : QuantileMechanism
        How the threshold is released: ``ExponQ(epsilon)``, ``SplitConformal()``...
        Keyword-only and without default, so privacy is always a visible choice.
    alpha : float, default=0.1
        Target miscoverage in (0, 1).
    conformity_score : {"absolute", "cqr"} or RegressionScore, default="absolute"
        Conformity score (named like MAPIE's, since ``score`` is the scikit-learn R^2
        method): ``"absolute"`` is ``|y - f(x)|``
        (:class:`~privconf_sklearn.scores.AbsoluteResidual`), ``"cqr"`` the conformalized
        quantile regression score (:class:`~privconf_sklearn.scores.CQR`); pass a
        :class:`~privconf_sklearn.scores.NormalizedResidual` instance for
        ``|y - f(x)| / sigma(x)``.
    score_bounds : tuple (low, high) or None, default=None
        Public range of the conformity score, chosen without looking at the calibration
        data (e.g. from the known range of the target: for ``|y - f(x)|`` with ``y`` and
        ``f(x)`` in ``[a, b]``, ``(0, b - a)``). None takes it from the data and breaks
        privacy (see above).
    prefit : bool, default=True
        If True, ``estimator`` is already fitted and ``fit`` only calibrates; it is kept
        by reference, also through ``clone``. If False, ``fit`` fits a clone on part of
        the data and calibrates on the rest.
    calibration_size : float or int, default=0.3
        With ``prefit=False``: fraction (float) or number (int) of rows used for
        calibration.
    random_state : None, int, RandomState or Generator, default=None
        Privacy noise source. ``None`` draws it from the operating system's
        cryptographic generator, the only production setting. A seed makes results
        reproducible and anyone who knows it can remove the noise: tests and
        experiments only. Also seeds the ``prefit=False`` split.
    accountant : diffprivlib.BudgetAccountant, default=None
        Ledger that calibration checks and spends its privacy budget on; None uses
        diffprivlib's default accountant. Kept by reference through ``clone``.

    Attributes
    ----------
    estimator_ : regressor
        The fitted regressor used (the given one when ``prefit=True``).
    score_ : RegressionScore
        The conformity score used.
    mechanism_ : QuantileMechanism
        A copy of the mechanism used.
    calibration_ : Calibration
        Threshold (on [0, 1]), coverage bounds, privacy guarantee and details, including
        ``score_bounds``, ``score_bounds_source`` (``"public"`` or ``"calibration data"``),
        ``n_scores_below_bounds``, ``n_scores_above_bounds``, ``threshold_at_upper_bound``
        and ``diagnostics_are_private`` (False: the counts are not covered by the privacy
        guarantee).
    threshold_ : float
        Score threshold: ``y`` is in the interval of ``x`` iff ``score(x, y) <= threshold_``.
    score_bounds_ : tuple of float
        The score range mapped to [0, 1].
    threshold_at_upper_bound_ : bool
        True when ``threshold_`` is the upper score bound: the intervals are as wide as
        the bounds allow.
    n_features_in_ : int
        Copied from the estimator when it has it.
    feature_names_in_ : ndarray of str
        Copied from the estimator when it has it.

    See Also
    --------
    privconf_sklearn.PrivateConformalClassifier : The same for classification sets.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> from privconf_sklearn import PrivateConformalRegressor
    >>> from privconf_sklearn.mechanisms import ExponQ
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(6000, 2)); y = X @ [1.0, 2.0] + rng.normal(size=6000)
    >>> model = LinearRegression().fit(X[:3000], y[:3000])
    >>> pcr = PrivateConformalRegressor(model, mechanism=ExponQ(epsilon=1.0), alpha=0.1,
    ...                                 score_bounds=(0.0, 10.0), random_state=0)
    >>> intervals = pcr.fit_calibrate(X[3000:], y[3000:]).predict_interval(X[:2])
    >>> intervals.shape
    (2, 2)
    >>> bool(1.6 < pcr.threshold_ < 1.9), pcr.calibration_.privacy.epsilon
    (True, 1.0)
    """

    _score_aliases = {"absolute": AbsoluteResidual, "cqr": CQR}

    def __init__(
        self,
        estimator,
        *,
        mechanism,
        alpha: float = 0.1,
        conformity_score="absolute",
        score_bounds=None,
        prefit: bool = True,
        calibration_size=0.3,
        random_state=None,
        accountant=None,
    ):
        self.estimator = estimator
        self.mechanism = mechanism
        self.alpha = alpha
        self.conformity_score = conformity_score
        self.score_bounds = score_bounds
        self.prefit = prefit
        self.calibration_size = calibration_size
        self.random_state = random_state
        self.accountant = accountant

    # ------------------------------------------------------------------ hooks
    def _encode_targets(self, y, estimator) -> np.ndarray:
        return check_targets(y)

    def _public_bounds(self, score, scores: np.ndarray):
        """Clip to the public ``score_bounds``, or take the range from the data (leak)."""
        if self.score_bounds is None:
            warnings.warn(
                "score_bounds=None: the score range is taken from the calibration data "
                "(its minimum and maximum score), which leaks them; the privacy "
                "guarantee does not hold. Pass public score_bounds=(low, high).",
                PrivacyLeakWarning,
                stacklevel=2,
            )
            low, high = float(scores.min()), float(scores.max())
            if low == high:  # one distinct score: the narrowest non-empty range
                high = float(np.nextafter(low, np.inf))
            if not math.isfinite(high - low):
                raise ValueError(
                    f"The calibration scores span [{low!r}, {high!r}], too wide for float64; "
                    "pass score_bounds."
                )
            return (low, high), scores, _bounds_record((low, high), "calibration data", 0, 0)
        low, high = check_score_bounds(self.score_bounds)
        n_below = int(np.count_nonzero(scores < low))
        n_above = int(np.count_nonzero(scores > high))
        if n_below or n_above:
            warnings.warn(
                f"{n_below + n_above} of {scores.shape[0]} calibration scores lie outside "
                f"score_bounds = ({low!r}, {high!r}) ({n_below} below, {n_above} above) "
                "and were clipped. Clipping keeps the privacy guarantee; scores above the "
                "upper bound are covered only if the threshold stays below it.",
                ScoreBoundsWarning,
                stacklevel=2,
            )
            scores = np.clip(scores, low, high)
        return (low, high), scores, _bounds_record((low, high), "public", n_below, n_above)

    def _broken_privacy_reason(self, bounds_record: dict) -> str | None:
        if bounds_record["score_bounds_source"] == "public":
            return None
        return (
            "score_bounds=None: the public score range was taken from the calibration data "
            "(minimum and maximum score)."
        )

    def _calibration_record(self, calibration, bounds_record: dict) -> dict:
        at_top = calibration.threshold >= 1.0
        return {
            **bounds_record,
            "threshold_at_upper_bound": at_top,
            # At the top of the range the interval misses scores above the upper bound,
            # which the mechanism (seeing clipped scores) counts as covered.
            "coverage_assumes_scores_within_bounds": at_top,
        }

    def _set_extra_fitted_attributes(self, estimator, bounds_record: dict) -> None:
        self.threshold_at_upper_bound_ = bool(self.calibration_.threshold >= 1.0)
        n_above = bounds_record["n_scores_above_bounds"]
        if self.threshold_at_upper_bound_ and (self.calibration_.feasible or n_above):
            violated = (
                f"; {n_above} calibration scores did, so for such data the stated coverage "
                "does NOT hold: widen score_bounds or check the model"
                if n_above
                else ""
            )
            warnings.warn(
                f"The threshold is the upper score bound {self.score_bounds_[1]!r}: "
                "intervals are as wide as score_bounds allow and miss every target whose "
                "score exceeds it. The stated coverage assumes no score exceeds the upper "
                f"bound{violated}.",
                ScoreBoundsWarning,
                stacklevel=3,
            )

    # ------------------------------------------------------------------- fit
    def fit(self, X, y, groups=None, **fit_params):
        """Fit (unless ``prefit``) and calibrate.

        With ``prefit=True`` this is :meth:`fit_calibrate`. With ``prefit=False`` a
        clone of the estimator is fitted on ``1 - calibration_size`` of the rows and the
        rest calibrate.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Features, passed to the estimator untouched.
        y : array-like of shape (n_samples,)
            Finite real targets.
        groups : array-like of shape (n_samples,), default=None
            Agent id of each row, for federated mechanisms only.
        **fit_params : dict
            Passed to the estimator's ``fit`` when ``prefit=False``.

        Returns
        -------
        self : object
            The calibrated estimator.
        """
        _check_not_a_pair(self.estimator)
        return super().fit(X, y, groups=groups, **fit_params)

    def fit_calibrate(self, X, y, groups=None):
        """Calibrate the already fitted estimator on ``(X, y)``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Calibration features, passed to the estimator untouched.
        y : array-like of shape (n_samples,)
            Finite real calibration targets.
        groups : array-like of shape (n_samples,), default=None
            Agent id of each row, for federated mechanisms only.

        Returns
        -------
        self : object
            The calibrated estimator.
        """
        _check_not_a_pair(self.estimator)
        return super().fit_calibrate(X, y, groups=groups)

    # --------------------------------------------------------------- predict
    def predict_set(self, X, *, batch_size: int | None = None) -> np.ndarray:
        """Prediction intervals at the calibrated threshold.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Test features.
        batch_size : int, default=None
            Process rows in batches of this size to bound the memory held for the
            estimator's outputs.

        Returns
        -------
        ndarray of shape (n_samples, 2)
            Lower and upper ends of the closed intervals (float64).
        """
        return super().predict_set(X, batch_size=batch_size)

    def predict_interval(self, X, *, batch_size: int | None = None) -> np.ndarray:
        """Alias of :meth:`predict_set`: ``(n_samples, 2)`` lower and upper ends."""
        return self.predict_set(X, batch_size=batch_size)


def _bounds_record(bounds, source: str, n_below: int, n_above: int) -> dict:
    return {
        "score_bounds": (float(bounds[0]), float(bounds[1])),
        "score_bounds_source": source,
        "n_scores_below_bounds": n_below,
        "n_scores_above_bounds": n_above,
        # The clipping counts (and data-derived bounds) are computed from the exact
        # calibration scores: diagnostics for the data owner, not covered by the privacy
        # guarantee (the key mechanisms use for such diagnostics).
        "diagnostics_are_private": False,
    }
