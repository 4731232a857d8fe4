"""Calibration spends exactly what it records, on the user's ledger, or refuses first."""

import copy
import math
import os
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

    def privacy_guarantee(self):
        return PrivacyGuarantee.pure(self.epsilon, adjacency="add/remove")


class ReplaceOneOnly(ExponQ):
    """A mechanism whose statement holds under replace-one adjacency only."""

    def privacy_guarantee(self):
        return PrivacyGuarantee.pure(self.epsilon, adjacency="replace-one")


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
    with pytest.warns(UserWarning, match="q~"):
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
    add/remove."""
    _, _, X_cal, y_cal = data
    ledger = ListLedger()
    pcc = PrivateConformalClassifier(
        model, mechanism=mechanism, adjacency=adjacency, accountant=ledger, random_state=0
    ).fit_calibrate(X_cal, y_cal)
    privacy = pcc.calibration_.privacy
    assert privacy.adjacency == adjacency and privacy.epsilon == expected
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


@pytest.mark.slow
def test_import_loads_diffprivlib_when_it_can(dp):
    result = subprocess.run(
        [sys.executable, "-c", "import sys, privconf_sklearn; print('diffprivlib' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.stdout.strip() == "True", result.stderr


@pytest.mark.slow
def test_process_parallel_jobs_work_after_diffprivlib_is_imported(dp, tmp_path):
    """diffprivlib's warning filter travels to scikit-learn's joblib workers; unpickling it
    there imports diffprivlib in a fresh interpreter. The package's own filter entry, kept
    ahead of it, makes the worker import privconf_sklearn (and restore the aliases
    diffprivlib needs on scikit-learn >= 1.9) first. Without it this plain scikit-learn
    job fails with BrokenProcessPool on scikit-learn 1.9. A ``sitecustomize`` removes the
    aliases at the start of every interpreter, the workers' included, to make every
    scikit-learn version behave as 1.9 here."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sklearn.tree._tree as tree\n"
        "for name in ('DOUBLE', 'DTYPE'):\n"
        "    if hasattr(tree, name):\n"
        "        delattr(tree, name)\n"
    )
    code = """
        import privconf_sklearn
        from diffprivlib.models import GaussianNB  # the documented import order
        from sklearn.datasets import make_classification
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import cross_val_score
        X, y = make_classification(200, random_state=0)
        print(len(cross_val_score(LogisticRegression(), X, y, cv=2, n_jobs=2)))
    """
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "2"


@pytest.mark.slow
def test_compatibility_step_restores_the_removed_tree_aliases(dp):
    """On scikit-learn >= 1.9 the gateway defines DOUBLE / DTYPE (as <= 1.8 had them) before
    diffprivlib is imported; simulated here by removing them first. Nothing else changes,
    and diffprivlib's forest then trains."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import numpy as np
                import sklearn.tree._tree as tree
                for name in ("DOUBLE", "DTYPE"):
                    if hasattr(tree, name):
                        delattr(tree, name)
                before = set(vars(tree))
                import privconf_sklearn
                dp = privconf_sklearn.import_diffprivlib()
                print(tree.DOUBLE is np.float64, tree.DTYPE is np.float32,
                      sorted(set(vars(tree)) - before))
                X = np.random.default_rng(0).uniform(size=(200, 2)); y = (X[:, 0] > 0.5).astype(int)
                forest = dp.models.RandomForestClassifier(
                    epsilon=5.0, bounds=(0, 1), classes=[0, 1], n_estimators=5, random_state=0
                ).fit(X, y)
                print(forest.predict_proba(X[:3]).shape)
                """
            ),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["True True ['DOUBLE', 'DTYPE']", "(3, 2)"]


def test_aliases_left_untouched_when_present(dp):
    import sklearn.tree._tree as tree

    if not hasattr(tree, "DOUBLE"):
        pytest.skip("scikit-learn >= 1.9 has no DOUBLE alias of its own")
    before = (tree.DOUBLE, tree.DTYPE)
    from privconf_sklearn import import_diffprivlib

    import_diffprivlib()
    assert (tree.DOUBLE, tree.DTYPE) == before


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
