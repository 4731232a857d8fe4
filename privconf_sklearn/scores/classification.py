"""Conformity scores for classification: LAC and APS.

Both read ``predict_proba`` and lie in the public range [0, 1] whatever the data, so
no bound needs to be taken from the calibration set. Scores are computed in float64,
and prediction sets are computed with exactly the same floating-point operations as
calibration scores, so ``y in C(x)`` if and only if ``score(x, y) <= threshold``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from sklearn.utils import check_random_state

from .._validation import check_probabilities
from ._base import BaseConformityScore

__all__ = ["APS", "LAC", "ClassificationScore"]


class ClassificationScore(BaseConformityScore):
    """Base class of scores computed from ``predict_proba``.

    ``y`` passed to :meth:`conformity_scores` holds column indices into
    ``estimator.classes_``; the estimator wrapper does the encoding.
    """

    natural_bounds = (0.0, 1.0)

    def check_estimator(self, estimator) -> None:
        """Require ``predict_proba`` and ``classes_`` (checked on the fitted estimator)."""
        if not hasattr(estimator, "predict_proba"):
            raise TypeError(
                f"The {type(self).__name__} score needs estimator.predict_proba, which "
                f"{type(estimator).__name__} does not provide. Wrap it, e.g. in "
                "sklearn.calibration.CalibratedClassifierCV, or use a probabilistic model."
            )

    def estimator_outputs(self, estimator, X) -> np.ndarray:
        """``estimator.predict_proba(X)`` as float64, validated."""
        proba = check_probabilities(
            estimator.predict_proba(X),
            len(estimator.classes_),
            estimator_name=type(estimator).__name__,
        )
        return proba.astype(np.float64, copy=False)


@lru_cache(maxsize=256)
def _lac_cutoff(threshold: float) -> float:
    """Smallest float64 ``c >= 0`` with ``fl(1 - c) <= threshold``, for ``threshold < 1``.

    ``p -> fl(1 - p)`` is non-increasing, so ``{p : fl(1 - p) <= t}`` is ``{p >= c}``.
    Non-negative float64 values are ordered like their bit patterns, so a bisection on
    the bit patterns of [0, 1] finds ``c`` exactly in at most 64 steps.
    """
    low = 0  # bit pattern of 0.0; fl(1 - 0) = 1 > threshold
    high = int(np.float64(1.0).view(np.int64))  # fl(1 - 1) = 0 <= threshold
    while high - low > 1:
        middle = (low + high) // 2
        if 1.0 - float(np.int64(middle).view(np.float64)) <= threshold:
            high = middle
        else:
            low = middle
    return float(np.int64(high).view(np.float64))


class LAC(ClassificationScore):
    """Least ambiguous set-valued classifier score ``1 - p_y(x)``.

    Sadinle, Lei and Wasserman (2019); the "hinge" score of paper 002 Sec. 5 and the
    score of paper 000 Sec. 4. Prediction sets are ``{y : 1 - p_y(x) <= t}``.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.scores import LAC
    >>> proba = np.array([[0.7, 0.2, 0.1]])
    >>> LAC().conformity_scores(proba, np.array([1]))
    array([0.8])
    >>> LAC().predict_set(proba, 0.8)
    array([[ True,  True, False]])
    """

    def conformity_scores(self, outputs, y, *, random_state=None) -> np.ndarray:
        """``1 - p_{y_i}(x_i)``."""
        return 1.0 - outputs[np.arange(outputs.shape[0]), y]

    def predict_set(self, outputs, threshold, *, random_state=None) -> np.ndarray:
        """``{y : 1 - p_y(x) <= threshold}``, computed as one comparison ``p_y >= c``."""
        if threshold >= 1.0:
            return np.ones(outputs.shape, dtype=bool)
        return outputs >= np.float64(_lac_cutoff(float(threshold)))


class APS(ClassificationScore):
    """Adaptive prediction sets score (Romano, Sesia and Candes 2020).

    Non-randomised (paper 003 Sec. 2): the probability mass of the labels at least as
    likely as ``y``, ``R(x, y) = sum_{k : p_k(x) >= p_y(x)} p_k(x)``. It is computed as
    ``1 - sum_{k : p_k(x) < p_y(x)} p_k(x)``, equal for probabilities summing to one,
    so that the least likely label scores exactly 1 and threshold 1 gives the full
    label set whatever the rounding. Labels with tied probabilities get the same score,
    so sets never depend on the order of ``classes_``; without ties this is the paper's
    ``sum_{r <= J(x, y)} p_(r)(x)``. The set ``{y : R(x, y) <= t}`` is the smallest group
    of most likely labels whose cumulative mass stays within ``t``.

    With ``randomized=True``, the score of Romano et al. with one uniform ``U`` per
    sample, ``R(x, y) - (1 - U) * sum_{k : p_k = p_y} p_k``: smaller sets on average,
    at the price of randomness at prediction time (drawn from the estimator's
    ``random_state``; it is not privacy noise).

    Scores are clipped to [0, 1] against rounding.

    Parameters
    ----------
    randomized : bool, default=False
        Use the randomised score.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.scores import APS
    >>> proba = np.array([[0.5, 0.3, 0.2]])
    >>> APS().conformity_scores(proba, np.array([1]))
    array([0.8])
    >>> APS().predict_set(proba, 0.8)
    array([[ True,  True, False]])
    """

    def __init__(self, randomized: bool = False):
        self.randomized = randomized

    def _check_params(self) -> None:
        if not isinstance(self.randomized, bool | np.bool_):
            raise ValueError(f"randomized must be a bool; got {self.randomized!r}.")

    def conformity_scores(self, outputs, y, *, random_state=None) -> np.ndarray:
        """APS scores of the pairs ``(x_i, y_i)``."""
        self._check_params()
        n = outputs.shape[0]
        rows = np.arange(n)
        p_true = outputs[rows, y][:, None]
        cumulative = np.cumsum(np.sort(outputs, axis=1), axis=1)
        less = (outputs < p_true).sum(axis=1)
        below = np.where(less > 0, cumulative[rows, np.maximum(less, 1) - 1], 0.0)
        scores = 1.0 - below
        if self.randomized:
            group_mass = cumulative[rows, (outputs <= p_true).sum(axis=1) - 1] - below
            u = check_random_state(random_state).uniform(size=n)
            scores = scores - (1.0 - u) * group_mass
        return np.clip(scores, 0.0, 1.0)

    def predict_set(self, outputs, threshold, *, random_state=None) -> np.ndarray:
        """``{y : R(x, y) <= threshold}``, computed as ``p_y >= cutoff(x)``."""
        self._check_params()
        n, k = outputs.shape
        if threshold >= 1.0 and not self.randomized:
            return np.ones(outputs.shape, dtype=bool)
        ascending = np.sort(outputs, axis=1)
        cumulative = np.cumsum(ascending, axis=1)
        # Mass strictly below each sorted position's tie group: the running sum just
        # before the group starts (the same floats the calibration scores use).
        previous = np.zeros((n, k))
        previous[:, 1:] = cumulative[:, :-1]
        group_start = np.ones((n, k), dtype=bool)
        group_start[:, 1:] = ascending[:, 1:] != ascending[:, :-1]
        below = np.maximum.accumulate(np.where(group_start, previous, -np.inf), axis=1)
        scores = 1.0 - below
        if self.randomized:
            group_end = np.ones((n, k), dtype=bool)
            group_end[:, :-1] = group_start[:, 1:]
            end_sum = np.where(group_end, cumulative, np.inf)
            end_sum = np.minimum.accumulate(end_sum[:, ::-1], axis=1)[:, ::-1]
            u = check_random_state(random_state).uniform(size=n)[:, None]
            scores = scores - (1.0 - u) * (end_sum - below)
        np.clip(scores, 0.0, 1.0, out=scores)
        passes = scores <= threshold
        if self.randomized:
            # Sets are nested groups of most likely labels even if rounding put two
            # randomised scores one ulp out of order.
            passes = np.logical_and.accumulate(passes[:, ::-1], axis=1)[:, ::-1]
        first = k - passes.sum(axis=1)
        cutoff = np.where(first < k, ascending[np.arange(n), np.minimum(first, k - 1)], np.inf)
        return outputs >= cutoff[:, None]
