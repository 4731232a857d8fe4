"""Without privacy, the released threshold is MAPIE's, bit for bit.

MAPIE 1.6's ``MultiLabelClassificationController(method="crc", risk="recall")`` on a
grid ``predict_params`` returns the largest threshold ``t`` such that every ``t' <= t``
has ``(n / (n + 1)) R_hat(t') + 1 / (n + 1) < alpha`` (``alpha = 1 - target_level``),
with sets ``{k : p_k > t}``. ``SplitCRC`` computes the same rule exactly. On many random
problems (continuous probabilities and probabilities on the grid itself, 1 to 12
labels, 10 to 300 rows, MAPIE's default grid and random ones; MAPIE computes its risks
in a Python loop over rows and thresholds, hence the small sizes) the thresholds are
equal. When no threshold qualifies MAPIE warns and returns the lowest threshold, which
does not control the risk; here the release is the set of every label (``-inf``),
flagged infeasible or uninformative.
"""

import warnings

import numpy as np
import pytest
from mapie.risk_control import MultiLabelClassificationController
from sklearn.base import BaseEstimator, ClassifierMixin

from privconf_sklearn import PrivateRiskControlClassifier
from privconf_sklearn.mechanisms import SplitCRC, UninformativeCalibrationWarning
from privconf_sklearn.risk_control import candidate_thresholds
from privconf_sklearn.scores import FalseNegativeRate


class TableClassifier(ClassifierMixin, BaseEstimator):
    """A fitted multilabel "model" whose per-label probabilities are a lookup table:
    row ``i`` of ``X`` (``X[i, 0] = i``) gets ``table[i]``."""

    def __init__(self, table=None):
        self.table = table

    def fit(self, X, y):
        self.fitted_ = True
        return self

    def predict_proba(self, X):
        return self.table[np.asarray(X)[:, 0].astype(int)]

    def predict(self, X):
        return self.predict_proba(X) > 0.5


def _problem(rng):
    n = int(rng.choice([10, 20, 50, 100, 300]))
    k = int(rng.integers(1, 13))
    if rng.integers(2):
        proba = rng.uniform(size=(n, k)) ** rng.uniform(0.3, 3)
    else:  # ties with the grid's own values
        proba = np.round(rng.uniform(size=(n, k)), 2)
    labels = rng.uniform(size=(n, k)) < np.clip(proba + rng.normal(0, 0.3, size=(n, k)), 0, 1)
    labels[np.arange(n), rng.integers(k, size=n)] = True  # MAPIE needs a label per row
    if rng.integers(2):
        grid = np.arange(0, 1, 0.01)
    else:
        grid = np.unique(np.round(rng.uniform(size=int(rng.integers(2, 60))), 3))
    return proba, labels.astype(int), grid, float(rng.uniform(0.5, 0.99))


def _mapie_threshold(proba, labels, grid, target_level):
    controller = MultiLabelClassificationController(
        predict_function=lambda rows: proba[rows],
        risk="recall",
        method="crc",
        target_level=target_level,
        predict_params=grid,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        controller.calibrate(np.arange(proba.shape[0]), labels)
    uncontrolled = any("cannot be controlled" in str(w.message) for w in caught)
    return float(controller.best_predict_param[0]), uncontrolled


@pytest.mark.slow
def test_split_crc_is_mapie_bit_for_bit():
    rng = np.random.default_rng(0)
    compared = uncontrolled_cases = 0
    for _ in range(80):
        proba, labels, grid, target_level = _problem(rng)
        mapie, uncontrolled = _mapie_threshold(proba, labels, grid, target_level)
        thresholds = candidate_thresholds(grid)
        curve = FalseNegativeRate().loss_curve(proba, labels.astype(bool), thresholds)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UninformativeCalibrationWarning)
            release = SplitCRC().calibrate_curve(curve, 1 - target_level)
        ours = thresholds[release.index]
        if uncontrolled:
            assert ours == -np.inf and not release.informative
            uncontrolled_cases += 1
        else:
            assert ours == mapie
            compared += 1
    assert compared >= 50 and uncontrolled_cases >= 3  # both cases were exercised


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2))
def test_estimator_with_split_crc_is_mapie(seed):
    """The estimator end to end: threshold_ and the sets equal MAPIE's."""
    rng = np.random.default_rng(100 + seed)
    n, k = 300, 6
    proba = rng.uniform(size=(n, k))
    labels = (rng.uniform(size=(n, k)) < proba).astype(int)
    labels[np.arange(n), np.argmax(proba, axis=1)] = 1
    mapie, uncontrolled = _mapie_threshold(proba, labels, np.arange(0, 1, 0.01), 0.9)
    assert not uncontrolled
    X = np.arange(n)[:, None]
    model = TableClassifier(proba).fit(X, labels)
    crc = PrivateRiskControlClassifier(model, mechanism=SplitCRC(), alpha=1 - 0.9)
    crc.fit_calibrate(X, labels)
    assert crc.threshold_ == mapie
    assert np.array_equal(crc.predict_set(X), proba > mapie)


def test_default_grid_is_mapies():
    grid = MultiLabelClassificationController(predict_function=None).predict_params
    assert np.array_equal(candidate_thresholds(None)[:-1], np.sort(grid)[::-1])
