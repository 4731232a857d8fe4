"""Input validation shared by estimators, scores and mechanisms.

Every check raises with a message that names the offending parameter or values, and
none of them coerces silently: a value is either accepted as given or rejected.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from functools import lru_cache

import numpy as np
from sklearn.utils.validation import column_or_1d
from threadpoolctl import ThreadpoolController

__all__ = [
    "Boolean",
    "Constraint",
    "InstanceOf",
    "Interval",
    "NoneValue",
    "Options",
    "check_alpha",
    "check_in_open_interval",
    "check_positive_finite",
    "check_probabilities",
    "check_unit_scores",
    "conformal_rank",
    "encode_labels",
    "split_conformal_rank",
    "validate_params",
]


def _is_real_scalar(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_in_open_interval(value, name: str, low: float = 0.0, high: float = 1.0) -> float:
    """Return ``value`` as a float if it lies in the open interval ``(low, high)``.

    Parameters
    ----------
    value : object
        The value to check.
    name : str
        Parameter name used in the error message.
    low, high : float, default=(0, 1)
        Open bounds.

    Returns
    -------
    float
        The value, unchanged, as a Python float.

    Raises
    ------
    ValueError
        If ``value`` is not a real number strictly between ``low`` and ``high``.
    """
    if not _is_real_scalar(value) or not (low < float(value) < high):
        raise ValueError(
            f"{name} must be a real number in the open interval ({low:g}, {high:g}); got {value!r}."
        )
    return float(value)


def check_alpha(alpha) -> float:
    """Check a miscoverage level: a real number in (0, 1)."""
    return check_in_open_interval(alpha, "alpha")


def check_positive_finite(value, name: str) -> float:
    """Return ``value`` as a float if it is a finite real number > 0.

    Raises
    ------
    ValueError
        If ``value`` is not a real number, is non-positive, NaN or infinite.
    """
    if not _is_real_scalar(value) or not math.isfinite(float(value)) or value <= 0:
        raise ValueError(f"{name} must be a finite real number > 0; got {value!r}.")
    return float(value)


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


# ------------------------------------------------------------------------------------
# Declarative parameter validation: one constraints table per class, one checker.
# ------------------------------------------------------------------------------------
class Constraint:
    """One accepted form of a parameter; subclasses say which types and values.

    :func:`validate_params` raises ``TypeError`` when no constraint of a parameter
    accepts the value's type, and ``ValueError`` when some accept the type but none
    the value.
    """

    def accepts_type(self, value) -> bool:
        """Whether ``value`` has a type this constraint is about."""
        raise NotImplementedError

    def accepts_value(self, value) -> bool:
        """Whether ``value`` (of an accepted type) is allowed."""
        return True

    def convert(self, value):
        """The validated value in canonical form (e.g. a Python float)."""
        return value

    def describe(self) -> str:
        """Human-readable description used in error messages."""
        raise NotImplementedError


def _is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def _is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


class Interval(Constraint):
    """A real (``kind="real"``) or integer (``kind="integer"``) interval.

    Parameters
    ----------
    kind : {"real", "integer"}
        Real numbers (ints and floats, never bools) or integers only.
    low, high : float or None
        Ends; None is unbounded. Real intervals never accept NaN or infinities.
    closed : {"neither", "left", "right", "both"}, default="both"
        Which ends belong to the interval.
    """

    def __init__(self, kind: str, low=None, high=None, *, closed: str = "both"):
        self.kind, self.low, self.high, self.closed = kind, low, high, closed

    def accepts_type(self, value) -> bool:
        """Integers for integer intervals; any real number for real ones."""
        return _is_integer(value) if self.kind == "integer" else _is_real(value)

    def accepts_value(self, value) -> bool:
        """Finite and within the ends (with their openness)."""
        if self.kind == "real":
            try:
                if not math.isfinite(float(value)):
                    return False
            except OverflowError:  # an int beyond float64's range
                return False
        if self.low is not None:
            if value < self.low or (value == self.low and self.closed in ("neither", "right")):
                return False
        if self.high is not None:
            if value > self.high or (value == self.high and self.closed in ("neither", "left")):
                return False
        return True

    def convert(self, value):
        """``int`` or ``float``."""
        return int(value) if self.kind == "integer" else float(value)

    def describe(self) -> str:
        """E.g. ``a real number in (0, inf)`` or ``an integer in [2, 1000000]``."""
        left = "[" if self.closed in ("left", "both") and self.low is not None else "("
        right = "]" if self.closed in ("right", "both") and self.high is not None else ")"
        low = "-inf" if self.low is None else _format_end(self.low)
        high = "inf" if self.high is None else _format_end(self.high)
        noun = "an integer" if self.kind == "integer" else "a finite real number"
        return f"{noun} in {left}{low}, {high}{right}"


def _format_end(value) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def _short_repr(value, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (huge ints, long strings)."""
    if isinstance(value, int) and value.bit_length() > 128:
        return f"<integer with {value.bit_length()} bits>"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Options(Constraint):
    """One of a fixed set of strings (compared exactly, never case-folded)."""

    def __init__(self, *values: str):
        self.values = values

    def accepts_type(self, value) -> bool:
        """Strings."""
        return isinstance(value, str)

    def accepts_value(self, value) -> bool:
        """One of the listed strings."""
        return value in self.values

    def describe(self) -> str:
        """E.g. ``one of 'auto'``."""
        return "one of " + ", ".join(repr(v) for v in self.values)


class Boolean(Constraint):
    """A ``bool`` (or ``numpy.bool_``), never a number or a string; converted to bool."""

    def accepts_type(self, value) -> bool:
        """Booleans only."""
        return isinstance(value, bool | np.bool_)

    def convert(self, value):
        """A Python bool."""
        return bool(value)

    def describe(self) -> str:
        """``a bool``."""
        return "a bool"


class NoneValue(Constraint):
    """``None`` (e.g. "not given")."""

    def accepts_type(self, value) -> bool:
        """Only None."""
        return value is None

    def describe(self) -> str:
        """``None``."""
        return "None"


class InstanceOf(Constraint):
    """An instance of a class (or tuple of classes)."""

    def __init__(self, kind, name: str | None = None):
        self.kind = kind
        self.name = name or getattr(kind, "__name__", str(kind))

    def accepts_type(self, value) -> bool:
        """``isinstance(value, kind)``."""
        return isinstance(value, self.kind)

    def describe(self) -> str:
        """E.g. ``a BudgetAccountant``."""
        return f"a {self.name}"


def validate_params(owner, constraints, values=None) -> dict:
    """Check parameters against a constraints table and return them converted.

    Parameters
    ----------
    owner : object
        Object whose attributes are the parameters (``values`` is None), and whose class
        name prefixes error messages.
    constraints : dict of str to list of Constraint
        Accepted forms of each parameter.
    values : dict or None, default=None
        Values to check instead of ``owner``'s attributes.

    Returns
    -------
    dict
        Each parameter's value in canonical form (Python int / float / bool).

    Raises
    ------
    TypeError
        If no constraint accepts the value's type (e.g. a string or a bool for a
        number).
    ValueError
        If some constraint accepts the type but none the value (out of range, NaN,
        infinite, unknown option).
    """
    owner_name = owner if isinstance(owner, str) else type(owner).__name__
    checked = {}
    for name, options in constraints.items():
        value = values[name] if values is not None else getattr(owner, name)
        typed = [option for option in options if option.accepts_type(value)]
        expected = " or ".join(option.describe() for option in options)
        if not typed:
            raise TypeError(
                f"{owner_name}: {name} must be {expected}; got {_short_repr(value)} of "
                f"type {type(value).__name__}."
            )
        accepted = next((option for option in typed if option.accepts_value(value)), None)
        if accepted is None:
            raise ValueError(f"{owner_name}: {name} must be {expected}; got {_short_repr(value)}.")
        checked[name] = accepted.convert(value)
    return checked
