"""Calibration spends exactly what it records, on the user's ledger, or refuses first."""

import copy
import math
import pickle
import subprocess
import sys
import textwrap

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, cross_validate
from sklearn.naive_bayes import GaussianNB as PlainGaussianNB

from privconf_sklearn import PrivateConformalClassifier, PrivateConformalRegressor
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.mechanisms import ExponQ, SplitConformal
from privconf_sklearn.metrics import neg_mean_set_size_scorer
from privconf_sklearn.privacy import PrivacyGuarantee


class AddRemoveOnly(ExponQ):
    """ExponQ stated as private under add/remove only, as its monotone scaling is."""

    def _privacy_guarantee(self, params):
        return PrivacyGuarantee.pure(params["epsilon"], adjacency="add/remove")


class ReplaceOneOnly(ExponQ):
    """A mechanism whose statement holds under replace-one adjacency only."""

    def _privacy_guarantee(self, params):
        return PrivacyGuarantee.pure(params["epsilon"], adjacency="replace-one")


class ListLedger:
    """A ledger that is not diffprivlib's: anything with check() and spend() works."""

    def __init__(self, epsilon=math.inf):
        self.epsilon, self.records = epsilon, []

    def check(self, epsilon, delta):
        if sum(e for e, _ in self.records) + epsilon > self.epsilon:
            raise RuntimeError("over budget")

    def spend(self, epsilon, delta):
        self.check(epsilon, delta)
        self.records.append((epsilon, delta))


@pytest.fixture(scope="module")
def data():
    X, y = make_two_gaussians(4000, random_state=1)
    return X[:2000], y[:2000], X[2000:], y[2000:]


@pytest.fixture(scope="module")
def model(data):
    X_train, y_train, _, _ = data
    return PlainGaussianNB().fit(X_train, y_train)


def test_training_and_calibration_add_up_in_one_accountant(data, dp):
    X_train, y_train, X_cal, y_cal = data
    accountant = dp.accountant.BudgetAccountant(epsilon=3.0)
    trained = dp.models.GaussianNB(
        epsilon=2.0, bounds=(-10, 10), accountant=accountant, random_state=0
    ).fit(X_train, y_train)
    pcc = PrivateConformalClassifier(
        trained, mechanism=ExponQ(epsilon=1.0), accountant=accountant, random_state=0
    ).fit_calibrate(X_cal, y_cal)
    assert accountant.total() == (3.0, 0.0)
    assert accountant.spent_budget[-1] == (1.0, 0)
    # The budget is exhausted: a second calibration is refused before reading data.
    with pytest.raises(dp.utils.BudgetError):
        pcc.fit_calibrate(X_cal, y_cal)
    assert len(accountant.spent_budget) == 2


def test_default_accountant_records_calibration(data, dp):
    _, _, X_cal, y_cal = data
    trained = dp.models.GaussianNB(epsilon=2.0, bounds=(-10, 10), random_state=0).fit(X_cal, y_cal)
    PrivateConformalClassifier(
        trained, mechanism=ExponQ(epsilon=0.5), random_state=0
    ).fit_calibrate(X_cal, y_cal)
    assert dp.accountant.BudgetAccountant.load_default(None).total() == (2.5, 0.0)


def test_any_ledger_with_check_and_spend(data, model):
    _, _, X_cal, y_cal = data
    ledger = ListLedger(epsilon=1.5)
    pcc = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=1.0), accountant=ledger, random_state=0
    ).fit_calibrate(X_cal, y_cal)
    assert ledger.records == [(1.0, 0.0)]
    with pytest.raises(RuntimeError, match="over budget"):
        pcc.fit_calibrate(X_cal, y_cal)
    assert ledger.records == [(1.0, 0.0)]


def test_infeasible_calibration_spends_nothing(data, model):
    _, _, X_cal, y_cal = data
    ledger = ListLedger()
    pcc = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=0.01), accountant=ledger, random_state=0
    )
    with pytest.warns(UserWarning, match="needed"):
        pcc.fit_calibrate(X_cal[:50], y_cal[:50])
    assert not pcc.calibration_.feasible
    assert pcc.calibration_.privacy.epsilon == 0.0
    assert ledger.records == []
    assert pcc.predict_set(X_cal).all()


def test_non_private_calibration_is_infinite_spending(data, model, dp):
    _, _, X_cal, y_cal = data
    finite = dp.accountant.BudgetAccountant(epsilon=10.0)
    with pytest.raises(dp.utils.BudgetError):
        PrivateConformalClassifier(
            model, mechanism=SplitConformal(), accountant=finite
        ).fit_calibrate(X_cal, y_cal)
    unlimited = dp.accountant.BudgetAccountant()
    PrivateConformalClassifier(
        model, mechanism=SplitConformal(), accountant=unlimited
    ).fit_calibrate(X_cal, y_cal)
    assert math.isinf(unlimited.total()[0])


# ------------------------------------------------------------------- adjacency
@pytest.mark.parametrize(
    ("mechanism", "adjacency", "expected"),
    [
        (AddRemoveOnly(epsilon=1.0), "replace-one", 2.0),
        (AddRemoveOnly(epsilon=1.0), "add/remove", 1.0),
        (ExponQ(epsilon=1.0), "replace-one", 1.0),
        (ExponQ(epsilon=1.0), "add/remove", 1.0),
        (ReplaceOneOnly(epsilon=1.0), "replace-one", 1.0),
        (ReplaceOneOnly(epsilon=1.0), "add/remove", math.inf),
    ],
)
def test_spending_is_recorded_under_the_stated_adjacency(
    data, model, mechanism, adjacency, expected
):
    """An add/remove-only statement costs 2 epsilon under replace-one (group privacy), on
    the ledger and on calibration_.privacy; a replace-one-only one does not hold under
    add/remove; one that holds under both is recorded as holding under both."""
    _, _, X_cal, y_cal = data
    ledger = ListLedger()
    pcc = PrivateConformalClassifier(
        model, mechanism=mechanism, adjacency=adjacency, accountant=ledger, random_state=0
    ).fit_calibrate(X_cal, y_cal)
    privacy = pcc.calibration_.privacy
    assert adjacency in privacy.adjacencies and privacy.epsilon == expected
    both = type(mechanism) is ExponQ
    assert privacy.adjacency == ("replace-one and add/remove" if both else adjacency)
    assert privacy.holds == math.isfinite(expected)
    assert ledger.records == [(expected, 0.0)]


class WatchedGaussianNB(PlainGaussianNB):
    """Counts the rows it is asked to score: did calibration read data?"""

    def predict_proba(self, X):
        self.rows_read_ = getattr(self, "rows_read_", 0) + len(X)
        return super().predict_proba(X)


def test_budget_is_checked_under_the_stated_adjacency_before_reading_data(data):
    X_train, y_train, X_cal, y_cal = data
    model = WatchedGaussianNB().fit(X_train, y_train)
    ledger = ListLedger(epsilon=1.5)
    pcc = PrivateConformalClassifier(model, mechanism=AddRemoveOnly(epsilon=1.0), accountant=ledger)
    with pytest.raises(RuntimeError, match="over budget"):
        pcc.fit_calibrate(X_cal, y_cal)
    assert getattr(model, "rows_read_", 0) == 0  # refused before the model saw a row
    assert not hasattr(pcc, "calibration_") and ledger.records == []
    pcc.set_params(adjacency="add/remove").fit_calibrate(X_cal, y_cal)
    assert ledger.records == [(1.0, 0.0)]


# ------------------------------------------------------- copies and processes
def test_grid_search_spends_on_the_shared_accountant(data, model, dp):
    _, _, X_cal, y_cal = data
    accountant = dp.accountant.BudgetAccountant()
    GridSearchCV(
        PrivateConformalClassifier(
            model, mechanism=ExponQ(epsilon=1.0), accountant=accountant, random_state=0
        ),
        {"mechanism__epsilon": [0.5, 1.0]},
        scoring=neg_mean_set_size_scorer,
        cv=2,
    ).fit(X_cal, y_cal)
    # 2 folds x 2 budgets + the refit: every private fit is on the ledger.
    assert sorted(e for e, _ in accountant.spent_budget) == [0.5, 0.5, 1.0, 1.0, 1.0]
    assert np.isclose(accountant.total()[0], 4.0)


@pytest.mark.slow
@pytest.mark.parametrize("default_ledger", [False, True], ids=["given ledger", "default ledger"])
def test_grid_search_in_worker_processes_refuses_instead_of_losing_spending(
    data, model, dp, default_ledger
):
    """The audit's case: GridSearchCV(n_jobs=2) used to finish with 1.0 of 9.5 recorded.

    Worker processes receive pickled copies; a copy never spends. Every fit there is
    refused before reading data, so the search fails and the ledger records nothing.
    """
    _, _, X_cal, y_cal = data
    ledger = None if default_ledger else dp.accountant.BudgetAccountant(epsilon=1.0)
    search = GridSearchCV(
        PrivateConformalClassifier(
            model, mechanism=ExponQ(epsilon=0.5), accountant=ledger, random_state=0
        ),
        {"alpha": [0.05, 0.1, 0.2]},
        scoring=neg_mean_set_size_scorer,
        cv=3,
        n_jobs=2,
    )
    with pytest.raises(ValueError, match="All the 9 fits failed"):
        search.fit(X_cal, y_cal)
    ledger = ledger or dp.accountant.BudgetAccountant.load_default(None)
    assert ledger.spent_budget == []
    search.set_params(error_score="raise")
    with pytest.raises(Exception, match=r"ledger .* stayed behind"):
        search.fit(X_cal, y_cal)


def test_cross_validate_in_worker_processes_refuses(data, model):
    _, _, X_cal, y_cal = data
    ledger = ListLedger()
    with pytest.raises(ValueError, match="All the 3 fits failed"):
        cross_validate(
            PrivateConformalClassifier(model, mechanism=ExponQ(epsilon=0.5), accountant=ledger),
            X_cal,
            y_cal,
            scoring=neg_mean_set_size_scorer,
            cv=3,
            n_jobs=2,
        )
    assert ledger.records == []


def test_threaded_search_spends_every_calibration(data, model):
    _, _, X_cal, y_cal = data
    ledger = ListLedger()
    with joblib.parallel_backend("threading", n_jobs=2):
        GridSearchCV(
            PrivateConformalClassifier(
                model, mechanism=ExponQ(epsilon=0.5), accountant=ledger, random_state=0
            ),
            {"alpha": [0.05, 0.1, 0.2]},
            scoring=neg_mean_set_size_scorer,
            cv=3,
            n_jobs=2,
        ).fit(X_cal, y_cal)
    assert ledger.records == [(0.5, 0.0)] * 10  # 9 fits and the refit


def test_copies_in_this_process_keep_the_ledger(data, model):
    _, _, X_cal, y_cal = data
    ledger = ListLedger()
    pcc = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=0.5), accountant=ledger, random_state=0
    ).fit_calibrate(X_cal, y_cal)
    for copied in (clone(pcc), copy.copy(pcc), copy.deepcopy(pcc), pickle.loads(pickle.dumps(pcc))):
        assert copied.accountant is ledger
    pickle.loads(pickle.dumps(pcc)).fit_calibrate(X_cal, y_cal)
    assert len(ledger.records) == 2


def _fit_in_worker(estimator, X, y):
    try:
        estimator.fit_calibrate(X, y)
    except Exception as exc:  # returned to the parent, which checks it
        return type(exc).__name__, str(exc), hasattr(estimator, "calibration_")
    return None


def _predict_in_worker(estimator, X):
    return estimator.predict_set(X)


def test_fitted_estimator_predicts_in_worker_processes_but_does_not_recalibrate(data, model):
    _, _, X_cal, y_cal = data
    ledger = ListLedger()
    pcc = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=0.5), accountant=ledger, random_state=0
    ).fit_calibrate(X_cal, y_cal)
    with joblib.parallel_backend("loky", n_jobs=2):
        sets = joblib.Parallel()(
            joblib.delayed(_predict_in_worker)(pcc, X_cal[:50]) for _ in range(2)
        )
        failures = joblib.Parallel()(
            joblib.delayed(_fit_in_worker)(clone(pcc), X_cal, y_cal) for _ in range(2)
        )
    np.testing.assert_array_equal(sets[0], pcc.predict_set(X_cal[:50]))
    for name, message, fitted in failures:
        assert name == "DetachedLedgerError" and not fitted
        assert "set_params(accountant=ledger)" in message
    assert len(ledger.records) == 1


# ------------------------------------------------------- without diffprivlib
def _run_without_diffprivlib(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter where ``import diffprivlib`` fails."""
    prelude = "import sys\nsys.modules['diffprivlib'] = None  # import diffprivlib -> ImportError\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_without_diffprivlib_default_ledger_fails_before_reading_data():
    result = _run_without_diffprivlib(
        """
        import warnings
        import numpy as np
        from sklearn.linear_model import LinearRegression, LogisticRegression
        import privconf_sklearn
        from privconf_sklearn import PrivateConformalClassifier, PrivateConformalRegressor
        from privconf_sklearn.mechanisms import ExponQ

        reads = []

        class Watched(LogisticRegression):
            def predict_proba(self, X):
                reads.append(len(X))
                return super().predict_proba(X)

        rng = np.random.default_rng(0)
        X = rng.normal(size=(4000, 2)); y = (X[:, 0] > 0).astype(int)
        model = Watched().fit(X[:2000], y[:2000])
        pcc = PrivateConformalClassifier(model, mechanism=ExponQ(epsilon=1.0))
        try:
            pcc.fit_calibrate(X[2000:], y[2000:])
        except ImportError as exc:
            print("REFUSED", type(exc).__name__, "|", exc)
        print("READS", reads, hasattr(pcc, "calibration_"))

        class Ledger:
            spent = []
            def check(self, epsilon, delta): pass
            def spend(self, epsilon, delta): self.spent.append((epsilon, delta))

        ledger = Ledger()
        pcc.set_params(accountant=ledger, random_state=0).fit_calibrate(X[2000:], y[2000:])
        print("SPENT", ledger.spent)

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            PrivateConformalRegressor(
                LinearRegression().fit(X, X[:, 0]), mechanism=ExponQ(epsilon=1.0),
                accountant=ledger,
            ).fit_calibrate(X[2000:], X[2000:, 1])
        print("LEAK", [w.category is privconf_sklearn.PrivacyLeakWarning for w in caught])
        print("LOADED", "diffprivlib" in sys.modules and sys.modules["diffprivlib"] is not None)
        """
    )
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["REFUSED"].startswith("DiffprivlibUnavailableError |")
    assert "Nothing was read or spent. Pass a ledger explicitly" in lines["REFUSED"]
    assert lines["READS"] == "[] False"
    assert lines["SPENT"] == "[(1.0, 0.0)]"
    assert lines["LEAK"] == "[True]"
    assert lines["LOADED"] == "False"


def test_regressor_spends_under_adjacency(data):
    _, _, X_cal, _ = data
    rng = np.random.default_rng(0)
    y = X_cal[:, 0] + rng.normal(size=len(X_cal))
    from sklearn.linear_model import LinearRegression

    regressor = LinearRegression().fit(X_cal, y)
    ledger = ListLedger()
    estimator = PrivateConformalRegressor(
        regressor,
        mechanism=AddRemoveOnly(epsilon=0.5),
        score_bounds=(0.0, 20.0),
        accountant=ledger,
        random_state=0,
    ).fit_calibrate(X_cal, y)
    assert estimator.calibration_.privacy.epsilon == 1.0 and ledger.records == [(1.0, 0.0)]
