"""Private conformal prediction intervals for any regressor.

Regression scores are unbounded, so privacy needs public score bounds: the scores are
clipped to ``score_bounds = (low, high)`` and mapped to [0, 1] before any mechanism sees
them. Without public bounds the range is taken from the calibration data, which leaks
it: the estimator then warns (:class:`PrivacyLeakWarning`, also diffprivlib's when it
can be imported) and marks the privacy guarantee as not holding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone, is_classifier
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ._base import (
    BasePrivateConformal,
    DefaultScoreWarningMixin,
    check_is_estimator,
    common_constraints,
    inner_input_tags,
)
from ._diffprivlib import PrivacyLeakWarning, warn_privacy_leak
from ._groups import GroupIndex, group_ids_of_rows
from ._param_validation import Bounds
from ._warnings import warn_at_caller
from .mechanisms import Calibration
from .mondrian import MondrianCalibration
from .scores import CQR, AbsoluteResidual, check_predictions

__all__ = [
    "PrivacyLeakWarning",
    "PrivateConformalRegressor",
    "QuantilePair",
    "ScoreBoundsWarning",
]


class ScoreBoundsWarning(UserWarning):
    """Calibration scores fell outside the public ``score_bounds``, or reached the top.

    Scores outside the bounds are clipped to them (counted in
    ``calibration_.owner_diagnostics``); a threshold at the upper bound gives intervals
    as wide as the bounds allow.
    """


def check_targets(y) -> np.ndarray:
    """Regression targets as a finite float64 vector.

    Raises
    ------
    TypeError
        If ``y`` does not have an integer or floating dtype (strings, booleans, object
        arrays are never converted silently).
    ValueError
        If ``y`` holds NaN or infinite values (naming rows).
    """
    y = column_or_1d(y, warn=True)
    if y.dtype.kind not in "iuf":
        raise TypeError(
            f"y must hold real-valued targets (an integer or floating dtype); got dtype "
            f"{y.dtype} (Unknown label type for regression). Convert them explicitly, e.g. "
            "y.astype(float)."
        )
    y = y.astype(np.float64, copy=False)
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

    def _check_members(self) -> None:
        """Both members are scikit-learn estimators (``InvalidParameterError`` naming it)."""
        for name in ("lower", "upper"):
            check_is_estimator(getattr(self, name), name, "QuantilePair")

    def fit(self, X, y, **fit_params):
        """Fit clones of ``lower`` and ``upper`` on ``(X, y)``.

        Returns
        -------
        self : object
        """
        self._check_members()
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
        self._check_members()
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
        lower, upper = inner_input_tags(self.lower), inner_input_tags(self.upper)
        if lower is not None and upper is not None:  # else refused by name when used
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


class PrivateConformalRegressor(DefaultScoreWarningMixin, RegressorMixin, BasePrivateConformal):
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
      (``calibration_.owner_diagnostics["n_scores_above_bounds"]`` and
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
      calibration scores did exceed it, the stated coverage does not hold:
      ``calibration_.coverage_holds`` is False, ``calibration_.reason`` says why and a
      :class:`ScoreBoundsWarning` says so too (e.g. a model whose predictions are far
      off the public target range: every score is clipped, the threshold goes to the
      top, and almost no interval covers).
    - ``score_bounds=None`` takes ``(min, max)`` of the calibration scores. That reveals
      them: a :class:`PrivacyLeakWarning` is raised and
      ``calibration_.privacy.holds`` is False. Use it for non-private experiments only.

    The clipping counts and the ``score_bounds=None`` range are data-dependent
    diagnostics for the data owner, kept in ``calibration_.owner_diagnostics``; they are
    not covered by the privacy guarantee and are never published.

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
    mondrian : None or callable, default=None
        Mondrian (group-conditional) calibration: a callable ``mondrian(X) -> group
        ids`` (one hashable id per row, a public function of the features, e.g. a
        binning of one column) gives every group its own threshold, released by a copy
        of ``mechanism`` on that group's rows, and coverage within every group. Needs
        ``group_sizes``. See :mod:`privconf_sklearn.mondrian` and the user guide.
    group_sizes : None, "public" or PrivateGroupSizes, default=None
        With ``mondrian`` (required there, None otherwise): ``"public"`` treats every
        group's calibration size as public;
        :class:`~privconf_sklearn.mondrian.PrivateGroupSizes` releases them with their
        own privacy budget.
    adjacency : {"replace-one", "add/remove"}, default="replace-one"
        The neighbouring relation the privacy guarantee is stated under, recorded in
        ``calibration_.privacy`` and spent on the ledger.
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
        experiments only. Also drives the ``prefit=False`` split, which is not privacy
        noise (there ``None`` is numpy's global generator). A ``RandomState`` or
        ``Generator`` is used as given, so every draw (noise, split) advances it; an
        int starts from the seed at every draw.
    accountant : ledger or None, default=None
        Ledger that calibration charges its privacy budget to, checking and spending it
        in one step before the model sees a calibration row: any object with
        ``check(epsilon, delta)`` and ``spend(epsilon, delta)``, such as a diffprivlib
        ``BudgetAccountant``. None uses diffprivlib's default accountant (an error,
        before any data is read, if diffprivlib cannot be imported). Kept by reference
        through ``clone``; an estimator unpickled in another process refuses to calibrate
        rather than spend on a copy.

    Attributes
    ----------
    estimator_ : regressor
        The fitted regressor used (the given one when ``prefit=True``).
    score_ : RegressionScore
        The conformity score used.
    mechanism_ : QuantileMechanism
        A copy of the mechanism used.
    calibration_ : Calibration or MondrianCalibration
        Threshold (on [0, 1]), coverage bounds, privacy guarantee (under ``adjacency``)
        and details: ``score_bounds`` (public bounds only), ``score_bounds_source``
        (``"public"`` or ``"calibration data"``), ``threshold_at_upper_bound`` and
        ``coverage_assumes_scores_within_bounds``. ``owner_diagnostics`` holds the
        data-dependent ``n_scores_below_bounds``, ``n_scores_above_bounds`` and, for
        ``score_bounds=None``, the data-derived ``score_bounds``. With ``mondrian``, a
        :class:`~privconf_sklearn.mondrian.MondrianCalibration` whose groups carry these.
    threshold_ : float
        Score threshold: ``y`` is in the interval of ``x`` iff ``score(x, y) <= threshold_``.
        Not set with ``mondrian``.
    groups_ : ndarray of shape (n_groups,)
        With ``mondrian``: the group ids.
    group_thresholds_ : ndarray of shape (n_groups,)
        With ``mondrian``: each group's score threshold.
    mondrian_ : callable
        With ``mondrian``: the grouping used at calibration, and at prediction.
    score_bounds_ : tuple of float
        The score range mapped to [0, 1].
    threshold_at_upper_bound_ : bool
        True when ``threshold_`` (with ``mondrian``: some group's threshold) is the upper
        score bound: those intervals are as wide as the bounds allow.
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

    _model_score = "R^2"
    _score_aliases = {"absolute": AbsoluteResidual, "cqr": CQR}
    _parameter_constraints = {
        **common_constraints(_score_aliases, mondrian_options=()),
        "score_bounds": [None, Bounds()],
    }
    _fitted_attribute_names = (
        *BasePrivateConformal._fitted_attribute_names,
        "threshold_at_upper_bound_",
    )

    def __init__(
        self,
        estimator,
        *,
        mechanism,
        alpha: float = 0.1,
        conformity_score="absolute",
        score_bounds=None,
        mondrian=None,
        group_sizes=None,
        adjacency="replace-one",
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
        self.mondrian = mondrian
        self.group_sizes = group_sizes
        self.adjacency = adjacency
        self.prefit = prefit
        self.calibration_size = calibration_size
        self.random_state = random_state
        self.accountant = accountant

    # ------------------------------------------------------------------ hooks
    def _check_estimator_kind(self, estimator) -> None:
        _check_not_a_pair(estimator)
        check_is_estimator(estimator, "estimator", type(self).__name__)
        if is_classifier(estimator):
            raise TypeError(
                f"estimator must be a regressor; got the classifier "
                f"{type(estimator).__name__}. Use PrivateConformalClassifier for "
                "classification."
            )

    def _encode_targets(self, y, estimator) -> np.ndarray:
        return check_targets(y)

    def _public_range(self, score, data_range):
        """The public ``score_bounds``, or the range of the data (a leak, with a warning)."""
        if self.score_bounds is None:
            warn_privacy_leak(
                "score_bounds=None: the score range is taken from the calibration data "
                "(its minimum and maximum score), which leaks them; the privacy "
                "guarantee does not hold. Pass public score_bounds=(low, high)."
            )
            low, high = data_range()
            if low == high:  # one distinct score: the narrowest non-empty range
                high = float(np.nextafter(low, np.inf))
            if not math.isfinite(high - low):
                raise ValueError(
                    f"The calibration scores span [{low!r}, {high!r}], too wide for float64; "
                    "pass score_bounds."
                )
            return low, high, False
        low, high = Bounds().convert(self.score_bounds)  # validated by the plan
        return low, high, True

    def _clip_to_range(self, score, scores: np.ndarray, low, high):
        """Scores clipped to ``[low, high]``, and the masks of those below and above."""
        below, above = scores < low, scores > high
        if below.any() or above.any():
            scores = np.clip(scores, low, high)
        return scores, below, above

    def _range_record(self, low, high, public: bool, below, above, n_samples: int, clipped):
        """:class:`_ScoreRange`, with a warning if scores were clipped.

        ``below`` and ``above`` are masks and ``clipped`` the clipped scores (in memory),
        or counts and the largest clipped score.
        """
        masks = isinstance(below, np.ndarray)
        n_below = int(np.count_nonzero(below)) if masks else int(below)
        n_above = int(np.count_nonzero(above)) if masks else int(above)
        if n_below or n_above:
            warn_at_caller(
                f"{n_below + n_above} of {n_samples} calibration scores lie outside "
                f"score_bounds = ({low!r}, {high!r}) ({n_below} below, {n_above} above) "
                "and were clipped. Clipping keeps the privacy guarantee; scores above the "
                "upper bound are covered only if the threshold stays below it.",
                ScoreBoundsWarning,
            )
        return _ScoreRange(
            low,
            high,
            public=public,
            n_below=n_below,
            n_above=n_above,
            below=below if masks else None,
            above=above if masks else None,
            scores=clipped if masks else None,
            largest=None if masks else clipped,
        )

    def _broken_privacy_reason(self, bounds_record) -> str | None:
        if bounds_record.public:
            return None
        return (
            "score_bounds=None: the public score range was taken from the calibration data "
            "(minimum and maximum score)."
        )

    def _finish_release(self, calibration: Calibration, bounds_record, rows) -> Calibration:
        """Public bounds record in ``details``; clipping counts in ``owner_diagnostics``.

        A release at the top of the range misses every score above the upper bound: if
        calibration scores (of the rows this release read) were above it, the stated
        coverage does not hold (``coverage_holds`` False, with the reason).
        """
        at_top = bool(calibration.threshold >= 1.0)
        n_below, n_above = bounds_record.count_outside(rows)
        details: dict[str, Any] = {
            "score_bounds_source": "public" if bounds_record.public else "calibration data",
            "threshold_at_upper_bound": at_top,
            # At the top of the range the interval misses scores above the upper bound,
            # which the mechanism (seeing clipped scores) counts as covered.
            "coverage_assumes_scores_within_bounds": at_top,
        }
        owner: dict[str, Any] = {"n_scores_below_bounds": n_below, "n_scores_above_bounds": n_above}
        largest_score = bounds_record.largest_score(rows)
        if calibration.informative and largest_score is not None:
            # Owner-side: a threshold above every calibration score means the grid's
            # resolution over score_bounds and the privacy margin, not the data, set the
            # interval width (loose public bounds); warned about, never published.
            largest = (largest_score - bounds_record.low) / (bounds_record.high - bounds_record.low)
            owner["threshold_above_every_score"] = bool(calibration.threshold > largest)
        bounds = (bounds_record.low, bounds_record.high)
        if bounds_record.public:
            details["score_bounds"] = bounds
        else:
            owner["score_bounds"] = bounds
        changes: dict = {
            "details": {**calibration.details, **details},
            "owner_diagnostics": {**calibration.owner_diagnostics, **owner},
        }
        if at_top and n_above:
            why = (
                f"The threshold is the upper score bound {bounds_record.high!r} and "
                f"{n_above} calibration scores exceeded it: intervals miss such targets, "
                "so the stated coverage does not hold (widen score_bounds or check the model)."
            )
            changes["coverage_holds"] = False
            changes["reason"] = f"{calibration.reason} {why}".strip()
        return replace(calibration, **changes)

    def _warn_about_releases(self, releases: list[Calibration], bounds_record) -> None:
        if any(c.owner_diagnostics.get("threshold_above_every_score") for c in releases):
            warn_at_caller(
                "The released threshold exceeds every calibration score: the interval width "
                "is set by the mechanism's grid over score_bounds = "
                f"({bounds_record.low!r}, {bounds_record.high!r}) and its privacy margin, "
                "not by the data. Narrower public score_bounds (or more calibration rows, "
                "or a larger epsilon) give narrower intervals.",
                ScoreBoundsWarning,
            )
        for calibration in releases:
            n_above = calibration.owner_diagnostics["n_scores_above_bounds"]
            if calibration.threshold >= 1.0 and (calibration.feasible or n_above):
                violated = (
                    f"; {n_above} calibration scores did, so for such data the stated "
                    "coverage does NOT hold: widen score_bounds or check the model"
                    if n_above
                    else ""
                )
                warn_at_caller(
                    f"The threshold is the upper score bound {bounds_record.high!r}: "
                    "intervals are as wide as score_bounds allow and miss every target whose "
                    "score exceeds it. The stated coverage assumes no score exceeds the upper "
                    f"bound{violated}.",
                    ScoreBoundsWarning,
                )
                return

    def _extra_fitted_attributes(self, estimator, calibration) -> dict:
        groups = getattr(calibration, "groups", None)
        releases = [g.calibration for g in groups] if groups is not None else [calibration]
        return {"threshold_at_upper_bound_": any(c.threshold >= 1.0 for c in releases)}

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

    _output_name = "intervals"
    _trivial_output = "each as wide as the score bounds allow"

    def _every_output_trivial(self, outputs: np.ndarray, X) -> bool:
        """Whether every row's threshold is the top of the score range."""
        top = self.score_bounds_[1]
        if not isinstance(self.calibration_, MondrianCalibration):
            return bool(self.threshold_ >= top)
        codes = GroupIndex(self.groups_.tolist()).codes(
            group_ids_of_rows(self.mondrian_, X, outputs.shape[0])
        )
        thresholds = np.where(codes < 0, top, self.group_thresholds_[np.maximum(codes, 0)])
        return bool(np.all(thresholds >= top))


@dataclass(frozen=True)
class _ScoreRange:
    """How the score range was set, which calibration rows were clipped, the clipped scores.

    All owner-side: nothing here is published. ``below``, ``above`` and ``scores`` are
    the clipped rows' masks and the clipped scores when the scores were in memory (for
    the per-group values of Mondrian calibration); None when only the totals are known
    (``n_below``, ``n_above`` and ``largest``, the largest clipped score, or None for no
    rows).
    """

    low: float
    high: float
    public: bool
    n_below: int
    n_above: int
    below: np.ndarray | None = None
    above: np.ndarray | None = None
    scores: np.ndarray | None = None
    largest: float | None = None

    def count_outside(self, rows) -> tuple[int, int]:
        """Numbers of clipped rows below and above the range among ``rows``."""
        if isinstance(rows, slice) and rows == slice(None):
            return self.n_below, self.n_above
        if self.below is None or self.above is None:
            raise ValueError("Only the total numbers of clipped rows are known.")
        return int(np.count_nonzero(self.below[rows])), int(np.count_nonzero(self.above[rows]))

    def largest_score(self, rows) -> float | None:
        """The largest clipped score among ``rows``, or None if there is none."""
        if self.scores is None:
            if not (isinstance(rows, slice) and rows == slice(None)):
                raise ValueError("Only the largest clipped score of all rows is known.")
            return self.largest
        scores = self.scores[rows]
        return float(scores.max()) if scores.size else None
