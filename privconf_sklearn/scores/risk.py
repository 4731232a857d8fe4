"""Losses of prediction sets for conformal risk control.

Sets are ``C_t(x) = {k : p_k(x) > t}`` for a threshold ``t`` on per-label probabilities,
MAPIE 1.6's convention (``MultiLabelClassificationController``: a label is in the set
when its probability exceeds the threshold). A lower threshold gives a larger set, so
candidates are ordered from the highest threshold (least conservative) to the lowest.
A loss object turns the model's probabilities and the true labels into the summed loss
curve over the thresholds (:class:`~privconf_sklearn.mechanisms.LossCurve`), which is
all a risk-control mechanism reads.

- :class:`FalseNegativeRate`: the share of a row's true labels missing from its set,
  ``1 - |Y ∩ C| / |Y|`` (0 for a row without true labels), in exact rational units. For
  single-label classification it is the miscoverage ``1{y not in C}``.
- :class:`CallableLoss`: any loss ``loss(y_true, y_set)`` of the indicator matrices, with
  its bound ``B``.
"""

from __future__ import annotations

import math
from abc import ABCMeta, abstractmethod
from functools import reduce
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import gen_batches

from .._param_validation import Interval, validate_params
from .._validation import check_probabilities, encode_labels
from ..mechanisms import LossCurve, loss_units, max_resolution
from .classification import check_label_kinds

__all__ = ["CallableLoss", "FalseNegativeRate", "SetLoss", "label_probabilities"]

#: Loss entries evaluated per block of rows by :class:`CallableLoss` (32 MiB of int64).
_BLOCK_ENTRIES = 2**22


def _positive_column(classes, output: int) -> int | None:
    """Column of the positive label (1 or True) of one output, or None if never seen."""
    classes = np.asarray(classes)
    if not set(classes.tolist()) <= {0, 1}:
        raise ValueError(
            f"multilabel outputs must be binary (labels 0/1); output {output} has classes "
            f"{classes.tolist()[:5]}."
        )
    columns = np.flatnonzero(classes == 1)
    return int(columns[0]) if columns.size else None


def _from_list(proba: list, estimator) -> np.ndarray:
    """Per-label probabilities from one ``(n, c_k)`` array per label (MultiOutputClassifier)."""
    classes = getattr(estimator, "classes_", None)
    columns = []
    for output, block in enumerate(proba):
        block = np.asarray(block, dtype=np.float64)
        if block.ndim != 2:
            raise ValueError(
                f"predict_proba returned a list whose entry {output} has shape {block.shape}; "
                "expected (n_samples, 2) per label."
            )
        if isinstance(classes, list) and len(classes) == len(proba):
            column = _positive_column(classes[output], output)
        else:
            column = 1 if block.shape[1] == 2 else None
        if column is None and block.shape[1] != 1:
            raise ValueError(
                f"cannot tell which column of predict_proba's entry {output} (shape "
                f"{block.shape}) is the positive label."
            )
        columns.append(np.zeros(block.shape[0]) if column is None else block[:, column])
    return np.column_stack(columns) if columns else np.empty((0, 0))


def label_probabilities(estimator, X, *, multilabel: bool, n_labels: int | None = None):
    """``p_k(x)`` for every row and label, validated, as float64 ``(n_samples, n_labels)``.

    Multilabel: ``predict_proba`` returns one ``(n, 2)`` array per label (scikit-learn's
    ``MultiOutputClassifier`` and multi-output forests: the column of label 1 is read
    from ``classes_``), an ``(n, K)`` array of per-label probabilities, or an
    ``(n, K, 2)`` array whose last axis is ``[negative, positive]`` (as MAPIE reads it).
    Single-label: the ``(n, n_classes)`` class probabilities.

    Raises
    ------
    ValueError
        If the output has another form, the wrong number of labels, or values that are
        not finite probabilities in [0, 1].
    """
    name = type(estimator).__name__
    proba = estimator.predict_proba(X)
    if not multilabel:
        return check_probabilities(proba, len(estimator.classes_), estimator_name=name)
    if isinstance(proba, list):
        proba = _from_list(proba, estimator)
    proba = np.asarray(proba, dtype=np.float64)
    if proba.ndim == 3 and proba.shape[2] == 2:
        proba = proba[..., 1]
    if proba.ndim != 2 or (n_labels is not None and proba.shape[1] != n_labels):
        raise ValueError(
            f"{name}.predict_proba gave per-label probabilities of shape {proba.shape}; "
            f"expected (n_samples, {n_labels if n_labels is not None else 'n_labels'})."
        )
    if proba.size and not (np.isfinite(proba).all() and proba.min() >= 0 and proba.max() <= 1):
        raise ValueError(f"{name}.predict_proba returned values outside [0, 1] or not finite.")
    return proba


def encode_multilabel(y) -> np.ndarray:
    """A 2-d indicator ``y`` of 0/1 (or booleans) as a bool array; refuses anything else."""
    values = np.asarray(y)
    if values.ndim != 2:
        raise ValueError(f"multilabel y must be 2-dimensional; got shape {values.shape}.")
    if values.dtype.kind == "b":
        return values.astype(bool)
    if values.dtype.kind not in "iuf" or (values.size and not np.isin(values, (0, 1)).all()):
        raise ValueError(
            "multilabel y must be an indicator matrix of 0 and 1 (or booleans); got "
            f"values {np.unique(values.ravel())[:5].tolist()}."
        )
    return values == 1


class SetLoss(BaseEstimator, metaclass=ABCMeta):
    """A loss of the prediction sets ``{k : p_k(x) > t}``, non-increasing as ``t`` falls.

    A loss object reads ``predict_proba`` (:meth:`estimator_outputs`), encodes the true
    labels as an indicator matrix (:meth:`encode_targets`, which records whether the
    task is multilabel), turns both into the summed loss curve over the candidate
    thresholds (:meth:`loss_curve`) and gives sets at a threshold (:meth:`predict_set`).

    Attributes
    ----------
    multilabel_ : bool
        Set by :meth:`encode_targets`: a 2-d indicator ``y`` (multilabel) or labels.
    n_labels_ : int
        Number of labels (columns of the sets).
    """

    @abstractmethod
    def bound(self) -> float:
        """``B``: the largest loss of one row (validated)."""

    @abstractmethod
    def loss_curve(self, outputs, targets, thresholds) -> LossCurve:
        """The summed loss curve over ``thresholds`` (least conservative first)."""

    def resolution(self, n_samples: int, n_labels: int) -> int:
        """``Q``, the units per ``B`` of the curve of ``n_samples`` rows and ``n_labels`` labels.

        A public function of public sizes: the estimators compute the release's
        certificate, and so its exact privacy spend, from it before reading any row.
        The default is :func:`~privconf_sklearn.mechanisms.max_resolution`.
        """
        return max_resolution(n_samples)

    def check_estimator(self, estimator) -> None:
        """Raise ``TypeError`` unless ``estimator`` has ``predict_proba``."""
        if not hasattr(estimator, "predict_proba"):
            raise TypeError(
                f"{type(estimator).__name__} has no predict_proba: risk control thresholds "
                "per-label probabilities."
            )

    def encode_targets(self, y, estimator) -> np.ndarray:
        """The true labels as a bool indicator matrix ``(n_samples, n_labels)``.

        A 2-d ``y`` is a multilabel indicator; a 1-d ``y`` holds labels from the
        estimator's ``classes_`` (one true label per row), and so does a column vector
        ``y`` for a single-output classifier (one-dimensional ``classes_``), with
        scikit-learn's ``DataConversionWarning``.
        """
        classes = getattr(estimator, "classes_", None)
        # one array of labels; multi-output models keep a list of arrays, one per output
        single_output = isinstance(classes, np.ndarray) and classes.ndim == 1
        if np.ndim(y) == 2 and not (single_output and np.shape(y)[1] == 1):
            targets = encode_multilabel(y)
            self.multilabel_ = True
        else:
            if not single_output:
                raise TypeError(
                    f"{type(estimator).__name__} has no one-dimensional classes_: give a "
                    "2-d indicator y for a multilabel classifier."
                )
            labels = np.asarray(classes)
            check_label_kinds(y, labels)
            columns = encode_labels(y, labels)
            targets = np.zeros((columns.shape[0], labels.shape[0]), dtype=bool)
            targets[np.arange(columns.shape[0]), columns] = True
            self.multilabel_ = False
        self.n_labels_ = targets.shape[1]
        return targets

    def estimator_outputs(self, estimator, X) -> np.ndarray:
        """Per-label probabilities :func:`label_probabilities` (after :meth:`encode_targets`)."""
        return label_probabilities(
            estimator, X, multilabel=self.multilabel_, n_labels=self.n_labels_
        )

    def predict_set(self, outputs, threshold, *, random_state=None) -> np.ndarray:
        """``{k : p_k(x) > threshold}`` (every label for ``threshold = -inf``)."""
        return np.asarray(outputs) > threshold

    def mean_loss(self, targets, sets) -> float:
        """Mean loss of the prediction sets ``sets`` for the true labels ``targets``.

        Both are bool matrices of shape ``(n_samples, n_labels)`` with at least one row.
        This default scores the sets through :meth:`loss_curve` (the sets as outputs 1
        and 0 at the one candidate 1/2): each row's loss is rounded up to a multiple of
        ``B / Q``, as in calibration. The built-in losses compute it exactly.
        """
        targets, sets = _check_indicators(targets, sets)
        curve = self.loss_curve(sets.astype(np.float64), targets, np.array([0.5]))
        return float(curve.sums[0]) * curve.loss_bound / (curve.resolution * curve.n_samples)

    def idealised_mean_loss(self, thresholds) -> np.ndarray | None:
        """A data-free guess of the mean loss at each threshold, for forecasts (or None).

        None leaves the forecast to the mechanism's default idealised curve.
        """
        return None


def _check_indicators(targets, sets) -> tuple[np.ndarray, np.ndarray]:
    """Bool matrices of the true labels and of the sets: same shape, at least one row."""
    checked = []
    for name, values in (("targets", targets), ("sets", sets)):
        values = np.asarray(values)
        if values.ndim != 2 or values.dtype.kind != "b":
            raise ValueError(
                f"{name} must be a 2-d bool matrix (n_samples, n_labels); got shape "
                f"{values.shape} and dtype {values.dtype}."
            )
        checked.append(values)
    if checked[0].shape != checked[1].shape or checked[0].shape[0] == 0:
        raise ValueError(
            f"targets and sets must have the same shape, with at least one row; got "
            f"{checked[0].shape} and {checked[1].shape}."
        )
    return checked[0], checked[1]


def _fnr_resolution(n_samples: int, n_labels: int) -> int:
    """``lcm(1, ..., K)`` when it fits (every rate exact), else the default resolution."""
    cap = max_resolution(n_samples)
    lcm = reduce(math.lcm, range(1, max(n_labels, 1) + 1), 1)
    return lcm if lcm <= cap else cap


class FalseNegativeRate(SetLoss):
    """``L(Y, C) = 1 - |Y ∩ C| / |Y|``: the share of true labels missed (0 if ``Y`` is empty).

    The loss of the multilabel example of Angelopoulos, Bates, Fisch, Lei and
    Schuster (2024), ``B = 1``; MAPIE's ``risk="recall"`` controls ``1 - recall``, the
    same loss (MAPIE refuses rows without true labels). With one true label per row it
    is the miscoverage ``1{y not in C}``. It is non-increasing as the threshold falls
    and 0 for the set of every label.

    The curve is exact: with ``K`` labels every rate is a multiple of
    ``1 / lcm(1, ..., K)``, the resolution used when it fits (``K <= 18`` up to about
    ``10^7`` rows); otherwise each row's rate is rounded up to the default resolution.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.scores import FalseNegativeRate
    >>> proba = np.array([[0.9, 0.4, 0.1]])
    >>> targets = np.array([[True, True, False]])
    >>> curve = FalseNegativeRate().loss_curve(proba, targets, np.array([0.5, 0.3, -np.inf]))
    >>> curve.sums / curve.resolution  # miss 1 of 2 true labels at 0.5, none below
    array([0.5, 0. , 0. ])
    """

    def __init__(self):
        pass

    def bound(self) -> float:
        """1."""
        return 1.0

    def resolution(self, n_samples: int, n_labels: int) -> int:
        """``lcm(1, ..., K)`` when it fits (every rate exact), else the default."""
        return _fnr_resolution(n_samples, n_labels)

    def idealised_mean_loss(self, thresholds) -> np.ndarray:
        """``clip(t, 0, 1)^2``: the FNR of a calibrated model with uniform probabilities.

        If every label's probability ``p`` is uniform on [0, 1] and the label is true
        with probability ``p`` (a calibrated model), the true labels' probabilities have
        density ``2p``, so a true label is missed at threshold ``t`` (``p <= t``) with
        probability ``t^2``, and so is the mean FNR.
        """
        return np.clip(np.asarray(thresholds, dtype=np.float64), 0.0, 1.0) ** 2

    def mean_loss(self, targets, sets) -> float:
        """The mean of ``1 - |Y ∩ C| / |Y|`` (0 for a row without true labels), exactly."""
        targets, sets = _check_indicators(targets, sets)
        true = np.count_nonzero(targets, axis=1)
        caught = np.count_nonzero(targets & sets, axis=1)
        return float(np.mean(np.where(true > 0, 1.0 - caught / np.maximum(true, 1), 0.0)))

    def loss_curve(self, outputs, targets, thresholds) -> LossCurve:
        """The exact curve: a true label with probability ``p`` is missed at ``t >= p``.

        Each true label is missed at the first ``c_label = #{j : t_j >= p}`` candidates,
        so ``S_j`` sums the units of the labels with ``c_label >= j``: one histogram
        over ``c_label``, reverse-cumulated. A row with ``c`` true labels gives each
        label ``Q / c`` units when ``c`` divides ``Q``; otherwise the ``s``-th most often
        missed label of the row carries ``ceil(Q s / c) - ceil(Q (s - 1) / c)`` units,
        so that the row's loss when ``r`` labels are missed is exactly ``ceil(Q r / c)``.
        """
        outputs = np.asarray(outputs, dtype=np.float64)
        targets = np.asarray(targets, dtype=bool)
        thresholds = np.asarray(thresholds, dtype=np.float64)
        n, k = targets.shape
        m = thresholds.shape[0]
        resolution = self.resolution(n, k)
        sizes = np.count_nonzero(targets, axis=1)
        if np.all(resolution % np.unique(np.maximum(sizes, 1)) == 0):
            rows, columns = np.nonzero(targets)
            missed_at = m - np.searchsorted(thresholds[::-1], outputs[rows, columns], side="left")
            histogram = np.bincount(missed_at, weights=resolution // sizes[rows], minlength=m + 1)
        else:
            histogram = _ranked_histogram(outputs, targets, thresholds, sizes, resolution)
        # S_j = units of the labels missed at j candidates or more (integers below 2^53:
        # exact in float64).
        sums = np.rint(np.cumsum(histogram[::-1])[::-1][1:]).astype(np.int64)
        return LossCurve(sums, n, resolution, 1.0)


def _ranked_histogram(outputs, targets, thresholds, sizes, resolution) -> np.ndarray:
    """Units per number of candidates missed at, with the rank weights of ceil(Q r / c)."""
    m, k = thresholds.shape[0], targets.shape[1]
    missed_at = np.where(targets, m - np.searchsorted(thresholds[::-1], outputs, side="left"), 0)
    missed_at = -np.sort(-missed_at, axis=1)  # per row, most often missed first
    weights = _rank_weights(k, resolution)
    histogram = np.zeros(m + 1)
    for rank in range(k):
        histogram += np.bincount(missed_at[:, rank], weights=weights[sizes, rank], minlength=m + 1)
    return histogram


def _rank_weights(n_labels: int, resolution: int) -> np.ndarray:
    """``w[c, s] = ceil(Q (s + 1) / c) - ceil(Q s / c)`` for ``s < c`` (0 otherwise)."""
    weights = np.zeros((n_labels + 1, max(n_labels, 1)))
    for size in range(1, n_labels + 1):
        steps = [-((-resolution * r) // size) for r in range(size + 1)]
        weights[size, :size] = np.diff(steps)
    return weights


class CallableLoss(SetLoss):
    """A user loss ``loss(y_true, y_set) -> (n_samples,)`` with its bound ``B``.

    ``y_true`` is the bool indicator matrix of the true labels (one-hot for a
    single-label task) and ``y_set`` the bool matrix of the sets, columns in
    ``classes_`` order. The guarantee assumes, for every possible row (calibration and
    test): the loss lies in ``[0, B]``, does not increase as the set grows, and is 0 for
    the set of every label. Losses outside ``[0, B]`` are an error; calibration rows
    whose loss grows with the set are replaced by their non-increasing envelope
    (conservative), and rows with a positive loss for the full set are reported to the
    data owner (:class:`~privconf_sklearn.mechanisms.LossAssumptionWarning`). Each loss
    is rounded up to a multiple of ``B / Q``, ``Q`` the default resolution
    (:class:`~privconf_sklearn.mechanisms.LossCurve`).

    Parameters
    ----------
    function : callable
        ``function(y_true, y_set)`` returning one loss per row.
    loss_bound : float
        ``B`` > 0.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.scores import CallableLoss
    >>> costs = np.array([1.0, 5.0])  # missing class 1 costs five times more
    >>> loss = CallableLoss(lambda y, s: (y & ~s) @ costs, loss_bound=5.0)
    >>> proba = np.array([[0.8, 0.2]]); targets = np.array([[False, True]])
    >>> curve = loss.loss_curve(proba, targets, np.array([0.5, -np.inf]))
    >>> curve.sums * curve.loss_bound / curve.resolution
    array([5., 0.])
    """

    _parameter_constraints = {
        "function": [callable],
        "loss_bound": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, function, loss_bound):
        self.function = function
        self.loss_bound = loss_bound

    def bound(self) -> float:
        """``B``, with ``function`` and ``loss_bound`` validated (a positive finite real)."""
        params = validate_params(
            self._parameter_constraints, self.get_params(deep=False), type(self).__name__
        )
        return params["loss_bound"]

    def loss_curve(self, outputs, targets, thresholds) -> LossCurve:
        """The curve, block of rows by block of rows (bounded memory)."""
        outputs = np.asarray(outputs, dtype=np.float64)
        targets = np.asarray(targets, dtype=bool)
        n, m = targets.shape[0], len(thresholds)
        bound = self.bound()
        resolution = self.resolution(n, targets.shape[1])
        curve = None
        for rows in gen_batches(n, max(1, _BLOCK_ENTRIES // m)):
            units = np.empty((rows.stop - rows.start, m), dtype=np.int64)
            for j, threshold in enumerate(np.asarray(thresholds, dtype=np.float64).tolist()):
                values = self._evaluate(targets[rows], outputs[rows] > threshold)
                units[:, j] = loss_units(values, bound, resolution)
            part = LossCurve.from_units(units, resolution, bound)
            curve = part if curve is None else curve + part
        assert curve is not None
        return curve

    def mean_loss(self, targets, sets) -> float:
        """The mean of ``function(targets, sets)``, exactly (each loss in ``[0, B]``)."""
        targets, sets = _check_indicators(targets, sets)
        values = self._evaluate(targets, sets)
        loss_units(values, self.bound(), 1)  # the range check of calibration
        return float(values.mean())

    def _evaluate(self, y_true: np.ndarray, y_set: np.ndarray) -> np.ndarray:
        values = np.asarray(self.function(y_true, y_set))
        if values.shape != (y_true.shape[0],) or values.dtype.kind not in "iuf":
            raise ValueError(
                f"loss(y_true, y_set) must return one real loss per row, shape "
                f"({y_true.shape[0]},); got shape {values.shape} and dtype {values.dtype}."
            )
        return values.astype(np.float64)
