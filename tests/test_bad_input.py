"""Bad input gets a clear error naming the parameter or values; nothing half-fitted stays."""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.svm import LinearSVC

from privconf_sklearn import PrivateConformalClassifier, PrivateConformalRegressor
from privconf_sklearn.mechanisms import ExponQ, FedCP2QQ, SplitConformal
from privconf_sklearn.mondrian import PrivateGroupSizes


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


@pytest.mark.parametrize("alpha", [0, 1, -0.1, 1.5, np.nan, np.inf])
def test_alpha_outside_unit_interval(fitted, xy, alpha):
    pcc = PrivateConformalClassifier(fitted, mechanism=SplitConformal(), alpha=alpha)
    _assert_fails_atomically(
        pcc, *xy, ValueError, r"alpha must be a finite real number in \(0, 1\)"
    )


@pytest.mark.parametrize("alpha", ["0.1", True, None, [0.1]])
def test_alpha_of_the_wrong_type(fitted, xy, alpha):
    pcc = PrivateConformalClassifier(fitted, mechanism=SplitConformal(), alpha=alpha)
    _assert_fails_atomically(pcc, *xy, TypeError, "PrivateConformalClassifier: alpha must be")


@pytest.mark.parametrize("epsilon", [0, -1.0, np.inf, np.nan, "1", None, True])
def test_epsilon_non_positive_or_non_finite(fitted, xy, epsilon):
    # Which of TypeError / ValueError is the mechanism's own constraints table's call.
    pcc = PrivateConformalClassifier(fitted, mechanism=ExponQ(epsilon=epsilon))
    _assert_fails_atomically(pcc, *xy, (TypeError, ValueError), "epsilon")


@pytest.mark.parametrize(
    "params", [{"n_bins": 1}, {"n_bins": 2.5}, {"n_bins": "many"}, {"gamma": 0.0}, {"gamma": 1.0}]
)
def test_expon_q_parameters(fitted, xy, params):
    pcc = PrivateConformalClassifier(fitted, mechanism=ExponQ(epsilon=1.0, **params))
    _assert_fails_atomically(pcc, *xy, (TypeError, ValueError), next(iter(params)))


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


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        (dict(conformity_score="hinge"), ValueError, "conformity_score must be one of 'lac'"),
        (dict(conformity_score="LAC"), ValueError, "conformity_score must be one of 'lac'"),
        (dict(conformity_score=3), TypeError, "conformity_score must be"),
        (dict(mechanism="exponq"), TypeError, "mechanism must be a QuantileMechanism"),
        (dict(accountant="budget"), TypeError, "accountant must be None or a privacy ledger"),
        (dict(random_state=-1), ValueError, "random_state must be"),
        (dict(random_state="seed"), TypeError, "random_state must be"),
        (dict(random_state=1.5), TypeError, "random_state must be"),
        (dict(prefit="no"), TypeError, "prefit must be a bool"),
        (dict(prefit=1), TypeError, "prefit must be a bool"),
        (dict(adjacency="replace one"), ValueError, "adjacency must be one of 'replace-one'"),
        (dict(adjacency=None), TypeError, "adjacency must be one of"),
        (dict(mondrian="label"), ValueError, "mondrian must be None or one of 'class'"),
        (dict(mondrian=3), TypeError, "mondrian must be"),
        (dict(mondrian="class"), ValueError, "needs group_sizes: 'public'"),
        (dict(group_sizes="public"), ValueError, "group_sizes='public' is only used with"),
        (dict(mondrian="class", group_sizes="private"), ValueError, "group_sizes must be"),
        (dict(mondrian="class", group_sizes=0.1), TypeError, "group_sizes must be"),
        (
            dict(mondrian="class", group_sizes=PrivateGroupSizes(epsilon=0.0)),
            ValueError,
            "PrivateGroupSizes: epsilon must be",
        ),
        (
            dict(mondrian="class", group_sizes=PrivateGroupSizes(epsilon=1.0, beta=1.0)),
            ValueError,
            "PrivateGroupSizes: beta must be",
        ),
        (
            dict(mondrian="class", group_sizes=PrivateGroupSizes(1.0, group_ids=[0, 1])),
            ValueError,
            "must be None",
        ),
        (
            dict(mondrian=lambda X: X[:, 0] > 0, group_sizes=PrivateGroupSizes(1.0)),
            ValueError,
            "needs the public list of group ids",
        ),
        (
            dict(mondrian="class", group_sizes="public", mechanism=FedCP2QQ(epsilon=1.0)),
            ValueError,
            "central mechanism",
        ),
    ],
)
def test_other_parameters(fitted, xy, params, error, match):
    params = {"mechanism": ExponQ(epsilon=1.0), **params}
    pcc = PrivateConformalClassifier(fitted, **params)
    _assert_fails_atomically(pcc, *xy, error, match)


def test_agent_groups_with_a_central_mechanism(fitted, xy):
    X, y = xy
    pcc = PrivateConformalClassifier(fitted, mechanism=ExponQ(epsilon=1.0))
    _assert_fails_atomically(pcc, X, y, ValueError, "takes no groups", groups=np.zeros(300))


def test_bool_labels_are_not_matched_to_integer_classes(fitted, xy):
    X, y = xy
    pcc = PrivateConformalClassifier(fitted, mechanism=SplitConformal())
    _assert_fails_atomically(pcc, X, y.astype(bool), TypeError, "boolean labels")
    _assert_fails_atomically(
        pcc, X, np.array([True, 1] * 150, dtype=object), TypeError, "boolean labels"
    )
    on_bools = LogisticRegression().fit(X, y.astype(bool))
    pcc = PrivateConformalClassifier(on_bools, mechanism=SplitConformal())
    _assert_fails_atomically(pcc, X, y, TypeError, "classes_ are booleans")
    pcc.fit_calibrate(X, y.astype(bool))  # booleans against boolean classes are fine
    assert pcc.classes_.dtype == bool


def test_estimator_of_the_wrong_kind(fitted, xy):
    X, y = xy
    pcr = PrivateConformalRegressor(fitted, mechanism=SplitConformal(), score_bounds=(0, 1))
    _assert_fails_atomically(pcr, X, y.astype(float), TypeError, "must be a regressor")
    pcr.set_params(prefit=False, estimator=LogisticRegression())
    with pytest.raises(TypeError, match="must be a regressor"):
        pcr.fit(X, y.astype(float))
    assert _fitted_attributes(pcr) == []
    regressor = LinearRegression().fit(X, y)
    pcc = PrivateConformalClassifier(regressor, mechanism=SplitConformal())
    _assert_fails_atomically(pcc, X, y, TypeError, "must be a classifier")


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


def test_budget_exceeded_spends_nothing_and_fits_nothing(fitted, xy, dp):
    accountant = dp.accountant.BudgetAccountant(epsilon=0.5)
    pcc = PrivateConformalClassifier(fitted, mechanism=ExponQ(epsilon=1.0), accountant=accountant)
    _assert_fails_atomically(pcc, *xy, dp.utils.BudgetError, "not permissible")
    assert accountant.spent_budget == []


def test_predict_before_fit(fitted, xy):
    pcc = PrivateConformalClassifier(fitted, mechanism=SplitConformal())
    for method in ("predict_set", "predict", "predict_proba"):
        with pytest.raises(NotFittedError):
            getattr(pcc, method)(xy[0])


@pytest.mark.parametrize(
    ("n_samples", "error"),
    [(2.5, TypeError), ("100", TypeError), (True, TypeError), (0, ValueError), (10**8, ValueError)],
)
def test_dataset_sizes(n_samples, error):
    from privconf_sklearn.datasets import make_poisson_outliers, make_two_gaussians

    for make in (make_two_gaussians, make_poisson_outliers):
        with pytest.raises(error, match="n_samples must be an integer in"):
            make(n_samples)


def test_metrics_reject_non_boolean_sets():
    from privconf_sklearn.metrics import mean_set_size, set_coverage

    with pytest.raises(TypeError, match="sets must be a boolean array"):
        mean_set_size(np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"shape \(n_samples, n_classes\)"):
        set_coverage([0, 1], np.ones(2, dtype=bool), [0, 1])
