"""Bad input gets a clear error naming the parameter or values; nothing half-fitted stays."""

import re

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.svm import LinearSVC
from sklearn.utils._param_validation import InvalidParameterError

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


ALPHA = (
    r"The 'alpha' parameter of PrivateConformalClassifier must be a float in the range "
    r"\(0\.0, 1\.0\)\. Got .+ instead\."
)


@pytest.mark.parametrize("alpha", [0, 1, -0.1, 1.5, np.nan, np.inf, 10**400])
def test_alpha_outside_unit_interval(fitted, xy, alpha):
    pcc = PrivateConformalClassifier(fitted, mechanism=SplitConformal(), alpha=alpha)
    _assert_fails_atomically(pcc, *xy, InvalidParameterError, ALPHA)


@pytest.mark.parametrize("alpha", ["0.1", True, np.True_, None, [0.1]])
def test_alpha_of_the_wrong_type(fitted, xy, alpha):
    """Bools are not numbers (scikit-learn's own Interval(Real, ...) would take True)."""
    pcc = PrivateConformalClassifier(fitted, mechanism=SplitConformal(), alpha=alpha)
    _assert_fails_atomically(pcc, *xy, InvalidParameterError, ALPHA)


def test_parameter_errors_are_scikit_learns(fitted, xy):
    """One error class for a wrong type and a wrong value: scikit-learn's, both a
    ValueError and a TypeError, naming the parameter, the accepted forms and the value."""
    for alpha in ("0.1", 1.5):
        pcc = PrivateConformalClassifier(fitted, mechanism=SplitConformal(), alpha=alpha)
        with pytest.raises(InvalidParameterError) as info:
            pcc.fit_calibrate(*xy)
        assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)
        assert str(info.value) == (
            "The 'alpha' parameter of PrivateConformalClassifier must be a float in the "
            f"range (0.0, 1.0). Got {alpha!r} instead."
        )


@pytest.mark.parametrize("epsilon", [0, -1.0, np.inf, np.nan, "1", None, True, 10**400])
def test_epsilon_non_positive_or_non_finite(fitted, xy, epsilon):
    pcc = PrivateConformalClassifier(fitted, mechanism=ExponQ(epsilon=epsilon))
    _assert_fails_atomically(
        pcc,
        *xy,
        InvalidParameterError,
        r"The 'epsilon' parameter of ExponQ must be a float in the range \(0\.0, inf\)\. Got",
    )


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"n_bins": 1}, "a str among {'auto'} or an int in the range [2, 1000000]"),
        ({"n_bins": 2.5}, "a str among {'auto'} or an int in the range [2, 1000000]"),
        ({"n_bins": True}, "a str among {'auto'} or an int in the range [2, 1000000]"),
        ({"n_bins": "many"}, "a str among {'auto'} or an int in the range [2, 1000000]"),
        ({"gamma": 0.0}, "a str among {'auto'} or a float in the range (0.0, 1.0)"),
        ({"gamma": 1.0}, "a str among {'auto'} or a float in the range (0.0, 1.0)"),
    ],
)
def test_expon_q_parameters(fitted, xy, params, expected):
    ((name, value),) = params.items()
    pcc = PrivateConformalClassifier(fitted, mechanism=ExponQ(epsilon=1.0, **params))
    message = f"The '{name}' parameter of ExponQ must be {expected}. Got {value!r} instead."
    _assert_fails_atomically(pcc, *xy, InvalidParameterError, re.escape(message))


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


def _names(parameter):
    return f"The '{parameter}' parameter of PrivateConformalClassifier must be"


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        (dict(conformity_score="hinge"), InvalidParameterError, _names("conformity_score")),
        (dict(conformity_score="LAC"), InvalidParameterError, _names("conformity_score")),
        (dict(conformity_score=3), InvalidParameterError, _names("conformity_score")),
        (
            dict(mechanism="exponq"),
            InvalidParameterError,
            _names("mechanism") + r" an instance of '.*QuantileMechanism'",
        ),
        (
            dict(accountant="budget"),
            InvalidParameterError,
            _names("accountant") + " None or an object implementing 'check' and 'spend'",
        ),
        (dict(random_state=-1), InvalidParameterError, _names("random_state")),
        (dict(random_state="seed"), InvalidParameterError, _names("random_state")),
        (dict(random_state=1.5), InvalidParameterError, _names("random_state")),
        (dict(random_state=True), InvalidParameterError, _names("random_state")),
        (
            dict(prefit="no"),
            InvalidParameterError,
            _names("prefit") + " an instance of 'bool' or an instance of 'numpy.bool",
        ),
        (dict(prefit=1), InvalidParameterError, _names("prefit")),
        (
            dict(adjacency="replace one"),
            InvalidParameterError,
            _names("adjacency") + " a str among",
        ),
        (dict(adjacency=None), InvalidParameterError, _names("adjacency") + " a str among"),
        (
            dict(mondrian="label"),
            InvalidParameterError,
            _names("mondrian") + r" None, a str among \{'class'\} or a callable",
        ),
        (dict(mondrian=3), InvalidParameterError, _names("mondrian")),
        (dict(mondrian="class"), ValueError, "needs group_sizes: 'public'"),
        (dict(group_sizes="public"), ValueError, "group_sizes='public' is only used with"),
        (
            dict(mondrian="class", group_sizes="private"),
            InvalidParameterError,
            _names("group_sizes"),
        ),
        (dict(mondrian="class", group_sizes=0.1), InvalidParameterError, _names("group_sizes")),
        (
            dict(mondrian="class", group_sizes=PrivateGroupSizes(epsilon=0.0)),
            InvalidParameterError,
            "The 'epsilon' parameter of PrivateGroupSizes must be",
        ),
        (
            dict(mondrian="class", group_sizes=PrivateGroupSizes(epsilon=1.0, beta=1.0)),
            InvalidParameterError,
            "The 'beta' parameter of PrivateGroupSizes must be",
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


@pytest.mark.parametrize("n_samples", [2.5, "100", True, 0, 10**8])
def test_dataset_sizes(n_samples):
    from privconf_sklearn.datasets import make_poisson_outliers, make_two_gaussians

    for make, low in ((make_two_gaussians, 2), (make_poisson_outliers, 1)):
        expected = (
            f"The 'n_samples' parameter of {make.__name__} must be an int in the range "
            f"[{low}, 10000000]. Got {n_samples!r} instead."
        )
        with pytest.raises(InvalidParameterError, match=re.escape(expected)):
            make(n_samples)


def test_metrics_reject_non_boolean_sets():
    from privconf_sklearn.metrics import mean_set_size, set_coverage

    with pytest.raises(TypeError, match="sets must be a boolean array"):
        mean_set_size(np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"shape \(n_samples, n_classes\)"):
        set_coverage([0, 1], np.ones(2, dtype=bool), [0, 1])
