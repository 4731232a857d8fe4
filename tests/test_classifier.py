"""PrivateConformalClassifier in the scikit-learn ecosystem."""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from privconf_sklearn import InfeasibleCalibrationWarning, PrivateConformalClassifier
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.mechanisms import ExponQ, SplitConformal
from privconf_sklearn.metrics import (
    mean_set_size,
    neg_mean_set_size_scorer,
    set_coverage,
    set_coverage_scorer,
    singleton_rate,
)
from privconf_sklearn.mondrian import PrivateGroupSizes
from privconf_sklearn.scores import APS, LAC

from ._checks import CountingExponQ, assert_private_path_ran, sign_of_first_feature
from ._coverage import covered_count_lower_limit
from ._environment import DP_LOGISTIC_BROKEN, DP_LOGISTIC_REASON

# The checks' data sets are small (a few dozen calibration rows): the private instances
# use alpha = 0.2 and epsilon = 10, at which ExponQ's level is reachable, so the private
# path runs (asserted by the fixture below); unreachable cases still warn.
COMMON_CHECK_ESTIMATORS = [
    PrivateConformalClassifier(
        LogisticRegression(), mechanism=SplitConformal(), prefit=False, random_state=0
    ),
    PrivateConformalClassifier(
        LogisticRegression(),
        mechanism=CountingExponQ(epsilon=10.0),
        alpha=0.2,
        prefit=False,
        random_state=0,
    ),
    PrivateConformalClassifier(
        GaussianNB(),
        mechanism=CountingExponQ(epsilon=10.0),
        alpha=0.2,
        conformity_score="aps",
        prefit=False,
        random_state=0,
    ),
    PrivateConformalClassifier(
        LogisticRegression(),
        mechanism=CountingExponQ(epsilon=10.0),
        alpha=0.2,
        mondrian="class",
        group_sizes="public",
        prefit=False,
        random_state=0,
    ),
    PrivateConformalClassifier(
        LogisticRegression(),
        mechanism=SplitConformal(),
        mondrian=sign_of_first_feature,
        group_sizes=PrivateGroupSizes(epsilon=5.0, group_ids=[False, True]),
        prefit=False,
        random_state=0,
    ),
]

#: A common check that trains an ExponQ estimator on enough rows for a private,
#: informative release: the checks must exercise the private path.
PRIVATE_PATH = (COMMON_CHECK_ESTIMATORS[1], "check_classifiers_train")


@parametrize_with_checks(COMMON_CHECK_ESTIMATORS)
def test_sklearn_common_checks(estimator, check):
    """All scikit-learn common checks pass; none is declared as an expected failure."""
    CountingExponQ.releases = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InfeasibleCalibrationWarning)
        warnings.filterwarnings("ignore", message="Mondrian calibration", category=UserWarning)
        check(estimator)
    assert_private_path_ran(estimator, check, PRIVATE_PATH)


def test_common_check_sizes_reach_the_private_level():
    """The calibration sizes of check_classifiers_train (300 rows, 30% calibrate) are
    enough for the configured ExponQ: a feasible certificate from public quantities."""
    mechanism = COMMON_CHECK_ESTIMATORS[1].mechanism
    assert mechanism.coverage_certificate(90, 0.2).feasible


@pytest.fixture(scope="module")
def data():
    X, y = make_two_gaussians(6000, random_state=0)
    return X[:3000], y[:3000], X[3000:5000], y[3000:5000], X[5000:], y[5000:]


@pytest.fixture(scope="module")
def model(data):
    X_train, y_train, *_ = data
    return LogisticRegression().fit(X_train, y_train)


@pytest.mark.parametrize("score", [LAC(), APS(), APS(randomized=True)])
def test_sets_are_score_below_threshold(data, model, score):
    _, _, X_cal, y_cal, X_test, _ = data
    pcc = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=1.0), conformity_score=score, random_state=0
    ).fit_calibrate(X_cal, y_cal)
    sets = pcc.predict_set(X_test)
    assert sets.shape == (X_test.shape[0], 2) and sets.dtype == bool
    proba = model.predict_proba(X_test)
    scores = np.column_stack(
        [
            pcc.score_.conformity_scores(proba, np.full(len(X_test), j), random_state=0)
            for j in range(2)
        ]
    )
    assert np.array_equal(sets, scores <= pcc.threshold_)


def test_string_labels_and_column_order():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 3))
    names = np.array(["eel", "cat", "dog"])
    y = names[np.argmax(X + rng.normal(scale=0.5, size=X.shape), axis=1)]
    model = LogisticRegression().fit(X[:1000], y[:1000])
    pcc = PrivateConformalClassifier(model, mechanism=SplitConformal()).fit_calibrate(
        X[1000:2000], y[1000:2000]
    )
    assert list(pcc.classes_) == ["cat", "dog", "eel"]
    sets = pcc.predict_set(X[2000:])
    proba = model.predict_proba(X[2000:])
    assert np.array_equal(sets, 1 - proba <= pcc.threshold_)
    covered = round(set_coverage(y[2000:], sets, pcc.classes_) * len(sets))
    assert covered >= covered_count_lower_limit(pcc, X[1000:2000], y[1000:2000], len(sets))
    assert set(pcc.predict(X[2000:2005])) <= set(names)


def test_dataframe_passes_through_untouched(data):
    X_train, y_train, X_cal, y_cal, X_test, _ = data
    columns = [f"f{i}" for i in range(X_train.shape[1])]
    model = LogisticRegression().fit(pd.DataFrame(X_train, columns=columns), y_train)
    pcc = PrivateConformalClassifier(model, mechanism=ExponQ(epsilon=1.0), random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "X does not have valid feature names"
        pcc.fit_calibrate(pd.DataFrame(X_cal, columns=columns), pd.Series(y_cal))
        sets = pcc.predict_set(pd.DataFrame(X_test, columns=columns), batch_size=333)
    assert list(pcc.feature_names_in_) == columns
    assert pcc.n_features_in_ == 8
    assert sets.shape == (X_test.shape[0], 2)


def test_batch_size_gives_identical_sets(data, model):
    _, _, X_cal, y_cal, X_test, _ = data
    pcc = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=1.0), conformity_score="aps", random_state=0
    ).fit_calibrate(X_cal, y_cal)
    full = pcc.predict_set(X_test)
    for batch_size in (1, 7, 999, 10**6):
        assert np.array_equal(pcc.predict_set(X_test, batch_size=batch_size), full)
    expected = (
        r"The 'batch_size' parameter of PrivateConformalClassifier\.predict_set must be None "
        r"or an int in the range \[1, inf\)\. Got .+ instead\."
    )
    for bad in (0, -3, 2.5, True, np.True_):
        with pytest.raises(InvalidParameterError, match=expected):
            pcc.predict_set(X_test, batch_size=bad)


def test_estimator_is_a_pipeline(data):
    X_train, y_train, X_cal, y_cal, X_test, y_test = data
    pipe = make_pipeline(StandardScaler(), LogisticRegression()).fit(X_train, y_train)
    pcc = PrivateConformalClassifier(pipe, mechanism=ExponQ(epsilon=1.0), random_state=0)
    sets = pcc.fit_calibrate(X_cal, y_cal).predict_set(X_test)
    np.testing.assert_array_equal(sets, 1 - pipe.predict_proba(X_test) <= pcc.threshold_)
    covered = round(set_coverage(y_test, sets, pcc.classes_) * len(sets))
    assert covered >= covered_count_lower_limit(pcc, X_cal, y_cal, len(sets))
    unfitted = PrivateConformalClassifier(
        make_pipeline(StandardScaler(), LogisticRegression()),
        mechanism=ExponQ(epsilon=1.0),
        prefit=False,
        random_state=0,
    ).fit(np.vstack([X_train, X_cal]), np.r_[y_train, y_cal])
    assert unfitted.predict_set(X_test).shape == (len(X_test), 2)


def test_in_a_pipeline_as_last_step(data):
    X_train, y_train, X_cal, y_cal, X_test, _ = data
    pipe = make_pipeline(
        StandardScaler(),
        PrivateConformalClassifier(
            LogisticRegression(), mechanism=ExponQ(epsilon=1.0), prefit=False, random_state=0
        ),
    ).fit(np.vstack([X_train, X_cal]), np.r_[y_train, y_cal])
    sets = pipe[-1].predict_set(pipe[:-1].transform(X_test))
    assert sets.shape == (len(X_test), 2)
    assert pipe.predict(X_test).shape == (len(X_test),)


@pytest.mark.parametrize("prefit", [True, False])
def test_grid_search_over_epsilon_and_alpha(data, model, prefit):
    _, _, X_cal, y_cal, _, _ = data
    estimator = model if prefit else LogisticRegression()
    search = GridSearchCV(
        PrivateConformalClassifier(
            estimator, mechanism=ExponQ(epsilon=1.0), prefit=prefit, random_state=0
        ),
        {"mechanism__epsilon": [0.5, 2.0], "alpha": [0.05, 0.2]},
        scoring={"size": neg_mean_set_size_scorer, "coverage": set_coverage_scorer},
        refit="size",
        cv=3,
    ).fit(X_cal, y_cal)
    # Smaller sets come with the larger alpha and the larger budget.
    assert search.best_params_ == {"alpha": 0.2, "mechanism__epsilon": 2.0}
    assert search.best_estimator_.calibration_.privacy.epsilon == 2.0
    if prefit:
        assert search.best_estimator_.estimator_ is model


def test_clone_keeps_prefit_estimator_and_accountant(model, dp):
    accountant = dp.accountant.BudgetAccountant()
    pcc = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=1.0), accountant=accountant, alpha=0.2
    )
    cloned = clone(pcc)
    assert cloned.estimator is model and cloned.accountant is accountant
    assert cloned.mechanism is not pcc.mechanism and cloned.mechanism.epsilon == 1.0
    refit = clone(pcc.set_params(prefit=False))
    assert refit.estimator is not model
    assert refit.get_params()["alpha"] == 0.2


@pytest.mark.parametrize(
    ("change", "bad_label", "match"),
    [
        ({"alpha": 0.05}, None, "exceed remaining privacy budget"),  # before reading data
        ({"alpha": 0.05, "mechanism__epsilon": 0.5}, 7, r"labels .* not fitted on: \[7\]"),
    ],
    ids=["over-budget", "bad-labels"],
)
def test_failed_refit_keeps_the_previous_calibration_whole(
    data, model, dp, change, bad_label, match
):
    _, _, X_cal, y_cal, X_test, _ = data
    ledger = dp.accountant.BudgetAccountant(epsilon=1.5)
    pcc = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=1.0), accountant=ledger, random_state=0
    ).fit_calibrate(X_cal[:1000], y_cal[:1000])
    fitted = {name: value for name, value in vars(pcc).items() if name.endswith("_")}
    sets, spent = pcc.predict_set(X_test), list(ledger.spent_budget)
    y_refit = y_cal[1000:].copy()
    if bad_label is not None:
        y_refit[-1] = bad_label
    with pytest.raises(ValueError, match=match):  # diffprivlib's BudgetError is a ValueError
        pcc.set_params(**change).fit_calibrate(X_cal[1000:], y_refit)
    after = {name: value for name, value in vars(pcc).items() if name.endswith("_")}
    assert after.keys() == fitted.keys()
    assert all(after[name] is value for name, value in fitted.items())
    assert (pcc.alpha, pcc.calibration_.alpha) == (0.05, 0.1)
    assert ledger.spent_budget == spent
    np.testing.assert_array_equal(pcc.predict_set(X_test), sets)


def test_pickle_round_trip_keeps_threshold(data, model):
    _, _, X_cal, y_cal, X_test, _ = data
    pcc = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=1.0), random_state=0
    ).fit_calibrate(X_cal, y_cal)
    restored = pickle.loads(pickle.dumps(pcc))
    assert restored.threshold_ == pcc.threshold_
    assert restored.calibration_ == pcc.calibration_
    assert np.array_equal(restored.predict_set(X_test), pcc.predict_set(X_test))


@pytest.mark.parametrize("name", ["GaussianNB", "RandomForestClassifier", "LogisticRegression"])
def test_diffprivlib_models_end_to_end(data, dp, name):
    if name == "LogisticRegression" and DP_LOGISTIC_BROKEN:
        pytest.skip(DP_LOGISTIC_REASON)
    make_model = {
        "GaussianNB": lambda: dp.models.GaussianNB(epsilon=2.0, bounds=(-10, 10), random_state=0),
        "RandomForestClassifier": lambda: dp.models.RandomForestClassifier(
            epsilon=2.0, bounds=(-10, 10), classes=[0, 1], random_state=0, n_estimators=20
        ),
        "LogisticRegression": lambda: dp.models.LogisticRegression(
            epsilon=2.0, data_norm=30.0, random_state=0
        ),
    }[name]
    X_train, y_train, X_cal, y_cal, X_test, y_test = data
    model = make_model().fit(X_train, y_train)
    pcc = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=1.0), random_state=0
    ).fit_calibrate(X_cal, y_cal)
    sets = pcc.predict_set(X_test)
    covered = round(set_coverage(y_test, sets, pcc.classes_) * len(sets))
    assert covered >= covered_count_lower_limit(pcc, X_cal, y_cal, len(sets))
    assert 1.0 <= mean_set_size(sets) <= 2.0
    assert 0.0 <= singleton_rate(sets) <= 1.0
    assert pcc.calibration_.privacy.epsilon == 1.0
