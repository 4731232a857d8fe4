"""Every warning of the package points at the user's line, whatever the path to it.

The warning's file must be the caller's (this test file), not a module of the package,
of scikit-learn or of joblib: through ``fit_calibrate``, ``fit``, a mechanism's own
``calibrate``, Mondrian calibration, ``predict_set``, the regressor's score bounds, a
card's owner diagnostics, and a ``Pipeline`` or ``GridSearchCV`` that fits the estimator.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from privconf_sklearn import (
    InfeasibleCalibrationWarning,
    PrivacyLeakWarning,
    PrivateConformalClassifier,
    PrivateConformalRegressor,
    ScoreBoundsWarning,
    UninformativeCalibrationWarning,
)
from privconf_sklearn.cards import OwnerDiagnosticsWarning
from privconf_sklearn.mechanisms import ExponQ, SplitConformal
from privconf_sklearn.metrics import set_coverage_scorer
from privconf_sklearn.mondrian import UnseenGroupWarning

RNG = np.random.default_rng(0)
X = RNG.normal(size=(400, 3))
Y = (X[:, 0] + RNG.normal(size=400) > 0).astype(int)
TARGET = X[:, 1] + RNG.normal(size=400)
CLASSIFIER = LogisticRegression().fit(X[:200], Y[:200])
REGRESSOR = LinearRegression().fit(X[:200], TARGET[:200])


def _infeasible():
    return PrivateConformalClassifier(CLASSIFIER, mechanism=ExponQ(epsilon=0.1), alpha=0.1)


def _group_of_row(X):
    return np.where(np.asarray(X)[:, 0] > 0, "a", "b")


def _card_with_owner_diagnostics():
    estimator = PrivateConformalRegressor(
        REGRESSOR, mechanism=SplitConformal(), alpha=0.1, score_bounds=(0.0, 10.0)
    ).fit_calibrate(X[200:], TARGET[200:])
    return estimator.card_


CARD = _card_with_owner_diagnostics()


def _unseen_group_prediction():
    estimator = PrivateConformalClassifier(
        CLASSIFIER,
        mechanism=SplitConformal(),
        alpha=0.1,
        mondrian=_group_of_row,
        group_sizes="public",
    ).fit_calibrate(X[200:][X[200:, 0] > 0], Y[200:][X[200:, 0] > 0])
    return lambda: estimator.predict_set(X[:50])


PREDICT_UNSEEN = _unseen_group_prediction()

CASES = {
    "fit_calibrate": (
        InfeasibleCalibrationWarning,
        lambda: _infeasible().fit_calibrate(X[200:220], Y[200:220]),
    ),
    "fit, prefit=False": (
        InfeasibleCalibrationWarning,
        lambda: PrivateConformalClassifier(
            LogisticRegression(), mechanism=ExponQ(epsilon=0.1), prefit=False
        ).fit(X[:40], Y[:40]),
    ),
    "mechanism.calibrate": (
        InfeasibleCalibrationWarning,
        lambda: ExponQ(epsilon=0.1).calibrate(np.linspace(0.0, 1.0, 20), 0.1),
    ),
    "Mondrian groups": (
        UninformativeCalibrationWarning,
        lambda: PrivateConformalClassifier(
            CLASSIFIER,
            mechanism=ExponQ(epsilon=0.1),  # about 30 rows per group: unreachable
            mondrian="class",
            group_sizes="public",
        ).fit_calibrate(X[200:260], Y[200:260]),
    ),
    "predict_set of an unseen group": (UnseenGroupWarning, PREDICT_UNSEEN),
    "score_bounds=None": (
        PrivacyLeakWarning,
        lambda: PrivateConformalRegressor(
            REGRESSOR, mechanism=SplitConformal()
        ).fit_calibrate(X[200:], TARGET[200:]),
    ),
    "scores clipped to score_bounds": (
        ScoreBoundsWarning,
        lambda: PrivateConformalRegressor(
            REGRESSOR, mechanism=SplitConformal(), score_bounds=(0.0, 1.0)
        ).fit_calibrate(X[200:], TARGET[200:]),
    ),
    "card owner diagnostics": (
        OwnerDiagnosticsWarning,
        lambda: CARD.to_dict(include_owner_diagnostics=True),
    ),
    "Pipeline.fit": (
        InfeasibleCalibrationWarning,
        lambda: make_pipeline(
            StandardScaler(),
            PrivateConformalClassifier(
                LogisticRegression(), mechanism=ExponQ(epsilon=0.1), prefit=False
            ),
        ).fit(X[:40], Y[:40]),
    ),
    "GridSearchCV.fit": (
        InfeasibleCalibrationWarning,
        lambda: GridSearchCV(
            _infeasible(), {"alpha": [0.1]}, cv=2, scoring=set_coverage_scorer
        ).fit(X[200:240], Y[200:240]),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_warning_points_at_the_callers_file(case):
    category, call = CASES[case]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    ours = [w for w in caught if issubclass(w.category, category)]
    assert ours, f"{case}: no {category.__name__}; got {[str(w.message) for w in caught]}"
    assert {w.filename for w in ours} == {__file__}, [(w.filename, w.lineno) for w in ours]
