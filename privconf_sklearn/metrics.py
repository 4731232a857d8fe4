"""Coverage and efficiency of prediction sets and intervals, and scorers for searches."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import column_or_1d

from ._validation import encode_labels

__all__ = [
    "interval_coverage",
    "interval_coverage_scorer",
    "mean_interval_width",
    "mean_set_size",
    "neg_mean_interval_width_scorer",
    "neg_mean_set_size_scorer",
    "set_coverage",
    "set_coverage_scorer",
    "singleton_rate",
]


def _check_sets(sets) -> np.ndarray:
    sets = np.asarray(sets)
    if sets.dtype != bool:
        raise TypeError(
            f"sets must be a boolean array (n_samples, n_classes); got dtype {sets.dtype}."
        )
    if sets.ndim != 2:
        raise ValueError(f"sets must have shape (n_samples, n_classes); got {sets.shape}.")
    return sets


def set_coverage(y_true, sets, classes) -> float:
    """Fraction of samples whose label is in its prediction set (Romanus and Molinari 2025, Def. 3).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True labels.
    sets : ndarray of shape (n_samples, n_classes), dtype bool
        Prediction sets, columns in ``classes`` order.
    classes : array-like of shape (n_classes,)
        Label of each column.

    Returns
    -------
    float
    """
    sets = _check_sets(sets)
    columns = encode_labels(y_true, classes)
    if columns.shape[0] != sets.shape[0]:
        raise ValueError(f"y_true has {columns.shape[0]} rows but sets has {sets.shape[0]}.")
    return float(sets[np.arange(sets.shape[0]), columns].mean())


def mean_set_size(sets) -> float:
    """Average number of labels per set ("efficiency", Romanus and Molinari 2025, Def. 3)."""
    return float(_check_sets(sets).sum(axis=1).mean())


def singleton_rate(sets) -> float:
    """Fraction of sets with one label ("informativeness", Romanus and Molinari 2025, Def. 3)."""
    return float((_check_sets(sets).sum(axis=1) == 1).mean())


def _check_intervals(intervals) -> np.ndarray:
    intervals = np.asarray(intervals, dtype=np.float64)
    if intervals.ndim != 2 or intervals.shape[1] != 2:
        raise ValueError(f"intervals must have shape (n_samples, 2); got {intervals.shape}.")
    return intervals


def interval_coverage(y_true, intervals) -> float:
    """Fraction of targets inside their closed interval ``[lower, upper]``."""
    y = column_or_1d(y_true).astype(np.float64)
    intervals = _check_intervals(intervals)
    if y.shape[0] != intervals.shape[0]:
        raise ValueError(f"y_true has {y.shape[0]} rows but intervals has {intervals.shape[0]}.")
    return float(((intervals[:, 0] <= y) & (y <= intervals[:, 1])).mean())


def mean_interval_width(intervals) -> float:
    """Average ``upper - lower``."""
    intervals = _check_intervals(intervals)
    return float((intervals[:, 1] - intervals[:, 0]).mean())


def neg_mean_set_size_scorer(estimator, X, y) -> float:
    """Scorer for ``GridSearchCV``: minus the mean set size (greater is better)."""
    return -mean_set_size(estimator.predict_set(X))


def set_coverage_scorer(estimator, X, y) -> float:
    """Scorer for ``GridSearchCV``: empirical coverage of the prediction sets."""
    return set_coverage(y, estimator.predict_set(X), estimator.classes_)


def neg_mean_interval_width_scorer(estimator, X, y) -> float:
    """Scorer for ``GridSearchCV``: minus the mean interval width (greater is better)."""
    return -mean_interval_width(estimator.predict_interval(X))


def interval_coverage_scorer(estimator, X, y) -> float:
    """Scorer for ``GridSearchCV``: empirical coverage of the prediction intervals."""
    return interval_coverage(y, estimator.predict_interval(X))
