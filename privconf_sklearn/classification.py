"""Private conformal prediction sets for any probabilistic classifier."""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin, is_regressor
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ._base import (
    BasePrivateConformal,
    DefaultScoreWarningMixin,
    _estimator_has,
    check_is_estimator,
    common_constraints,
)
from ._validation import encode_labels
from ._warnings import warn_at_caller
from .mondrian import MondrianCalibration
from .scores import APS, LAC, RAPS, ConformityScoreWarning, check_label_kinds

__all__ = ["PrivateConformalClassifier"]


class PrivateConformalClassifier(DefaultScoreWarningMixin, ClassifierMixin, BasePrivateConformal):
    """Prediction sets with private conformal calibration for a fitted classifier.

    Wraps any classifier with ``predict_proba`` (a diffprivlib ``GaussianNB``,
    ``RandomForestClassifier`` or ``LogisticRegression``, or any scikit-learn
    classifier) and calibrates a score threshold on held-out data with a quantile
    ``mechanism``. The sets ``{y : score(x, y) <= threshold_}`` contain the true label
    with probability at least ``calibration_.coverage_lower_bound`` (``>= 1 - alpha``
    for ExponQ and split conformal) for exchangeable data, and the threshold is
    released under ``calibration_.privacy``.

    Parameters
    ----------
    estimator : classifier
        Fitted (``prefit=True``) or to be fitted (``prefit=False``) classifier.
        Features are passed to it untouched, so DataFrames and string labels work.
    mechanism : QuantileMechanism
        How the threshold is released: ``ExponQ(epsilon)``, ``SplitConformal()``...
        Keyword-only and without default, so privacy is always a visible choice.
    alpha : float, default=0.1
        Target miscoverage in (0, 1).
    conformity_score : {"lac", "aps", "aps_randomized", "raps"} or ClassificationScore, \
            default="lac"
        Conformity score (named like MAPIE's, since ``score`` is the scikit-learn
        accuracy method): ``"lac"`` is ``1 - p_y(x)`` (:class:`~privconf_sklearn.scores.LAC`),
        ``"aps"`` the non-randomised adaptive prediction sets score
        (:class:`~privconf_sklearn.scores.APS`), ``"aps_randomized"``
        ``APS(randomized=True)`` (MAPIE's default APS score), ``"raps"``
        :class:`~privconf_sklearn.scores.RAPS` with its default parameters. See
        :doc:`/user_guide/scores` for which to choose. Aliases are matched exactly
        (lower case).
    mondrian : None, "class" or callable, default=None
        Mondrian (group-conditional) calibration. ``"class"``: one threshold per label,
        so that coverage holds for every true label (label-conditional coverage). A
        callable ``mondrian(X) -> group ids`` (one hashable id per row, a public function
        of the features, e.g. a binning of one column): one threshold per group, and
        coverage within every group. Every group's threshold is released by a copy of
        ``mechanism`` on that group's rows; see :mod:`privconf_sklearn.mondrian` and the
        user guide for the composed privacy guarantee. Needs ``group_sizes``.
    group_sizes : None, "public" or PrivateGroupSizes, default=None
        With ``mondrian`` (required there, None otherwise): ``"public"`` treats every
        group's calibration size as public (it is disclosed, as the total calibration
        size is); :class:`~privconf_sklearn.mondrian.PrivateGroupSizes` releases them
        with their own privacy budget.
    adjacency : {"replace-one", "add/remove"}, default="replace-one"
        The neighbouring relation the privacy guarantee is stated under, recorded in
        ``calibration_.privacy`` and spent on the ledger: e.g. ExponQ's
        ``"monotone"`` scaling is ``epsilon``-DP under add/remove but ``2 epsilon``
        under replace-one.
    prefit : bool, default=True
        If True, ``estimator`` is already fitted and ``fit`` only calibrates. It is then
        kept by reference, also through ``clone`` (as
        :class:`sklearn.frozen.FrozenEstimator`). If False, ``fit`` fits a clone on part
        of the data and calibrates on the rest.
    calibration_size : float or int, default=0.3
        With ``prefit=False``: fraction (float) or number (int) of rows used for
        calibration.
    random_state : None, int, RandomState or Generator, default=None
        Privacy noise source. ``None`` draws it from the operating system's
        cryptographic generator, the only production setting. A seed makes results
        reproducible and anyone who knows it can remove the noise: tests and
        experiments only. Also drives the ``prefit=False`` split and the uniforms of
        the randomised scores (``"aps_randomized"``), which are not privacy noise
        (there ``None`` is numpy's global generator). A ``RandomState`` or
        ``Generator`` is used as given, so every draw advances it (noise, split, the
        randomised score's uniforms, also in :meth:`predict_set`); an int starts from
        the seed at every draw.
    accountant : ledger or None, default=None
        Ledger that calibration charges its privacy budget to, checking and spending it
        in one step before the model sees a calibration row: any object with
        ``check(epsilon, delta)`` and ``spend(epsilon, delta)``, such as a diffprivlib
        ``BudgetAccountant``. None uses diffprivlib's default accountant, where
        diffprivlib models record their training budget too (an error, before any data
        is read, if diffprivlib cannot be imported). Kept by reference through
        ``clone``; an estimator unpickled in another process (e.g. a worker of
        ``GridSearchCV(n_jobs=2)``) refuses to calibrate rather than spend on a copy.

    Attributes
    ----------
    estimator_ : classifier
        The fitted classifier used (the given one when ``prefit=True``).
    classes_ : ndarray of shape (n_classes,)
        Labels, in the column order of :meth:`predict_set` and :meth:`predict_proba`.
    score_ : ClassificationScore
        The conformity score used.
    mechanism_ : QuantileMechanism
        A copy of the mechanism used.
    calibration_ : Calibration or MondrianCalibration
        Threshold, coverage bounds, privacy guarantee (under ``adjacency``) and mechanism
        details; with ``mondrian``, a
        :class:`~privconf_sklearn.mondrian.MondrianCalibration` holding every group's.
    threshold_ : float
        Score threshold: label ``y`` is in the set of ``x`` iff ``score(x, y) <= threshold_``.
        Not set with ``mondrian``.
    groups_ : ndarray of shape (n_groups,)
        With ``mondrian``: the group ids (the labels, for ``"class"``).
    group_thresholds_ : ndarray of shape (n_groups,)
        With ``mondrian``: each group's score threshold.
    mondrian_ : str or callable
        With ``mondrian``: the grouping used at calibration, and at prediction.
    score_bounds_ : tuple of float
        Public score range mapped to [0, 1] for the mechanism (``(0, 1)`` here).
    n_features_in_ : int
        Copied from the estimator when it has it.
    feature_names_in_ : ndarray of str
        Copied from the estimator when it has it.

    See Also
    --------
    privconf_sklearn.PrivateConformalRegressor : The same for regression intervals.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from privconf_sklearn import PrivateConformalClassifier
    >>> from privconf_sklearn.mechanisms import ExponQ
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(6000, 2)); y = (X[:, 0] + rng.normal(size=6000) > 0).astype(int)
    >>> model = LogisticRegression().fit(X[:3000], y[:3000])
    >>> pcc = PrivateConformalClassifier(model, mechanism=ExponQ(epsilon=1.0), alpha=0.1,
    ...                                  random_state=0).fit_calibrate(X[3000:], y[3000:])
    >>> pcc.predict_set(X[:2]).shape
    (2, 2)
    >>> pcc.calibration_.privacy.epsilon
    1.0
    """

    _model_score = "accuracy"
    _score_aliases = {
        "lac": LAC,
        "aps": APS,
        "aps_randomized": lambda: APS(randomized=True),
        "raps": RAPS,
    }
    _parameter_constraints = common_constraints(_score_aliases, mondrian_options=("class",))
    _fitted_attribute_names = (*BasePrivateConformal._fitted_attribute_names, "classes_")

    def __init__(
        self,
        estimator,
        *,
        mechanism,
        alpha: float = 0.1,
        conformity_score="lac",
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
        self.mondrian = mondrian
        self.group_sizes = group_sizes
        self.adjacency = adjacency
        self.prefit = prefit
        self.calibration_size = calibration_size
        self.random_state = random_state
        self.accountant = accountant

    def _check_estimator_kind(self, estimator) -> None:
        check_is_estimator(estimator, "estimator", type(self).__name__)
        if is_regressor(estimator):
            raise TypeError(
                f"estimator must be a classifier; got the regressor "
                f"{type(estimator).__name__}. Use PrivateConformalRegressor for regression."
            )

    def _encode_targets(self, y, estimator) -> np.ndarray:
        if not hasattr(estimator, "classes_"):
            raise TypeError(
                f"{type(estimator).__name__} has no classes_: it is not a fitted classifier."
            )
        check_label_kinds(y, estimator.classes_)
        return encode_labels(y, estimator.classes_)

    def _warn_about_score(self, score, estimator) -> None:
        """APS and RAPS on a binary task: the true label's cumulative mass is often 1."""
        if isinstance(score, APS | RAPS) and len(estimator.classes_) == 2:
            warn_at_caller(
                f"{type(score).__name__} scores on a binary task: the cumulative mass up to "
                "the true label is 1 whenever the model ranks the other label first, so the "
                "calibration threshold is often the top of the range (full sets); MAPIE "
                "refuses these scores for binary targets. Use conformity_score='lac'.",
                ConformityScoreWarning,
            )

    def _mondrian_row_groups(self, mondrian, X, encoded, estimator, n_rows: int):
        if isinstance(mondrian, str):  # "class": the group of a row is its label
            classes = np.asarray(estimator.classes_)
            return classes[encoded], tuple(classes.tolist())
        return super()._mondrian_row_groups(mondrian, X, encoded, estimator, n_rows)

    def _extra_fitted_attributes(self, estimator, calibration) -> dict:
        classes = np.asarray(estimator.classes_)
        fitted = {"classes_": classes}
        if isinstance(calibration, MondrianCalibration) and isinstance(self.mondrian, str):
            fitted["groups_"] = classes
        return fitted

    def _sets(self, X, unseen: dict) -> np.ndarray:
        if not (
            isinstance(self.calibration_, MondrianCalibration) and isinstance(self.mondrian_, str)
        ):
            return super()._sets(X, unseen)
        # mondrian="class": column j uses label j's threshold.
        outputs = self.score_.estimator_outputs(self.estimator_, X)
        sets = np.empty(outputs.shape, dtype=bool)
        for threshold in np.unique(self.group_thresholds_).tolist():
            columns = np.flatnonzero(self.group_thresholds_ == threshold)
            block = self.score_.predict_set(outputs, threshold, random_state=self.random_state)
            sets[:, columns] = block[:, columns]
        return sets

    def predict_set(self, X, *, batch_size: int | None = None) -> np.ndarray:
        """Boolean prediction sets, one column per class in ``classes_`` order.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Test features.
        batch_size : int, default=None
            Process rows in batches of this size to bound the memory held for
            ``predict_proba`` outputs.

        Returns
        -------
        ndarray of shape (n_samples, n_classes), dtype bool
            ``sets[i, j]`` is True iff ``classes_[j]`` is in the set of ``X[i]``.
        """
        return super().predict_set(X, batch_size=batch_size)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """The wrapped classifier's ``predict_proba``."""
        check_is_fitted(self, "calibration_")
        return self.estimator_.predict_proba(X)

    @available_if(_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X):
        """The wrapped classifier's ``predict_log_proba``."""
        check_is_fitted(self, "calibration_")
        return self.estimator_.predict_log_proba(X)

    @available_if(_estimator_has("decision_function"))
    def decision_function(self, X):
        """The wrapped classifier's ``decision_function``."""
        check_is_fitted(self, "calibration_")
        return self.estimator_.decision_function(X)
