"""Conformity scores for classification: LAC, APS and RAPS.

All read ``predict_proba``. LAC and APS lie in the public range [0, 1] whatever the
data; RAPS in ``[0, 1 + lambda_ * max(0, K - k_reg)]``, public once the number of
classes ``K`` is known. Scores are computed in float64, and prediction sets are computed
with exactly the same floating-point operations as calibration scores, so ``y in C(x)``
if and only if ``score(x, y) <= threshold``.

Memory is bounded by default: APS and RAPS process the rows in blocks of about
``2**16`` probabilities, so that besides the result (one byte per label) they hold a
few blocks of temporaries, whatever the number of rows; LAC needs no temporary of the
size of the input. Rows never interact, so the result does not depend on the blocks.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from numbers import Integral, Real

import numpy as np
from sklearn.exceptions import NotFittedError

from .._param_validation import Interval, validate_params
from .._random import check_random_state
from .._validation import check_probabilities
from ._base import BaseConformityScore

__all__ = ["APS", "LAC", "RAPS", "ClassificationScore"]

#: Probabilities per block of rows (512 KiB per float64 temporary).
_BLOCK_ELEMENTS = 2**16


def _row_blocks(n_rows: int, n_columns: int) -> Iterator[slice]:
    """Slices of about ``_BLOCK_ELEMENTS`` entries (at least one row) covering the rows."""
    step = max(1, _BLOCK_ELEMENTS // max(n_columns, 1))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def _holds_bools(values: np.ndarray) -> np.ndarray:
    """Which entries are booleans (Python or numpy)."""
    if values.dtype.kind == "b":
        return np.ones(values.shape, dtype=bool)
    if values.dtype.kind != "O":
        return np.zeros(values.shape, dtype=bool)
    return np.array([isinstance(v, bool | np.bool_) for v in values.tolist()], dtype=bool)


def check_label_kinds(
    y, classes, *, y_name: str = "y", classes_name: str = "the classifier's classes_"
) -> None:
    """Refuse booleans matched to non-boolean classes (``True == 1``), and the reverse.

    The rule of the estimators (labels against ``classes_``) and of the metrics (labels
    against the columns of prediction sets), applied before labels are encoded as
    column indices.

    Parameters
    ----------
    y : array-like
        Labels.
    classes : array-like
        The label of each column.
    y_name, classes_name : str
        Names used in error messages.

    Raises
    ------
    TypeError
        If ``y`` holds booleans but ``classes`` holds none, or ``classes`` are booleans
        but ``y`` holds other values.
    """
    labels = np.asarray(y).reshape(-1)
    classes = np.asarray(classes)
    y_bools, class_bools = _holds_bools(labels), _holds_bools(classes)
    if y_bools.any() and not class_bools.any():
        raise TypeError(
            f"{y_name} holds boolean labels but {classes_name} are "
            f"{classes.tolist()[:10]}: True and False would silently match 1 and 0. "
            f"Convert the labels explicitly (e.g. {y_name}.astype(int)) or use boolean "
            "classes."
        )
    if class_bools.all() and class_bools.size and not y_bools.all():
        raise TypeError(
            f"{classes_name} are booleans but {y_name} holds other labels, e.g. "
            f"{labels[~y_bools][:5].tolist()}: they would silently match True and False. "
            "Pass boolean labels."
        )


class ClassificationScore(BaseConformityScore):
    """Base class of scores computed from ``predict_proba``.

    ``y`` passed to :meth:`conformity_scores` holds column indices into
    ``estimator.classes_``; the estimator wrapper does the encoding.
    """

    _natural_bounds = (0.0, 1.0)

    def check_estimator(self, estimator) -> None:
        """Require ``predict_proba`` (checked on the fitted estimator)."""
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

    Sadinle, Lei and Wasserman (2019); the score of Angelopoulos et al. (2022), Sec. 4,
    and of the contract-cards paper's experiments. Prediction sets are
    ``{y : 1 - p_y(x) <= t}``: the smallest sets on average among the scores here, but
    with coverage that can be far from ``1 - alpha`` on hard inputs.

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
        """``{y : 1 - p_y(x) <= threshold}``, computed as one comparison ``p_y >= c``.

        The only array allocated is the result.
        """
        if threshold >= 1.0:
            return np.ones(outputs.shape, dtype=bool)
        if threshold < 0.0:
            return np.zeros(outputs.shape, dtype=bool)
        return outputs >= np.float64(_lac_cutoff(float(threshold)))


class _CumulativeMassScore(ClassificationScore):
    """APS and RAPS: probability mass of the labels at least as likely as ``y``.

    Shared computation, for one row with probabilities sorted increasingly
    (``a_0 <= ... <= a_{K-1}``), running sums ``S_j = a_0 + ... + a_j`` (float64, left
    to right) and a label ``y`` whose tie group ``{k : p_k = p_y}`` occupies sorted
    positions ``s..e-1``:

    - ``below = S_{s-1}`` (0 if ``s = 0``): the mass of the labels less likely than
      ``y``; ``end = S_{e-1}``;
    - non-randomised score ``clip(1 - below, 0, 1) + penalty(K - s)``;
    - randomised score ``clip(1 - (U * below + (1 - U) * end), 0, 1) + penalty(K - s)``
      with one uniform ``U`` per row,

    where ``K - s = #{k : p_k >= p_y}`` is the rank of ``y`` (ties share the rank of
    their group) and ``penalty`` is 0 for APS. Both are non-increasing in ``p_y``
    in floating point (sums of non-negative terms only grow, products with a
    non-negative constant, ``1 - x``, clipping and adding a non-increasing penalty are
    all monotone), so every set ``{y : score <= t}`` is a group of most likely labels,
    ``{y : p_y >= cutoff}``, and is computed as that one comparison.
    """

    _parameter_constraints: dict = {"randomized": ["boolean"]}

    def _check_params(self) -> dict:
        """The parameters, validated (once per public call; helpers get the result)."""
        return validate_params(
            self._parameter_constraints, self.get_params(deep=False), type(self).__name__
        )

    def _penalties(self, n_classes: int, params: dict) -> np.ndarray | None:
        """``penalty(r)`` for ranks ``r = 1..K`` (index ``r - 1``), or None for none."""
        return None

    def conformity_scores(self, outputs, y, *, random_state=None) -> np.ndarray:
        """Scores of the pairs ``(x_i, y_i)``, computed block by block."""
        params = self._check_params()
        n, k = outputs.shape
        y = np.asarray(y)
        u = check_random_state(random_state).uniform(size=n) if params["randomized"] else None
        penalties = self._penalties(k, params)
        scores = np.empty(n)
        for rows in _row_blocks(n, k):
            block = outputs[rows]
            index = np.arange(block.shape[0])
            p_true = block[index, y[rows]][:, None]
            cumulative = np.cumsum(np.sort(block, axis=1), axis=1)
            start = np.count_nonzero(block < p_true, axis=1)
            below = np.where(start > 0, cumulative[index, np.maximum(start, 1) - 1], 0.0)
            if u is None:
                score = 1.0 - below
            else:
                end = cumulative[index, np.count_nonzero(block <= p_true, axis=1) - 1]
                u_rows = u[rows]
                score = 1.0 - (u_rows * below + (1.0 - u_rows) * end)
            np.clip(score, 0.0, 1.0, out=score)
            if penalties is not None:
                score += penalties[k - start - 1]
            scores[rows] = score
        return scores

    def _top_score(self, n_classes: int, params: dict) -> float:
        """The largest possible score: every set at a threshold this high is full."""
        penalties = self._penalties(n_classes, params)
        return 1.0 if penalties is None else float(1.0 + penalties[-1])

    def predict_set(self, outputs, threshold, *, random_state=None) -> np.ndarray:
        """``{y : score(x, y) <= threshold}``, computed as ``p_y >= cutoff(x)``.

        Rows are processed in blocks, so memory beyond the result is bounded.
        """
        params = self._check_params()
        randomized = params["randomized"]
        n, k = outputs.shape
        if not randomized and threshold >= self._top_score(k, params):
            return np.ones(outputs.shape, dtype=bool)
        u = check_random_state(random_state).uniform(size=n) if randomized else None
        penalties = self._penalties(k, params)
        # Penalty of the label at sorted position j, whose group would start there.
        by_position = None if penalties is None else penalties[::-1].copy()
        sets = np.empty(outputs.shape, dtype=bool)
        for rows in _row_blocks(n, k):
            block = outputs[rows]
            ascending = np.sort(block, axis=1)
            if u is None:
                cutoff = self._plain_cutoff(ascending, threshold, by_position)
            else:
                cutoff = self._randomized_cutoff(ascending, threshold, by_position, u[rows])
            np.greater_equal(block, cutoff[:, None], out=sets[rows])
        return sets

    @staticmethod
    def _plain_cutoff(ascending, threshold, by_position) -> np.ndarray:
        """Smallest probability in each row's set (``inf`` for an empty set).

        ``g_j = clip(1 - S_{j-1}) + penalty(K - j)`` is the score of a label whose tie
        group starts at position ``j``, and is non-increasing in ``j``. Let ``f`` be the
        first ``j`` with ``g_j <= t``. If a group starts at ``f``, the set is
        ``{p >= a_f}``. Otherwise the group through ``f`` started earlier, where
        ``g > t``, so it is out, and every later group is in: the set is ``{p > a_f}``.
        """
        n_rows, k = ascending.shape
        scores = np.empty((n_rows, k))
        scores[:, 0] = 1.0
        np.cumsum(ascending[:, :-1], axis=1, out=scores[:, 1:])
        np.subtract(1.0, scores[:, 1:], out=scores[:, 1:])
        np.clip(scores, 0.0, 1.0, out=scores)
        if by_position is not None:
            scores += by_position
        first = k - np.count_nonzero(scores <= threshold, axis=1)
        rows = np.arange(n_rows)
        inside = first < k
        position = np.minimum(first, k - 1)
        value = ascending[rows, position]
        starts_group = (position == 0) | (ascending[rows, np.maximum(position - 1, 0)] < value)
        cutoff = np.where(starts_group, value, np.nextafter(value, np.inf))
        return np.where(inside, cutoff, np.inf)

    @staticmethod
    def _randomized_cutoff(ascending, threshold, by_position, u) -> np.ndarray:
        """Smallest probability in each row's randomised set (``inf`` for an empty set)."""
        n_rows, k = ascending.shape
        cumulative = np.cumsum(ascending, axis=1)
        starts = np.ones((n_rows, k), dtype=bool)
        np.not_equal(ascending[:, 1:], ascending[:, :-1], out=starts[:, 1:])
        below = np.zeros((n_rows, k))
        below[:, 1:] = cumulative[:, :-1]
        end = cumulative
        start = None
        if not starts.all():  # ties: every label takes its group's values
            below = np.maximum.accumulate(np.where(starts, below, -np.inf), axis=1)
            ends = np.ones((n_rows, k), dtype=bool)
            ends[:, :-1] = starts[:, 1:]
            end = np.where(ends, cumulative, np.inf)
            end = np.minimum.accumulate(end[:, ::-1], axis=1)[:, ::-1]
            start = np.maximum.accumulate(np.where(starts, np.arange(k), 0), axis=1)
        u = u[:, None]
        scores = below * u
        scores += end * (1.0 - u)
        np.subtract(1.0, scores, out=scores)  # 1 - (U below + (1 - U) end)
        np.clip(scores, 0.0, 1.0, out=scores)
        if by_position is not None:
            scores += by_position if start is None else by_position[start]
        first = k - np.count_nonzero(scores <= threshold, axis=1)
        value = ascending[np.arange(n_rows), np.minimum(first, k - 1)]
        return np.where(first < k, value, np.inf)


class APS(_CumulativeMassScore):
    """Adaptive prediction sets score (Romano, Sesia and Candes 2020).

    Non-randomised (the contract-cards paper, Sec. 2): the probability mass of the
    labels at least as likely as ``y``, ``R(x, y) = sum_{k : p_k(x) >= p_y(x)} p_k(x)``.
    It is computed as ``1 - sum_{k : p_k(x) < p_y(x)} p_k(x)``, equal for probabilities
    summing to one, so that the least likely label scores exactly 1 and threshold 1
    gives the full label set whatever the rounding. Labels with tied probabilities get
    the same score, so sets never depend on the order of ``classes_``; without ties
    this is the paper's ``sum_{r <= J(x, y)} p_(r)(x)``. The set ``{y : R(x, y) <= t}``
    is the smallest group of most likely labels whose cumulative mass stays within
    ``t``. Its sets adapt to the difficulty of ``x`` (conditional coverage closer to
    ``1 - alpha`` than LAC's) and are larger than LAC's on average.

    With ``randomized=True``, the score of Romano et al. with one uniform ``U`` per
    sample, ``R(x, y) - (1 - U) * sum_{k : p_k = p_y} p_k`` (computed as
    ``1 - (U * below + (1 - U) * (below + group mass))``, where ``below`` is the mass of
    the less likely labels): smaller sets on average, and the default APS of MAPIE
    (``conformity_score="aps_randomized"`` here), at the price of randomness at
    prediction time (drawn from the estimator's ``random_state``; it is not privacy
    noise) and of possibly empty sets.

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


class RAPS(_CumulativeMassScore):
    """Regularised adaptive prediction sets score (Angelopoulos, Bates, Malik and Jordan 2021).

    "Uncertainty sets for image classifiers using conformal prediction" (ICLR 2021),
    Eq. (3) and Algorithm 2: APS plus a penalty on the rank of the label,

    ``E(x, y) = R(x, y) + lambda_ * max(0, o(x, y) - k_reg)``,

    where ``R`` is the :class:`APS` score (randomised or not, as ``randomized`` says)
    and ``o(x, y) = #{k : p_k(x) >= p_y(x)}`` is the rank of ``y`` (1 for the most
    likely label; tied labels share the rank of their group, so sets never depend on
    the order of ``classes_``). The penalty makes long tails of unlikely labels
    expensive: sets are smaller than APS's, and with ``lambda_ = 0`` RAPS is APS.

    ``k_reg`` and ``lambda_`` are public parameters: choose them before calibrating,
    on data disjoint from the calibration set (the paper picks ``k_reg`` as a quantile
    of the true label's rank and ``lambda_`` in {0.001, 0.01, 0.1, 0.2, 0.5} on a
    separate split), never on the calibration data.

    **Public range.** ``[0, 1 + lambda_ * max(0, K - k_reg)]`` for ``K`` classes (the
    least likely label scores 1 plus the largest penalty): it depends only on the
    parameters and on ``K``, which is public once the estimator is fitted. The
    estimator maps scores into [0, 1] through that range; :attr:`natural_bounds` is
    available once :meth:`check_estimator` has seen the fitted estimator, and
    :meth:`score_range` gives it for any ``K``. A large ``lambda_ * K`` squeezes the APS
    part into a small share of the range, which a binned private mechanism resolves
    less finely.

    Parameters
    ----------
    k_reg : int, default=1
        Number of labels that are not penalised (``k_reg >= 0``).
    lambda_ : float, default=0.01
        Penalty per label beyond ``k_reg`` (a finite real ``>= 0``).
    randomized : bool, default=False
        Use the randomised APS part (one uniform per sample, as in the paper's
        Algorithm 2; drawn from the estimator's ``random_state``, not privacy noise).

    Attributes
    ----------
    n_classes_ : int
        Number of classes of the estimator passed to :meth:`check_estimator`.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.scores import RAPS
    >>> proba = np.array([[0.5, 0.3, 0.2]])
    >>> score = RAPS(k_reg=1, lambda_=0.1)
    >>> score.conformity_scores(proba, np.array([1]))
    array([0.9])
    >>> score.predict_set(proba, 0.9)
    array([[ True,  True, False]])
    >>> score.score_range(3)
    (0.0, 1.2)
    """

    _parameter_constraints: dict = {
        "k_reg": [Interval(Integral, 0, None, closed="left")],
        "lambda_": [Interval(Real, 0.0, None, closed="left")],
        "randomized": ["boolean"],
    }

    def __init__(self, k_reg: int = 1, lambda_: float = 0.01, randomized: bool = False):
        self.k_reg = k_reg
        self.lambda_ = lambda_
        self.randomized = randomized

    def _penalties(self, n_classes: int, params: dict) -> np.ndarray:
        ranks = np.arange(1, n_classes + 1, dtype=np.int64)
        excess = np.maximum(ranks - min(params["k_reg"], n_classes), 0).astype(np.float64)
        with np.errstate(over="ignore"):
            penalties = params["lambda_"] * excess
        if n_classes and not np.isfinite(1.0 + penalties[-1]):
            raise ValueError(
                f"RAPS: lambda_ = {self.lambda_!r} is too large for {n_classes} classes: "
                "the score range 1 + lambda_ * (n_classes - k_reg) overflows float64."
            )
        return penalties

    def score_range(self, n_classes: int) -> tuple[float, float]:
        """Public range ``(0, 1 + lambda_ * max(0, n_classes - k_reg))`` of the scores.

        The upper end is computed with the same floating-point operations as the score
        of the least likely label, so it is attained exactly.
        """
        return self._range(n_classes, self._check_params())

    def _range(self, n_classes: int, params: dict) -> tuple[float, float]:
        if int(n_classes) < 1:
            raise ValueError(f"n_classes must be >= 1; got {n_classes!r}.")
        return 0.0, self._top_score(int(n_classes), params)

    def check_estimator(self, estimator) -> None:
        """Require ``predict_proba`` and ``classes_``; record ``n_classes_``."""
        super().check_estimator(estimator)
        if not hasattr(estimator, "classes_"):
            raise TypeError(
                f"{type(estimator).__name__} has no classes_: it is not a fitted classifier."
            )
        params = self._check_params()
        self.n_classes_ = len(estimator.classes_)
        self._range(self.n_classes_, params)  # fails early if the range overflows

    @property
    def natural_bounds(self) -> tuple[float, float]:
        """``score_range(n_classes_)``, once :meth:`check_estimator` has run."""
        if not hasattr(self, "n_classes_"):
            raise NotFittedError(
                "RAPS's public range depends on the number of classes: call "
                "check_estimator(fitted_estimator) first, or use score_range(n_classes)."
            )
        return self.score_range(self.n_classes_)
