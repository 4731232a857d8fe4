"""Conformity scores for regression: absolute residual, CQR and normalized residual.

Regression scores are unbounded (``natural_bounds = None``): the estimator maps them
into the public range [0, 1] through the user's public ``score_bounds`` before any
mechanism sees them (see :class:`~privconf_sklearn.PrivateConformalRegressor`).

Every score here is non-decreasing in the distance of ``y`` from the model's band, so
``{y : score(x, y) <= t}`` is the closed interval returned by :meth:`predict_set`. The
interval ends are computed as ``f(x) - t`` and ``f(x) + t`` (scaled by ``sigma(x)`` for
the normalized score) in float64, the same expressions MAPIE uses, so in exact
arithmetic ``y`` is in the interval iff ``score(x, y) <= t``; in floating point the two
can differ only by the rounding of that one addition.
"""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from .._param_validation import Interval, validate_params
from ._base import BaseConformityScore

__all__ = ["CQR", "AbsoluteResidual", "NormalizedResidual", "RegressionScore"]


def check_predictions(predictions, n_columns: int, *, source: str, expected: str) -> np.ndarray:
    """Validate regression predictions and return them as float64.

    Parameters
    ----------
    predictions : array-like
        Output of an estimator method.
    n_columns : int
        1 for point predictions (shape ``(n,)`` or ``(n, 1)``, returned as ``(n,)``),
        2 for lower/upper quantile predictions (shape ``(n, 2)``).
    source : str
        What produced them, for error messages (e.g. ``"Ridge.predict"``).
    expected : str
        What they should be, for error messages.

    Returns
    -------
    ndarray of shape (n,) or (n, 2), dtype float64

    Raises
    ------
    ValueError
        If the shape is not the expected one, the values are not real numbers, or any
        value is NaN or infinite.
    """
    array = np.asarray(predictions)
    if not np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.complexfloating):
        raise ValueError(f"{source} returned values of dtype {array.dtype}; expected {expected}.")
    if n_columns == 1 and array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    good_shape = array.ndim == 1 if n_columns == 1 else (array.ndim == 2 and array.shape[1] == 2)
    if not good_shape:
        shape = "(n_samples,) or (n_samples, 1)" if n_columns == 1 else "(n_samples, 2)"
        raise ValueError(
            f"{source} returned shape {array.shape}; expected {expected}, of shape {shape}."
        )
    array = array.astype(np.float64, copy=False)
    # One pairwise sum detects NaN and infinity (they propagate); the elementwise check
    # runs only when it fails (bad values, or an overflow of finite ones).
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.add.reduce(array, axis=None)
    if array.size and not np.isfinite(total):
        bad = ~np.isfinite(array)
        if bad.any():
            rows = np.flatnonzero(bad.reshape(array.shape[0], -1).any(axis=1))
            raise ValueError(
                f"{source} returned NaN or infinite values in {rows.size} rows, e.g. rows "
                f"{rows[:5].tolist()}."
            )
    return array


def _interval(lower, upper, half_width) -> np.ndarray:
    """``[lower - half_width, upper + half_width]`` as one ``(n_samples, 2)`` array.

    The array is column-major (the transpose of a ``(2, n_samples)`` array), so each
    column is one contiguous in-place ufunc: as fast as the two bare expressions, and
    several times faster than broadcasting over a length-2 axis or writing strided
    columns of a row-major array.
    """
    intervals = np.empty((2, lower.shape[0]))
    np.subtract(lower, half_width, out=intervals[0])
    np.add(upper, half_width, out=intervals[1])
    return intervals.T


class RegressionScore(BaseConformityScore):
    """Base class of regression scores (unbounded: public bounds must be supplied).

    ``y`` passed to :meth:`conformity_scores` is a finite float64 vector (the estimator
    wrapper validates it). :meth:`predict_set` returns an ``(n_samples, 2)`` array of
    lower and upper interval ends.
    """

    _natural_bounds = None

    def check_estimator(self, estimator) -> None:
        """Require ``estimator.predict``."""
        if not hasattr(estimator, "predict"):
            raise TypeError(
                f"The {type(self).__name__} score needs estimator.predict, which "
                f"{type(estimator).__name__} does not provide."
            )

    def _point_predictions(self, estimator, X) -> np.ndarray:
        return check_predictions(
            estimator.predict(X),
            1,
            source=f"{type(estimator).__name__}.predict",
            expected="one finite point prediction per row",
        )


class AbsoluteResidual(RegressionScore):
    """Absolute residual score ``|y - f(x)|`` (split conformal regression).

    Lei et al. (2018); Humbert et al. (2023), Sec. 5 ("split CP"). The interval at
    threshold ``t`` is ``[f(x) - t, f(x) + t]``: constant width ``2 t``. Reads
    ``estimator.predict``, which must return shape ``(n_samples,)`` (or
    ``(n_samples, 1)``). The score is non-negative, so public bounds ``(0, high)`` are
    natural.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.scores import AbsoluteResidual
    >>> predictions = np.array([1.0, 2.0])
    >>> AbsoluteResidual().conformity_scores(predictions, np.array([1.5, 1.0]))
    array([0.5, 1. ])
    >>> AbsoluteResidual().predict_set(predictions, 0.5)
    array([[0.5, 1.5],
           [1.5, 2.5]])
    """

    def estimator_outputs(self, estimator, X) -> np.ndarray:
        """``estimator.predict(X)`` as a finite float64 vector."""
        return self._point_predictions(estimator, X)

    def conformity_scores(self, outputs, y, *, random_state=None) -> np.ndarray:
        """``|y_i - f(x_i)|``."""
        return np.abs(y - outputs)

    def predict_set(self, outputs, threshold, *, random_state=None) -> np.ndarray:
        """``[f(x) - t, f(x) + t]`` per row."""
        return _interval(outputs, outputs, float(threshold))


def _quantile_method(estimator) -> str:
    return "predict_quantiles" if hasattr(estimator, "predict_quantiles") else "predict"


class CQR(RegressionScore):
    """Conformalized quantile regression score (Romano, Patterson and Candes 2019).

    ``s(x, y) = max(q_lo(x) - y, y - q_hi(x))`` (Humbert et al. 2023, Sec. 5), where ``q_lo`` and
    ``q_hi`` are lower and upper quantile regressions, e.g. at levels ``alpha / 2`` and
    ``1 - alpha / 2``. The score is negative inside the band, so its public bounds
    usually have a negative lower end. The interval at threshold ``t`` is
    ``[q_lo(x) - t, q_hi(x) + t]``: its width adapts to the noise level through the
    quantile band. If the two quantile predictions cross by more than ``2 |t|`` the
    interval is empty (lower > upper), exactly as the score says.

    Estimator API: the estimator gives both quantiles at once, as an ``(n_samples, 2)``
    array of ``[lower, upper]``, from ``predict_quantiles(X)`` if it has that method and
    ``predict(X)`` otherwise. For two separate quantile regressors, wrap them in
    :class:`~privconf_sklearn.QuantilePair`, which provides ``predict_quantiles``; a
    single model that predicts both quantiles (e.g. a two-output network) can be passed
    as it is. Anything else is rejected with an error naming the shape it returned.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.scores import CQR
    >>> band = np.array([[0.0, 2.0], [1.0, 1.5]])
    >>> CQR().conformity_scores(band, np.array([1.0, 2.0]))
    array([-1. ,  0.5])
    >>> CQR().predict_set(band, 0.5)
    array([[-0.5,  2.5],
           [ 0.5,  2. ]])
    """

    def check_estimator(self, estimator) -> None:
        """Require ``predict_quantiles`` or ``predict``."""
        if not (hasattr(estimator, "predict_quantiles") or hasattr(estimator, "predict")):
            raise TypeError(
                f"The CQR score needs estimator.predict_quantiles or estimator.predict "
                f"returning (lower, upper) quantiles; {type(estimator).__name__} has neither."
            )

    def estimator_outputs(self, estimator, X) -> np.ndarray:
        """``[q_lo(x), q_hi(x)]`` as a finite float64 array of shape ``(n_samples, 2)``."""
        method = _quantile_method(estimator)
        return check_predictions(
            getattr(estimator, method)(X),
            2,
            source=f"{type(estimator).__name__}.{method}",
            expected=(
                "two quantile predictions per row, [lower, upper] (wrap two quantile "
                "regressors in privconf_sklearn.QuantilePair(lower, upper))"
            ),
        )

    def conformity_scores(self, outputs, y, *, random_state=None) -> np.ndarray:
        """``max(q_lo(x_i) - y_i, y_i - q_hi(x_i))``."""
        return np.maximum(outputs[:, 0] - y, y - outputs[:, 1])

    def predict_set(self, outputs, threshold, *, random_state=None) -> np.ndarray:
        """``[q_lo(x) - t, q_hi(x) + t]`` per row."""
        return _interval(outputs[:, 0], outputs[:, 1], float(threshold))


class NormalizedResidual(RegressionScore):
    """Normalized residual score ``|y - f(x)| / sigma(x)`` (locally weighted conformal).

    Lei et al. (2018) Sec. 5.2; Papadopoulos et al. (2002). ``sigma(x) > 0`` is a
    difficulty estimate from a user-given regressor: the interval at threshold ``t`` is
    ``[f(x) - t sigma(x), f(x) + t sigma(x)]``, wider where the model is less accurate.

    How the difficulty estimator is given and fitted: pass an already fitted regressor
    whose ``predict(X)`` returns ``sigma(x)``, for example a model of the absolute
    residuals ``|y - f(x)|`` fitted on the training data. It must be fitted on data
    disjoint from the calibration set (fitting it on calibration data breaks both the
    exchangeability the coverage guarantee needs and the privacy of the calibration
    set). It is used as given and kept by reference through ``clone`` (like a prefit
    estimator), so tuning the wrapper with ``GridSearchCV`` does not drop its fit. It is
    never refitted, also not with ``prefit=False``.

    Parameters
    ----------
    difficulty_estimator : regressor
        Fitted regressor predicting ``sigma(x)``.
    min_difficulty : float or None, default=None
        If given (> 0), ``sigma(x)`` is ``max(prediction, min_difficulty)``. If None,
        a prediction that is not > 0 is an error, naming the rows.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.dummy import DummyRegressor
    >>> from privconf_sklearn.scores import NormalizedResidual
    >>> sigma = DummyRegressor(constant=2.0, strategy="constant").fit([[0]], [2.0])
    >>> score = NormalizedResidual(sigma)
    >>> outputs = np.array([[1.0, 2.0]])  # columns f(x), sigma(x)
    >>> score.conformity_scores(outputs, np.array([2.0]))
    array([0.5])
    >>> score.predict_set(outputs, 0.5)
    array([[0., 2.]])
    """

    def __init__(self, difficulty_estimator, *, min_difficulty: float | None = None):
        self.difficulty_estimator = difficulty_estimator
        self.min_difficulty = min_difficulty

    def __sklearn_clone__(self):
        """Keep the fitted difficulty estimator by reference (it is never refitted)."""
        return type(self)(self.difficulty_estimator, min_difficulty=self.min_difficulty)

    _parameter_constraints: dict = {
        "difficulty_estimator": "no_validation",  # check_estimator: fitted, with predict
        "min_difficulty": [None, Interval(Real, 0.0, None, closed="neither")],
    }

    def _check_params(self) -> None:
        validate_params(
            self._parameter_constraints, self.get_params(deep=False), type(self).__name__
        )

    def check_estimator(self, estimator) -> None:
        """Require ``estimator.predict`` and a fitted difficulty estimator with ``predict``."""
        self._check_params()
        super().check_estimator(estimator)
        difficulty = self.difficulty_estimator
        if not hasattr(difficulty, "predict"):
            raise TypeError(
                "NormalizedResidual needs difficulty_estimator.predict returning sigma(x) > 0; "
                f"{type(difficulty).__name__} has no predict."
            )
        try:
            check_is_fitted(difficulty)
        except NotFittedError as exc:
            raise NotFittedError(
                f"difficulty_estimator {type(difficulty).__name__} is not fitted: fit it on "
                "data disjoint from the calibration set (e.g. on the training residuals) "
                "before calibrating."
            ) from exc

    def estimator_outputs(self, estimator, X) -> np.ndarray:
        """``[f(x), sigma(x)]`` as a finite float64 array of shape ``(n_samples, 2)``."""
        self._check_params()
        predictions = self._point_predictions(estimator, X)
        name = type(self.difficulty_estimator).__name__
        sigma = check_predictions(
            self.difficulty_estimator.predict(X),
            1,
            source=f"difficulty_estimator {name}.predict",
            expected="one finite difficulty sigma(x) > 0 per row",
        )
        if sigma.shape[0] != predictions.shape[0]:
            raise ValueError(
                f"difficulty_estimator {name}.predict returned {sigma.shape[0]} rows for "
                f"{predictions.shape[0]} samples."
            )
        if self.min_difficulty is not None:
            sigma = np.maximum(sigma, float(self.min_difficulty))
        elif sigma.size and not sigma.min() > 0:
            rows = np.flatnonzero(~(sigma > 0))
            raise ValueError(
                f"difficulty_estimator {name}.predict returned values <= 0 in {rows.size} "
                f"rows (e.g. rows {rows[:5].tolist()}: {sigma[rows[:5]].tolist()}); "
                "sigma(x) must be > 0. Set min_difficulty to floor it."
            )
        return np.column_stack([predictions, sigma])

    def conformity_scores(self, outputs, y, *, random_state=None) -> np.ndarray:
        """``|y_i - f(x_i)| / sigma(x_i)``."""
        return np.abs(y - outputs[:, 0]) / outputs[:, 1]

    def predict_set(self, outputs, threshold, *, random_state=None) -> np.ndarray:
        """``[f(x) - t sigma(x), f(x) + t sigma(x)]`` per row."""
        half_width = float(threshold) * outputs[:, 1]
        return _interval(outputs[:, 0], outputs[:, 0], half_width)
