"""Coverage and efficiency of prediction sets and intervals, and scorers for searches.

The scorers are what a scikit-learn search over a private conformal estimator should
rank by (``GridSearchCV(..., scoring=...)``): the estimators' own ``score`` is the
wrapped model's accuracy (or R^2), which ``alpha``, the mechanism and its budget do not
change (see :class:`DefaultScoreWarning`).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ._validation import encode_labels
from .scores import check_label_kinds

__all__ = [
    "DefaultScoreWarning",
    "informative_rate",
    "informative_rate_scorer",
    "interval_coverage",
    "interval_coverage_scorer",
    "mean_interval_width",
    "mean_set_size",
    "neg_mean_interval_width_scorer",
    "neg_mean_loss_scorer",
    "neg_mean_set_size_scorer",
    "set_coverage",
    "set_coverage_scorer",
    "singleton_rate",
]


class DefaultScoreWarning(UserWarning):
    """A search ranked a private conformal estimator by its default ``score``.

    Issued when scikit-learn's default scorer (``scoring=None`` in ``GridSearchCV``,
    ``cross_validate``, ...) calls the estimator's ``score``: that is the wrapped
    model's accuracy (classifier) or R^2 (regressor), which ``alpha``, the mechanism and
    its privacy budget do not change, so such a search sees ties and keeps the first
    candidate. Pass ``scoring=`` with the scorers of this module, or ``scoring="accuracy"``
    (``"r2"``) to rank by the model on purpose. A direct call of ``score`` does not warn.
    """


def _as_array(values, name: str) -> np.ndarray:
    """``np.asarray(values)``, with numpy's error for ragged input naming ``name``."""
    try:
        return np.asarray(values)
    except ValueError as error:  # e.g. rows of different lengths
        raise ValueError(f"{name} must be a rectangular array: {error}") from None


def _check_rows(n_rows: int, name: str) -> None:
    if n_rows == 0:
        raise ValueError(f"{name} is empty: the metric needs at least one row.")


def _check_sets(sets) -> np.ndarray:
    """Boolean sets of shape ``(n_samples, n_classes)``, with at least one row and column."""
    sets = _as_array(sets, "sets")
    if sets.dtype != bool:
        raise TypeError(
            f"sets must be a boolean array (n_samples, n_classes); got dtype {sets.dtype}."
        )
    if sets.ndim != 2 or sets.shape[1] == 0:
        raise ValueError(
            f"sets must have shape (n_samples, n_classes) with n_classes >= 1; got {sets.shape}."
        )
    _check_rows(sets.shape[0], "sets")
    return sets


def _check_one_dimensional(values, name: str) -> np.ndarray:
    array = _as_array(values, name)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, shape (n,); got shape {array.shape}.")
    return array


def _check_same_rows(y: np.ndarray, other: np.ndarray, other_name: str) -> None:
    if y.shape[0] != other.shape[0]:
        raise ValueError(
            f"y_true has {y.shape[0]} rows but {other_name} has {other.shape[0]}: they must match."
        )


def _check_classes(classes, n_columns: int) -> np.ndarray:
    """One distinct label per column of the sets."""
    classes = _check_one_dimensional(classes, "classes")
    if classes.shape[0] != n_columns:
        raise ValueError(
            f"classes has {classes.shape[0]} labels but sets has {n_columns} columns: give "
            "the label of every column of sets, in order."
        )
    counts = Counter(classes.tolist())
    duplicates = [label for label, count in counts.items() if count > 1]
    if duplicates:
        raise ValueError(f"classes holds duplicate labels: {duplicates[:5]}.")
    return classes


def _check_finite_reals(values, name: str) -> np.ndarray:
    """Real numbers (integer or floating dtype, never bool or str), all finite, as float64."""
    array = _as_array(values, name)
    if array.dtype.kind not in "iuf":
        raise TypeError(
            f"{name} must hold real numbers (an integer or floating dtype); got dtype "
            f"{array.dtype}. Booleans, strings and objects are not converted: convert them "
            "explicitly."
        )
    array = array.astype(np.float64, copy=False)
    finite = np.isfinite(array).reshape(array.shape[0], -1).all(axis=1)
    if not finite.all():
        rows = np.flatnonzero(~finite)
        raise ValueError(
            f"{name} holds NaN or infinite values in {rows.size} rows, e.g. rows "
            f"{rows[:5].tolist()}: they cannot be counted as covered or not."
        )
    return array


def set_coverage(y_true, sets, classes) -> float:
    """Fraction of samples whose label is in its prediction set (Romanus and Molinari 2025, Def. 3).

    Labels are matched to ``classes`` as the classifiers match them to ``classes_``:
    exactly, and never a boolean to a number (``True`` is not the label ``1``).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    sets : ndarray of shape (n_samples, n_classes), dtype bool
        Prediction sets, columns in ``classes`` order; at least one row.
    classes : array-like of shape (n_classes,)
        Label of each column, distinct.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        If ``sets`` is not boolean, or booleans are matched to other labels.
    ValueError
        If a shape or length does not match, ``classes`` holds duplicates, or ``y_true``
        holds labels that are not in ``classes`` (NaN included), naming them.
    """
    sets = _check_sets(sets)
    classes = _check_classes(classes, sets.shape[1])
    labels = _check_one_dimensional(y_true, "y_true")
    _check_same_rows(labels, sets, "sets")
    check_label_kinds(labels, classes, y_name="y_true", classes_name="classes")
    try:
        columns = encode_labels(labels, classes)
    except ValueError:  # encode_labels names an estimator's classes_; name ours
        known = classes.tolist()
        unseen = [label for label in dict.fromkeys(labels.tolist()) if label not in known]
        raise ValueError(
            f"y_true holds labels that are not in classes: {unseen[:10]}; classes = {known[:10]}."
        ) from None
    return float(sets[np.arange(sets.shape[0]), columns].mean())


def mean_set_size(sets) -> float:
    """Average number of labels per set ("efficiency", Romanus and Molinari 2025, Def. 3).

    Parameters
    ----------
    sets : ndarray of shape (n_samples, n_classes), dtype bool
        Prediction sets; at least one row.

    Returns
    -------
    float
    """
    return float(_check_sets(sets).sum(axis=1).mean())


def singleton_rate(sets) -> float:
    """Fraction of sets with one label ("informativeness", Romanus and Molinari 2025, Def. 3).

    Parameters
    ----------
    sets : ndarray of shape (n_samples, n_classes), dtype bool
        Prediction sets; at least one row.

    Returns
    -------
    float
    """
    return float((_check_sets(sets).sum(axis=1) == 1).mean())


def informative_rate(sets) -> float:
    """Fraction of sets that leave out at least one label.

    A set with every label says nothing about its row. With a release at the top of the
    range (``calibration_.informative`` False) every set is full and the rate is 0; an
    informative release can still give full sets on hard rows.

    Parameters
    ----------
    sets : ndarray of shape (n_samples, n_classes), dtype bool
        Prediction sets; at least one row.

    Returns
    -------
    float
    """
    sets = _check_sets(sets)
    return float((sets.sum(axis=1) < sets.shape[1]).mean())


def _check_intervals(intervals) -> np.ndarray:
    """Finite real intervals of shape ``(n_samples, 2)``, at least one row, as float64."""
    intervals = _as_array(intervals, "intervals")
    if intervals.ndim != 2 or intervals.shape[1] != 2:
        raise ValueError(f"intervals must have shape (n_samples, 2); got {intervals.shape}.")
    _check_rows(intervals.shape[0], "intervals")
    return _check_finite_reals(intervals, "intervals")


def interval_coverage(y_true, intervals) -> float:
    """Fraction of targets inside their closed interval ``[lower, upper]``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True targets: finite real numbers (never booleans or strings).
    intervals : array-like of shape (n_samples, 2)
        Lower and upper ends: finite real numbers; at least one row.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        If ``y_true`` or ``intervals`` does not hold real numbers.
    ValueError
        If a shape or length does not match, or a value is NaN or infinite (naming rows).
    """
    intervals = _check_intervals(intervals)
    y = _check_finite_reals(_check_one_dimensional(y_true, "y_true"), "y_true")
    _check_same_rows(y, intervals, "intervals")
    return float(((intervals[:, 0] <= y) & (y <= intervals[:, 1])).mean())


def mean_interval_width(intervals) -> float:
    """Average ``upper - lower``.

    Parameters
    ----------
    intervals : array-like of shape (n_samples, 2)
        Lower and upper ends: finite real numbers; at least one row.

    Returns
    -------
    float
    """
    intervals = _check_intervals(intervals)
    return float((intervals[:, 1] - intervals[:, 0]).mean())


def _method(estimator, name: str, scorer: str):
    """``estimator.<name>``, or a TypeError saying which estimators the scorer is for."""
    method = getattr(estimator, name, None)
    if method is None:
        kind = {
            "predict_set": "prediction sets (PrivateConformalClassifier, "
            "PrivateRiskControlClassifier)",
            "predict_interval": "prediction intervals (PrivateConformalRegressor)",
            "mean_loss": "a risk control (PrivateRiskControlClassifier)",
        }[name]
        raise TypeError(f"{scorer} scores {kind}; {type(estimator).__name__} has no {name}.")
    return method


def neg_mean_set_size_scorer(estimator, X, y) -> float:
    """Scorer for ``GridSearchCV``: minus the mean set size (greater is better)."""
    return -mean_set_size(_method(estimator, "predict_set", "neg_mean_set_size_scorer")(X))


def neg_mean_loss_scorer(estimator, X, y) -> float:
    """Scorer for ``GridSearchCV``: minus the mean loss of a risk control's sets.

    ``-estimator.mean_loss(X, y)``
    (:meth:`~privconf_sklearn.PrivateRiskControlClassifier.mean_loss`): the empirical
    risk of the sets under the loss the estimator controls, greater is better.
    """
    return -_method(estimator, "mean_loss", "neg_mean_loss_scorer")(X, y)


def set_coverage_scorer(estimator, X, y) -> float:
    """Scorer for ``GridSearchCV``: empirical coverage of the prediction sets."""
    sets = _method(estimator, "predict_set", "set_coverage_scorer")(X)
    return set_coverage(y, sets, estimator.classes_)


def neg_mean_interval_width_scorer(estimator, X, y) -> float:
    """Scorer for ``GridSearchCV``: minus the mean interval width (greater is better)."""
    scorer = "neg_mean_interval_width_scorer"
    return -mean_interval_width(_method(estimator, "predict_interval", scorer)(X))


def interval_coverage_scorer(estimator, X, y) -> float:
    """Scorer for ``GridSearchCV``: empirical coverage of the prediction intervals."""
    intervals = _method(estimator, "predict_interval", "interval_coverage_scorer")(X)
    return interval_coverage(y, intervals)


def _informative_interval_rows(estimator, X) -> np.ndarray:
    """Whether each row's interval comes from a threshold below the upper score bound.

    From the regressor's public fitted attributes: ``threshold_at_upper_bound_``, or
    with ``mondrian`` each row's group (``mondrian_(X)``) and that group's threshold
    (``groups_``, ``group_thresholds_``); rows of a group without a threshold get the
    widest interval.
    """
    mondrian = getattr(estimator, "mondrian_", None)
    if mondrian is None:
        n_rows = estimator.predict_interval(X).shape[0]
        return np.full(n_rows, not estimator.threshold_at_upper_bound_)
    high = estimator.score_bounds_[1]
    thresholds = dict(
        zip(estimator.groups_.tolist(), estimator.group_thresholds_.tolist(), strict=True)
    )
    groups = np.asarray(mondrian(X)).tolist()
    return np.array([thresholds.get(group, high) < high for group in groups], dtype=bool)


def informative_rate_scorer(estimator, X, y) -> float:
    """Scorer for ``GridSearchCV``: fraction of test rows with an informative prediction.

    A prediction is informative when it is not the trivial one a calibration at the top
    of the range gives: a set that leaves out at least one label
    (:func:`informative_rate` of ``predict_set(X)``), or an interval whose threshold is
    below the upper score bound, i.e. narrower than the widest interval ``score_bounds``
    allows (with ``mondrian``, the threshold of the row's group; rows of an uncalibrated
    group are not informative). Averaged over the folds of a search, it shows how often a
    configuration releases something useful: a fold whose release is trivial
    (``calibration_.informative`` False) scores 0. ``y`` is not used.
    """
    if hasattr(estimator, "predict_interval"):
        return float(_informative_interval_rows(estimator, X).mean())
    return informative_rate(estimator.predict_set(X))
