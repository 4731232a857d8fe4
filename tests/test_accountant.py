"""Calibration spends its budget on diffprivlib's BudgetAccountant, next to training."""

import math

import numpy as np
import pytest
from diffprivlib.accountant import BudgetAccountant
from diffprivlib.models import GaussianNB
from diffprivlib.utils import BudgetError

from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.mechanisms import ExponQ, SplitConformal


@pytest.fixture
def data():
    X, y = make_two_gaussians(4000, random_state=1)
    return X[:2000], y[:2000], X[2000:], y[2000:]


def test_training_and_calibration_add_up_in_one_accountant(data):
    X_train, y_train, X_cal, y_cal = data
    accountant = BudgetAccountant(epsilon=3.0)
    model = GaussianNB(epsilon=2.0, bounds=(-10, 10), accountant=accountant, random_state=0)
    model.fit(X_train, y_train)
    pcc = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=1.0), accountant=accountant, random_state=0
    ).fit_calibrate(X_cal, y_cal)
    assert accountant.total() == (3.0, 0.0)
    assert accountant.spent_budget[-1] == (1.0, 0)
    # The budget is exhausted: a second calibration is refused before reading data.
    with pytest.raises(BudgetError):
        pcc.fit_calibrate(X_cal, y_cal)
    assert len(accountant.spent_budget) == 2


def test_default_accountant_records_calibration(data):
    _, _, X_cal, y_cal = data
    model = GaussianNB(epsilon=2.0, bounds=(-10, 10), random_state=0).fit(X_cal, y_cal)
    PrivateConformalClassifier(model, mechanism=ExponQ(epsilon=0.5), random_state=0).fit_calibrate(
        X_cal, y_cal
    )
    assert BudgetAccountant.load_default(None).total() == (2.5, 0.0)


def test_infeasible_calibration_spends_nothing(data):
    X_train, y_train, X_cal, y_cal = data
    accountant = BudgetAccountant()
    model = GaussianNB(epsilon=2.0, bounds=(-10, 10), random_state=0).fit(X_train, y_train)
    pcc = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=0.01), accountant=accountant, random_state=0
    )
    with pytest.warns(UserWarning, match="q~"):
        pcc.fit_calibrate(X_cal[:50], y_cal[:50])
    assert not pcc.calibration_.feasible
    assert pcc.calibration_.privacy.epsilon == 0.0
    assert accountant.spent_budget == []
    assert pcc.predict_set(X_cal).all()


def test_non_private_calibration_is_infinite_spending(data):
    X_train, y_train, X_cal, y_cal = data
    model = GaussianNB(epsilon=2.0, bounds=(-10, 10), random_state=0).fit(X_train, y_train)
    finite = BudgetAccountant(epsilon=10.0)
    with pytest.raises(BudgetError):
        PrivateConformalClassifier(
            model, mechanism=SplitConformal(), accountant=finite
        ).fit_calibrate(X_cal, y_cal)
    unlimited = BudgetAccountant()
    PrivateConformalClassifier(
        model, mechanism=SplitConformal(), accountant=unlimited
    ).fit_calibrate(X_cal, y_cal)
    assert math.isinf(unlimited.total()[0])


def test_grid_search_spends_on_the_shared_accountant(data):
    from sklearn.model_selection import GridSearchCV

    from privconf_sklearn.metrics import neg_mean_set_size_scorer

    X_train, y_train, X_cal, y_cal = data
    model = GaussianNB(epsilon=2.0, bounds=(-10, 10), random_state=0).fit(X_train, y_train)
    accountant = BudgetAccountant()
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
