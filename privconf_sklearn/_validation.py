"""Checks of data shared by estimators, scores and mechanisms (not of parameters).

Calibration scores in the public range, predicted probabilities, labels against
``classes_``, and exact split-conformal ranks. Every check raises with a message that
names the offending values, and none of them coerces silently. Parameters are checked by
:mod:`privconf_sklearn._param_validation`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np
from sklearn.utils.validation import column_or_1d
from threadpoolctl import ThreadpoolController

__all__ = [
    "check_probabilities",
    "check_unit_scores",
    "conformal_rank",
    "encode_labels",
    "split_conformal_rank",
]


def conformal_rank(n: int, level: float) -> int:
    """Return ``ceil((n + 1) * level)`` computed exactly.

    The product is evaluated in exact rational arithmetic on the binary value of
    ``level``, so no rounding of the product can move the rank. For the level
    ``1 - alpha`` use :func:`split_conformal_rank`, which also avoids the rounding of
    ``1 - alpha`` itself.

    Parameters
    ----------
    n : int
        Number of calibration scores.
    level : float
        Target level in (0, 1), e.g. ``1 - alpha``.

    Returns
    -------
    int
        The conformal rank ``k``; ``k > n`` means the level is not reachable with ``n``
        scores.
    """
    return math.ceil(Fraction(n + 1) * Fraction(level))


def split_conformal_rank(n: int, alpha: float) -> int:
    """Return ``ceil((n + 1) * (1 - alpha))`` with ``1 - alpha`` also computed exactly.

    ``1 - alpha`` rounds in floating point (``1 - 0.1`` is slightly above 0.9), which can
    push the rank up by one: ``conformal_rank(9, 1 - 0.1)`` is 10 although the exact
    value for the given ``alpha`` is 9. Use this rather than
    ``conformal_rank(n, 1 - alpha)`` whenever the level is ``1 - alpha``.

    Parameters
    ----------
    n : int
        Number of calibration scores.
    alpha : float
        Miscoverage level in (0, 1).

    Returns
    -------
    int
        The split conformal rank ``k``; ``k > n`` means ``alpha`` is unreachable.
    """
    return math.ceil(Fraction(n + 1) * (1 - Fraction(alpha)))


def check_unit_scores(scores, name: str = "scores") -> np.ndarray:
    """Check calibration scores already mapped to the public range [0, 1].

    Parameters
    ----------
    scores : array-like of shape (n_samples,)
        Scores.
    name : str, default="scores"
        Name used in error messages.

    Returns
    -------
    ndarray of shape (n_samples,), dtype float64
        The scores (a float64 view or copy; values unchanged).

    Raises
    ------
    ValueError
        If the array is not one-dimensional, is empty, holds NaN or infinite values, or
        holds values outside [0, 1].
    """
    arr = np.asarray(scores)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {arr.shape}.")
    if arr.size == 0:
        raise ValueError(f"{name} is empty: calibration needs at least one score.")
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must be real numbers; got dtype {arr.dtype}.")
    arr = arr.astype(np.float64, copy=False)
    if not np.isfinite(arr).all():
        bad = arr[~np.isfinite(arr)][:5]
        raise ValueError(f"{name} contain NaN or infinite values, e.g. {bad.tolist()}.")
    low, high = arr.min(), arr.max()
    if low < 0.0 or high > 1.0:
        raise ValueError(
            f"{name} must lie in the public range [0, 1]; got values in "
            f"[{low!r}, {high!r}]. Map scores through their public bounds first."
        )
    return arr


def probability_tolerance(dtype) -> float:
    """Tolerance on row sums of predicted probabilities for a floating dtype."""
    return float(np.sqrt(np.finfo(dtype).eps))


@lru_cache(maxsize=1)
def _blas_controller() -> ThreadpoolController:
    return ThreadpoolController()


def _row_sums(matrix: np.ndarray) -> np.ndarray:
    """Row sums as one single-threaded BLAS matrix-vector product.

    Several times faster than ``sum(axis=1)`` on short rows; single-threaded because
    OpenBLAS's threaded gemv stalls when the other cores are busy. NaN and inf
    propagate to the sums, so finiteness checks on the sums still see them.
    """
    with _blas_controller().limit(limits=1, user_api="blas"):
        return matrix @ np.ones(matrix.shape[1], dtype=matrix.dtype)


def check_probabilities(proba, n_classes: int, *, estimator_name: str = "estimator") -> np.ndarray:
    """Check a predict_proba output: finite, non-negative rows summing to one.

    Parameters
    ----------
    proba : array-like of shape (n_samples, n_classes)
        Predicted probabilities.
    n_classes : int
        Expected number of columns (``len(estimator.classes_)``).
    estimator_name : str
        Name used in error messages.

    Returns
    -------
    ndarray of shape (n_samples, n_classes)
        The probabilities as a floating array (values unchanged).

    Raises
    ------
    ValueError
        If the shape is wrong, or any value is NaN, infinite or negative, or a row sum
        differs from 1 by more than ``sqrt(machine epsilon)`` of the dtype.
    """
    proba = np.asarray(proba)
    if not np.issubdtype(proba.dtype, np.floating):
        proba = proba.astype(np.float64)
    if proba.ndim != 2 or proba.shape[1] != n_classes:
        raise ValueError(
            f"{estimator_name}.predict_proba returned shape {proba.shape}; expected "
            f"(n_samples, {n_classes}) with one column per class in classes_."
        )
    if proba.size == 0:
        return proba
    # One temporary, updated in place: |row sum - 1|. NaN and inf propagate to it.
    deviation = _row_sums(proba)
    deviation -= 1.0
    np.abs(deviation, out=deviation)
    worst = deviation.max()
    if not np.isfinite(worst):
        rows = np.flatnonzero(~np.isfinite(deviation))[:5]
        raise ValueError(
            f"{estimator_name}.predict_proba returned NaN or infinite values "
            f"(rows {rows.tolist()})."
        )
    minimum = proba.min()
    if minimum < 0:
        rows = np.flatnonzero((proba < 0).any(axis=1))[:5]
        raise ValueError(
            f"{estimator_name}.predict_proba returned negative probabilities "
            f"(min {minimum!r}, rows {rows.tolist()})."
        )
    tol = probability_tolerance(proba.dtype)
    if worst > tol:
        rows = np.flatnonzero(deviation > tol)[:5]
        raise ValueError(
            f"{estimator_name}.predict_proba rows must sum to 1 within {tol:.1e}; rows "
            f"{rows.tolist()} sum to {_row_sums(proba[rows]).tolist()}."
        )
    return proba


def encode_labels(y, classes) -> np.ndarray:
    """Column index in ``classes`` of every label in ``y``.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels, of any type the estimator accepts (int, str, ...).
    classes : array-like of shape (n_classes,)
        The fitted estimator's ``classes_``.

    Returns
    -------
    ndarray of shape (n_samples,), dtype intp

    Raises
    ------
    ValueError
        If ``y`` holds labels that are not in ``classes``, naming them.
    """
    y = column_or_1d(y, warn=True)
    classes = np.asarray(classes)
    order = np.argsort(classes, kind="stable")
    try:
        position = np.searchsorted(classes, y, sorter=order)
    except TypeError:
        # Labels of mixed, mutually incomparable types (e.g. str and int): exact lookup.
        lookup = {label: column for column, label in enumerate(classes.tolist())}
        columns = np.array([lookup.get(label, -1) for label in y.tolist()], dtype=np.intp)
        unseen = columns < 0
    else:
        columns = order[np.minimum(position, classes.shape[0] - 1)]
        unseen = classes[columns] != y
    if np.any(unseen):
        labels = list(dict.fromkeys(y[unseen].tolist()))
        raise ValueError(
            f"y contains labels the estimator was not fitted on: {labels[:10]}"
            f"{' ...' if len(labels) > 10 else ''}; estimator.classes_ = {classes.tolist()}."
        )
    return columns
