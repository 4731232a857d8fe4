"""Bad input gets a clear error naming the parameter or values; nothing half-fitted stays."""

import numpy as np
import pytest
from diffprivlib.accountant import BudgetAccountant
from diffprivlib.utils import BudgetError
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC

from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn.mechanisms import ExponQ, SplitConformal


class FixedProbabilities(ClassifierMixin, BaseEstimator):
    """A 'fitted' classifier returning given probabilities (to inject bad outputs)."""

    def __init__(self, proba=None):
        self.proba = proba

    def fit(self, X, y):
        self.classes_ = np.array([0, 1, 2])
        self.n_features_in_ = 2
        return self

    def predict_proba(self, X):
        return np.asarray(self.proba)[: len(X)]

    def predict(self, X):
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]


@pytest.fixture
def xy():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = (X[:, 0] > 0).astype(int)
    return X, y


@pytest.fixture
def fitted(xy):
    X, y = xy
    return LogisticRegression().fit(X, y)


def _fitted_attributes(estimator):
    return sorted(k for k in vars(estimator) if k.endswith("_") and not k.startswith("_"))


def _assert_fails_atomically(estimator, X, y, error, match, **kwargs):
    before = _fitted_attributes(estimator)
    with pytest.raises(error, match=match):
        estimator.fit_calibrate(X, y, **kwargs)
    assert _fitted_attributes(estimator) == before


@pytest.mark.parametrize("alpha", [0, 1, -0.1, 1.5, np.nan, "0.1", True, None])
def test_alpha_outside_unit_interval(fitted, xy, alpha):
    pcc = PrivateConformalClassifier(fitted, mechanism=SplitConformal(), alpha=alpha)
    _assert_fails_atomically(pcc, *xy, ValueError, "alpha must be a real number in the open")


@pytest.mark.parametrize("epsilon", [0, -1.0, np.inf, np.nan, "1", None, True])
def test_epsilon_non_positive_or_non_finite(fitted, xy, epsilon):
    pcc = PrivateConformalClassifier(fitted, mechanism=ExponQ(epsilon=epsilon))
    _assert_fails_atomically(pcc, *xy, ValueError, "epsilon must be a finite real number > 0")


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"n_bins": 1}, "n_bins must be an integer >= 2"),
        ({"n_bins": 2.5}, "n_bins"),
        ({"n_bins": "many"}, "n_bins"),
        ({"gamma": 0.0}, "gamma must be a real number in the open"),
        ({"gamma": 1.0}, "gamma"),
        ({"monotone": "yes"}, "monotone must be a bool"),
    ],
)
def test_expon_q_parameters(fitted, xy, params, match):
    pcc = PrivateConformalClassifier(fitted, mechanism=ExponQ(epsilon=1.0, **params))
    _assert_fails_atomically(pcc, *xy, ValueError, match)


def test_labels_the_model_never_saw(fitted, xy):
    X, y = xy
    y_bad = y.copy().astype(object)
    y_bad[:3] = ["seven", 7, "seven"]
    pcc = PrivateConformalClassifier(fitted, mechanism=SplitConformal())
    _assert_fails_atomically(pcc, X, y_bad, ValueError, r"never|not fitted on: \['seven', 7\]")


def test_estimator_without_predict_proba(xy):
    X, y = xy
    svc = LinearSVC().fit(X, y)
    pcc = PrivateConformalClassifier(svc, mechanism=SplitConformal())
    _assert_fails_atomically(pcc, X, y, TypeError, "needs estimator.predict_proba.*LinearSVC")


def test_unfitted_estimator_with_prefit(xy):
    pcc = PrivateConformalClassifier(LogisticRegression(), mechanism=SplitConformal())
    _assert_fails_atomically(pcc, *xy, NotFittedError, "prefit=True but LogisticRegression")


@pytest.mark.parametrize(
    ("row", "match"),
    [
        ([np.nan, 0.5, 0.5], "NaN or infinite"),
        ([np.inf, 0.0, 0.0], "NaN or infinite"),
        ([-0.1, 0.6, 0.5], "negative probabilities"),
        ([0.5, 0.5, 0.5], "sum to 1"),
    ],
)
def test_bad_model_probabilities(row, match):
    proba = np.tile([0.2, 0.3, 0.5], (50, 1))
    proba[7] = row
    model = FixedProbabilities(proba).fit(None, None)
    X, y = np.zeros((50, 2)), np.zeros(50, dtype=int)
    pcc = PrivateConformalClassifier(model, mechanism=SplitConformal())
    _assert_fails_atomically(pcc, X, y, ValueError, match)
    good = FixedProbabilities(np.tile([0.2, 0.3, 0.5], (50, 1))).fit(None, None)
    pcc.set_params(estimator=good).fit_calibrate(X, y)
    pcc.set_params(estimator=model)
    pcc.estimator_ = model
    with pytest.raises(ValueError, match=match):
        pcc.predict_set(X)


def test_wrong_number_of_probability_columns():
    model = FixedProbabilities(np.tile([0.5, 0.5], (10, 1))).fit(None, None)
    pcc = PrivateConformalClassifier(model, mechanism=SplitConformal())
    _assert_fails_atomically(
        pcc, np.zeros((10, 2)), np.zeros(10, dtype=int), ValueError, r"shape \(10, 2\)"
    )


def test_mismatched_lengths_and_empty_set(fitted, xy):
    X, y = xy
    pcc = PrivateConformalClassifier(fitted, mechanism=SplitConformal())
    _assert_fails_atomically(pcc, X, y[:-1], ValueError, "X has 300 rows but y has 299")
    _assert_fails_atomically(pcc, X[:0], y[:0], ValueError, "calibration set is empty")
    with pytest.raises(ValueError, match="y to be passed"):
        pcc.fit_calibrate(X, None)


def test_other_parameters(fitted, xy):
    X, y = xy
    cases = [
        (dict(conformity_score="hinge"), ValueError, "conformity_score='hinge' is not a known"),
        (dict(conformity_score=3), TypeError, "conformity_score must be"),
        (dict(mechanism="exponq"), TypeError, "mechanism must be a QuantileMechanism"),
        (dict(accountant="budget"), TypeError, "accountant must be a diffprivlib"),
        (dict(random_state=-1), ValueError, "random_state must be a non-negative"),
        (dict(random_state="seed"), ValueError, "random_state must be None"),
    ]
    for params, error, match in cases:
        params = {"mechanism": ExponQ(epsilon=1.0), **params}
        pcc = PrivateConformalClassifier(fitted, **params)
        _assert_fails_atomically(pcc, X, y, error, match)
    pcc = PrivateConformalClassifier(fitted, mechanism=ExponQ(epsilon=1.0))
    _assert_fails_atomically(pcc, X, y, ValueError, "takes no groups", groups=np.zeros(300))


@pytest.mark.parametrize("size", [0, 0.0, 1.0, -2, "half", True])
def test_calibration_size(xy, size):
    pcc = PrivateConformalClassifier(
        LogisticRegression(), mechanism=SplitConformal(), prefit=False, calibration_size=size
    )
    with pytest.raises(ValueError, match="calibration_size must be"):
        pcc.fit(*xy)
    assert _fitted_attributes(pcc) == []


def test_fit_params_with_prefit(fitted, xy):
    pcc = PrivateConformalClassifier(fitted, mechanism=SplitConformal())
    with pytest.raises(ValueError, match="prefit=True"):
        pcc.fit(*xy, sample_weight=np.ones(300))


def test_failed_refit_keeps_previous_calibration(fitted, xy):
    X, y = xy
    pcc = PrivateConformalClassifier(fitted, mechanism=ExponQ(epsilon=1.0), random_state=0)
    pcc.fit_calibrate(X, y)
    calibration, threshold = pcc.calibration_, pcc.threshold_
    pcc.set_params(alpha=2.0)
    with pytest.raises(ValueError, match="alpha"):
        pcc.fit_calibrate(X, y)
    assert pcc.calibration_ is calibration and pcc.threshold_ == threshold


def test_budget_exceeded_spends_nothing_and_fits_nothing(fitted, xy):
    accountant = BudgetAccountant(epsilon=0.5)
    pcc = PrivateConformalClassifier(fitted, mechanism=ExponQ(epsilon=1.0), accountant=accountant)
    _assert_fails_atomically(pcc, *xy, BudgetError, "not permissible")
    assert accountant.spent_budget == []


def test_predict_before_fit(fitted, xy):
    pcc = PrivateConformalClassifier(fitted, mechanism=SplitConformal())
    for method in ("predict_set", "predict", "predict_proba"):
        with pytest.raises(NotFittedError):
            getattr(pcc, method)(xy[0])
