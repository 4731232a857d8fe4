"""PrivateRiskControlClassifier: the estimator, its inputs, its records and warnings."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.multioutput import MultiOutputClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from privconf_sklearn import PrivateRiskControlClassifier, UninformativePredictionWarning
from privconf_sklearn.mechanisms import (
    ExponCRC,
    InfeasibleCalibrationWarning,
    LossAssumptionWarning,
    SplitCRC,
    UninformativeCalibrationWarning,
    max_resolution,
)
from privconf_sklearn.mondrian import UnseenGroupWarning
from privconf_sklearn.scores import CallableLoss, FalseNegativeRate, SetLoss

from ._multilabel import make_multilabel

COMMON_CHECK_ESTIMATORS = [
    PrivateRiskControlClassifier(
        LogisticRegression(), mechanism=SplitCRC(), prefit=False, random_state=0
    ),
    PrivateRiskControlClassifier(
        LogisticRegression(), mechanism=ExponCRC(10.0), alpha=0.2, prefit=False, random_state=0
    ),
]


@parametrize_with_checks(COMMON_CHECK_ESTIMATORS)
def test_sklearn_common_checks(estimator, check):
    """All scikit-learn common checks pass (single-label y: the FNR is the miscoverage)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        check(estimator)


def test_common_check_sizes_reach_the_private_level():
    """check_classifiers_train calibrates on 90 rows: ExponCRC(10) at 0.2 is feasible."""
    assert ExponCRC(10.0).risk_certificate(90, 0.2, 101).feasible


@pytest.fixture(scope="module")
def data():
    X, Y = make_multilabel(7000, seed=2)
    return X[:2000], Y[:2000], X[2000:5000], Y[2000:5000], X[5000:], Y[5000:]


@pytest.fixture(scope="module")
def model(data):
    X_train, Y_train, *_ = data
    return MultiOutputClassifier(LogisticRegression()).fit(X_train, Y_train)


def _fnr(Y, sets):
    Y = Y.astype(bool)
    return 1 - (Y & sets).sum(axis=1) / Y.sum(axis=1)


def test_sets_are_probabilities_above_the_threshold(data, model):
    _, _, X_cal, Y_cal, X_test, Y_test = data
    crc = PrivateRiskControlClassifier(model, mechanism=ExponCRC(1.0), random_state=0)
    crc.fit_calibrate(X_cal, Y_cal)
    proba = np.column_stack([p[:, 1] for p in model.predict_proba(X_test)])
    sets = crc.predict_set(X_test)
    assert sets.dtype == bool and np.array_equal(sets, proba > crc.threshold_)
    assert crc.threshold_ == crc.thresholds_[crc.calibration_.index]
    assert np.array_equal(crc.classes_, np.arange(5))
    assert crc.calibration_.privacy.epsilon == 1.0
    assert crc.calibration_.privacy.adjacencies == ("replace-one", "add/remove")
    assert 0.0 < crc.calibration_.risk_upper_bound <= 0.1
    assert _fnr(Y_test, sets).mean() < 0.15  # one split: a sanity check, not the guarantee
    assert np.array_equal(crc.predict_set(X_test, batch_size=7), sets)


@pytest.mark.parametrize(
    "estimator",
    [
        RandomForestClassifier(n_estimators=20, random_state=0),  # a list of (n, 2) arrays
        MLPClassifier(hidden_layer_sizes=(8,), max_iter=300, random_state=0),  # (n, K)
    ],
    ids=["forest-list", "mlp-array"],
)
def test_multilabel_output_forms(data, estimator):
    X_train, Y_train, X_cal, Y_cal, X_test, _ = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MLP convergence
        fitted = estimator.fit(X_train, Y_train)
    crc = PrivateRiskControlClassifier(fitted, mechanism=SplitCRC()).fit_calibrate(X_cal, Y_cal)
    proba = fitted.predict_proba(X_test)
    proba = np.column_stack([p[:, 1] for p in proba]) if isinstance(proba, list) else proba
    assert np.array_equal(crc.predict_set(X_test), proba > crc.threshold_)


class ThreeAxisModel(MultiOutputClassifier):
    """predict_proba as one (n, K, 2) array, [negative, positive] (MAPIE reads it so)."""

    def predict_proba(self, X):
        return np.stack(super().predict_proba(X), axis=1)


def test_three_axis_probabilities(data, model):
    X_train, Y_train, X_cal, Y_cal, X_test, _ = data
    other = ThreeAxisModel(LogisticRegression()).fit(X_train, Y_train)
    a = PrivateRiskControlClassifier(model, mechanism=SplitCRC()).fit_calibrate(X_cal, Y_cal)
    b = PrivateRiskControlClassifier(other, mechanism=SplitCRC()).fit_calibrate(X_cal, Y_cal)
    assert a.threshold_ == b.threshold_
    assert np.array_equal(a.predict_set(X_test), b.predict_set(X_test))


def test_rows_without_true_labels_have_zero_loss(data, model):
    """FNR of an empty label set is 0: adding such rows lowers the calibration curve."""
    _, _, X_cal, Y_cal, _, _ = data
    empty = np.zeros_like(Y_cal[:500])
    with_empty = PrivateRiskControlClassifier(model, mechanism=SplitCRC()).fit_calibrate(
        np.vstack([X_cal, X_cal[:500]]), np.vstack([Y_cal, empty])
    )
    without = PrivateRiskControlClassifier(model, mechanism=SplitCRC()).fit_calibrate(X_cal, Y_cal)
    assert with_empty.threshold_ >= without.threshold_


def test_single_label_fnr_is_miscoverage():
    """1-d y: classes_ are the classifier's, the loss is 1{y not in the set}."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 3))
    y = np.array(["a", "b", "c"])[np.argmax(X + rng.normal(size=X.shape), axis=1)]
    model = LogisticRegression().fit(X[:1000], y[:1000])
    crc = PrivateRiskControlClassifier(model, mechanism=SplitCRC(), alpha=0.1)
    crc.fit_calibrate(X[1000:3000], y[1000:3000])
    assert crc.classes_.tolist() == ["a", "b", "c"]
    sets = crc.predict_set(X[3000:])
    covered = sets[np.arange(1000), np.searchsorted(crc.classes_, y[3000:])]
    assert covered.mean() > 0.85


def test_cost_weighted_loss_for_single_label():
    """A callable loss: missing class "b" costs 5, the others 1 (B = 5)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(5000, 3))
    y = np.argmax(X + rng.normal(size=X.shape), axis=1)
    model = LogisticRegression().fit(X[:1000], y[:1000])
    costs = np.array([1.0, 5.0, 1.0])

    def cost(y_true, y_set):
        return (y_true & ~y_set) @ costs

    crc = PrivateRiskControlClassifier(
        model, mechanism=ExponCRC(2.0), alpha=0.3, loss=cost, loss_bound=5.0, random_state=0
    ).fit_calibrate(X[1000:3000], y[1000:3000])
    assert crc.calibration_.loss_bound == 5.0 and crc.calibration_.risk_upper_bound <= 0.3
    sets = crc.predict_set(X[3000:])
    missed = ~sets[np.arange(2000), y[3000:]]
    assert (missed * costs[y[3000:]]).mean() < 0.45


def test_a_loss_positive_for_every_label_is_refused_before_reading_data(data, model):
    """A loss positive for the set of every label on a row with one true label (or every
    label true) breaks the guarantee's assumption for every data set: refused from public
    quantities, before a row is read or a budget spent."""
    _, _, X_cal, Y_cal, _, _ = data

    def size_penalty(y_true, y_set):
        return 0.1 * y_set.mean(axis=1) + (y_true & ~y_set).any(axis=1)

    crc = PrivateRiskControlClassifier(
        model, mechanism=ExponCRC(1.0), alpha=0.3, loss=size_penalty, loss_bound=1.1
    )
    with pytest.raises(ValueError, match="must be 0 for the set of every label"):
        crc.fit_calibrate(X_cal, Y_cal)
    assert not hasattr(crc, "calibration_")


def test_loss_at_the_full_set_is_flagged_to_the_owner_and_no_card_states_it(data, model):
    """A loss positive at the set of every label only for rows with exactly two true
    labels passes the public check; the rows that break the assumption are found on the
    calibration data: a warning at the user's line, an owner diagnostic, the record's
    repr, and no card certifies the bound."""
    _, _, X_cal, Y_cal, _, _ = data

    def two_labels_cost(y_true, y_set):  # grows with the set: its envelope is used
        missed = (y_true & ~y_set).any(axis=1).astype(float)
        return missed + 0.1 * (y_true.sum(axis=1) == 2) * y_set.mean(axis=1)

    crc = PrivateRiskControlClassifier(
        model, mechanism=ExponCRC(1.0), alpha=0.3, loss=two_labels_cost, loss_bound=1.1
    )
    with pytest.warns(LossAssumptionWarning) as record:
        crc.fit_calibrate(X_cal, Y_cal)
    assert {w.filename for w in record} == {__file__}
    messages = " ".join(str(w.message) for w in record)
    assert "positive loss at the most conservative" in messages and "envelope" in messages
    diagnostics = crc.calibration_.owner_diagnostics
    two = int((Y_cal.sum(axis=1) == 2).sum())
    assert diagnostics["n_rows_top_loss_positive"] == two > 0
    assert not crc.calibration_.assumptions_hold
    assert "n_rows_top_loss_positive" not in crc.calibration_.details
    assert "ASSUMPTION  broken" in repr(crc.calibration_)
    with pytest.raises(ValueError, match="No card certifies this calibration"):
        _ = crc.card_


def test_loss_outside_its_bound_is_an_error_and_fits_nothing(data, model):
    _, _, X_cal, Y_cal, _, _ = data
    crc = PrivateRiskControlClassifier(
        model, mechanism=ExponCRC(1.0), loss=lambda y, s: 2.0 * (y & ~s).any(axis=1), loss_bound=1.0
    )
    with pytest.raises(ValueError, match=r"\[0, 1.0\]; got \[2.0\]"):
        crc.fit_calibrate(X_cal, Y_cal)
    assert not hasattr(crc, "calibration_")


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"loss": "recall"}, ValueError, "'loss' parameter of PrivateRiskControlClassifier"),
        ({"loss": lambda y, s: y.sum(1)}, ValueError, "needs loss_bound"),
        ({"loss_bound": 2.0}, ValueError, "loss_bound is the bound of a callable"),
        ({"alpha": 1.0}, ValueError, r"alpha must lie in \(0, loss_bound\)"),
        ({"alpha": True}, TypeError, "alpha"),
        ({"thresholds": [0.1, np.nan]}, ValueError, "finite real"),
        ({"thresholds": [0.1, 0.1]}, ValueError, "distinct"),
        ({"thresholds": [True, False]}, ValueError, "finite real"),
        ({"thresholds": np.zeros((2, 2))}, ValueError, "one-dimensional"),
        ({"mondrian": lambda X: X[:, 0] > 0}, ValueError, "needs group_sizes: 'public'"),
        ({"group_sizes": "public"}, ValueError, "only used with mondrian"),
    ],
)
def test_bad_parameters_fail_before_reading_data(model, params, error, match):
    class Unreadable:
        def __len__(self):
            raise AssertionError("the data were read")

    crc = PrivateRiskControlClassifier(model, mechanism=ExponCRC(1.0), **params)
    with pytest.raises(error, match=match):
        crc.fit_calibrate(Unreadable(), Unreadable())


def test_mechanism_must_be_a_risk_control_mechanism(model):
    from privconf_sklearn.mechanisms import ExponQ

    with pytest.raises(TypeError, match="RiskControlMechanism"):
        PrivateRiskControlClassifier(model, mechanism=ExponQ(1.0)).fit_calibrate([[0]], [[1]])


def test_infeasible_size_gives_every_label(data, model):
    _, _, X_cal, Y_cal, X_test, _ = data
    crc = PrivateRiskControlClassifier(model, mechanism=ExponCRC(0.5), alpha=0.1)
    with pytest.warns(InfeasibleCalibrationWarning) as record:
        crc.fit_calibrate(X_cal[:20], Y_cal[:20])
    assert record[0].filename == __file__
    assert not crc.calibration_.feasible and crc.calibration_.privacy.epsilon == 0.0
    with pytest.warns(UninformativePredictionWarning) as record:
        assert crc.threshold_ == -np.inf and crc.predict_set(X_test).all()
    message = str(record[0].message)
    assert record[0].filename == __file__
    assert "released the last, most conservative threshold of its grid. No target" in message
    assert "mechanism.forecast(n, alpha, n_candidates)" in message
    assert "top of the public range" not in message  # the quantile wording


def test_ledger_is_checked_first_and_charged(data, model, dp):
    _, _, X_cal, Y_cal, _, _ = data
    ledger = dp.accountant.BudgetAccountant(epsilon=1.5)
    crc = PrivateRiskControlClassifier(
        model, mechanism=ExponCRC(1.0), accountant=ledger, random_state=0
    ).fit_calibrate(X_cal, Y_cal)
    assert ledger.spent_budget == [(1.0, 0.0)]
    with pytest.raises(ValueError, match="budget"):  # diffprivlib's BudgetError
        crc.fit_calibrate(X_cal, Y_cal)
    assert ledger.spent_budget == [(1.0, 0.0)]


def test_mondrian_groups(data, model):
    _, _, X_cal, Y_cal, X_test, _ = data

    def sign(X):
        return np.asarray(X)[:, 0] > 0

    crc = PrivateRiskControlClassifier(
        model, mechanism=ExponCRC(1.0), mondrian=sign, group_sizes="public", random_state=0
    ).fit_calibrate(X_cal, Y_cal)
    assert crc.groups_.tolist() == [False, True] and not hasattr(crc, "threshold_")
    assert crc.calibration_.privacy.epsilon == 2.0  # replace-one may move a row between groups
    proba = np.column_stack([p[:, 1] for p in model.predict_proba(X_test)])
    expected = proba > crc.group_thresholds_[sign(X_test).astype(int)][:, None]
    assert np.array_equal(crc.predict_set(X_test), expected)

    only_positive = PrivateRiskControlClassifier(
        model, mechanism=SplitCRC(), mondrian=sign, group_sizes="public"
    ).fit_calibrate(X_cal[sign(X_cal)], Y_cal[sign(X_cal)])
    with pytest.warns(UnseenGroupWarning):
        sets = only_positive.predict_set(X_test)
    assert sets[~sign(X_test)].all()  # an unseen group gets every label


def test_mondrian_groups_all_trivial_warn_without_crashing(data, model):
    """Every group too small to certify alpha: every set holds every label, and
    predict_set warns (a Mondrian risk record has no single reason to quote)."""
    _, _, X_cal, Y_cal, X_test, _ = data

    def sign(X):
        return np.asarray(X)[:, 0] > 0

    crc = PrivateRiskControlClassifier(
        model, mechanism=ExponCRC(0.5), mondrian=sign, group_sizes="public", random_state=0
    )
    with pytest.warns(InfeasibleCalibrationWarning):
        crc.fit_calibrate(X_cal[:40], Y_cal[:40])
    with pytest.warns(UninformativePredictionWarning, match="most conservative threshold"):
        assert crc.predict_set(X_test).all()


def test_forecast_is_data_free(model):
    crc = PrivateRiskControlClassifier(model, mechanism=ExponCRC(1.0), alpha=0.1)
    forecast = crc.forecast(2000)
    assert forecast.index_probabilities.shape == (101,)
    assert forecast.informative_probability == pytest.approx(1.0)
    assert abs(forecast.expected_index - forecast.crc_index) < 2
    assert not hasattr(crc, "calibration_")


def test_clone_and_pickle(data, model):
    _, _, X_cal, Y_cal, X_test, _ = data
    crc = PrivateRiskControlClassifier(model, mechanism=ExponCRC(1.0), random_state=0)
    assert clone(crc).estimator is model
    crc.fit_calibrate(X_cal, Y_cal)
    restored = pickle.loads(pickle.dumps(crc))
    assert np.array_equal(restored.predict_set(X_test), crc.predict_set(X_test))


def test_card_states_the_risk(data, model):
    """The card is a risk card (tests/test_risk_card.py checks it in depth)."""
    _, _, X_cal, Y_cal, _, _ = data
    crc = PrivateRiskControlClassifier(model, mechanism=SplitCRC()).fit_calibrate(X_cal, Y_cal)
    card = crc.card_
    assert (card.configuration.loss, card.configuration.alpha) == ("fnr", crc.alpha)
    assert card.risk_upper_bound == crc.calibration_.risk_upper_bound


def test_a_set_loss_without_its_own_mean_loss_rounds_up_like_calibration():
    """The default mean loss of a SetLoss is read off its loss curve at one candidate:
    each row's loss rounded up to a multiple of B / Q, never below the exact mean."""

    def misses(y_true, y_set):
        return (y_true & ~y_set).sum(axis=1).astype(float)

    class Misses(SetLoss):
        def bound(self):
            return 3.0

        def loss_curve(self, outputs, targets, thresholds):
            return CallableLoss(misses, 3.0).loss_curve(outputs, targets, thresholds)

    targets = np.array([[1, 1, 0], [1, 0, 1], [0, 1, 1]], dtype=bool)
    sets = np.array([[1, 0, 0], [0, 0, 0], [1, 1, 1]], dtype=bool)
    exact = misses(targets, sets).mean()  # (1 + 2 + 0) / 3
    quantum = 3.0 / max_resolution(3)
    assert exact <= Misses().mean_loss(targets, sets) <= exact + quantum
    assert CallableLoss(misses, 3.0).mean_loss(targets, sets) == exact == 1.0
    assert FalseNegativeRate().mean_loss(targets, sets) == pytest.approx((0.5 + 1.0) / 3)
