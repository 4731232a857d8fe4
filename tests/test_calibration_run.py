"""The public steps of a calibration (privconf_sklearn.base.CalibrationRun).

Run by hand on scores computed block by block, the steps make the release
``fit_calibrate`` makes on the same rows (threshold bit for bit, calibration record,
ledger spend), for private and non-private mechanisms, classification and regression;
they refuse to run out of order, so that no score is read before the exact spend is
reserved; and the reservation is the public-quantities one.
"""

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.naive_bayes import GaussianNB

from privconf_sklearn import PrivateConformalClassifier, PrivateConformalRegressor
from privconf_sklearn.base import CalibrationRun, CalibrationScorer, MappedScores
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.mechanisms import PCOQS, ExponQ, FedCP2QQ, ScoreArray, SplitConformal


class RecordingLedger:
    """A ledger without a budget that records every spend."""

    def __init__(self):
        self.records = []

    def check(self, epsilon, delta):
        pass

    def spend(self, epsilon, delta):
        self.records.append((epsilon, delta))


class BudgetLedger(RecordingLedger):
    """Refuses a spend that would take the recorded epsilons above ``budget``."""

    def __init__(self, budget):
        super().__init__()
        self.budget = budget

    def check(self, epsilon, delta):
        if sum(e for e, _ in self.records) + epsilon > self.budget:
            raise RuntimeError("over budget")

    def spend(self, epsilon, delta):
        self.check(epsilon, delta)
        super().spend(epsilon, delta)


class CountingNB(GaussianNB):
    """Counts the rows its predict_proba was asked for."""

    def predict_proba(self, X):
        self.rows_read_ += len(X)
        return super().predict_proba(X)


def classification_data():
    X, y = make_two_gaussians(4000, random_state=5)
    model = CountingNB().fit(X[:1500], y[:1500])
    model.rows_read_ = 0
    return model, X[1500:], y[1500:]


def regression_data():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(2500, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.normal(scale=0.8, size=2500)
    y[:7] += 40.0  # scores above the public bounds: clipped, counted, warned about
    return LinearRegression().fit(X[1000:], y[1000:]), X[:1000], y[:1000]


def calibrate_in_blocks(estimator, X, y, n_blocks=3):
    """The steps of privconf_sklearn.base, with the scores of each block computed apart."""
    blocks = list(zip(np.array_split(X, n_blocks), np.array_split(y, n_blocks), strict=True))
    run = estimator.start_calibration()
    scorer = run.use_model()
    for _, y_block in blocks:
        scorer.encode_targets(y_block)
    run.reserve(len(y))

    def data_range():
        raw = [scorer.conformity_scores(X_b, scorer.encode_targets(y_b)) for X_b, y_b in blocks]
        return min(float(r.min()) for r in raw), max(float(r.max()) for r in raw)

    mapped_scorer = run.fix_score_range(data_range)
    mapped = [mapped_scorer.unit_scores(X_b, y_b) for X_b, y_b in blocks]
    counts = [m.clipping() for m in mapped]
    return run.release(
        ScoreArray(np.concatenate([m.unit for m in mapped])),
        clipping=(
            sum(c[0] for c in counts),
            sum(c[1] for c in counts),
            max(c[2] for c in counts),
        ),
        largest_covered=lambda t: max(
            (v for m in mapped if (v := m.largest_covered(t)) is not None), default=None
        ),
    )


def both_ways(make, X, y):
    """(fit_calibrate, the steps by hand): fresh estimators, same rows, same seed."""
    memory, steps = RecordingLedger(), RecordingLedger()
    with warnings.catch_warnings(record=True) as memory_warnings:
        warnings.simplefilter("always")
        in_memory = make(memory).fit_calibrate(X, y)
    with warnings.catch_warnings(record=True) as step_warnings:
        warnings.simplefilter("always")
        by_hand = calibrate_in_blocks(make(steps), X, y)
    assert memory.records == steps.records
    assert [w.category for w in memory_warnings] == [w.category for w in step_warnings]
    return in_memory, by_hand


@pytest.mark.parametrize(
    "mechanism",
    [ExponQ(epsilon=1.0), PCOQS(epsilon=1.0, delta=1e-6), SplitConformal()],
    ids=["ExponQ", "PCOQS", "SplitConformal"],
)
def test_steps_by_hand_release_what_fit_calibrate_releases(mechanism):
    model, X, y = classification_data()

    def make(ledger):
        return PrivateConformalClassifier(
            model, mechanism=mechanism, conformity_score="lac", accountant=ledger, random_state=4
        )

    in_memory, by_hand = both_ways(make, X, y)
    assert in_memory.calibration_.informative  # a threshold inside the range, not the top
    assert by_hand.threshold_ == in_memory.threshold_
    assert by_hand.calibration_ == in_memory.calibration_
    np.testing.assert_array_equal(by_hand.predict_set(X[:50]), in_memory.predict_set(X[:50]))


@pytest.mark.parametrize(
    ("mechanism", "bounds"),
    [(ExponQ(epsilon=1.0), (0.0, 8.0)), (SplitConformal(), (0.0, 8.0)), (SplitConformal(), None)],
    ids=["ExponQ", "SplitConformal", "SplitConformal-data-range"],
)
def test_regression_steps_clip_and_map_back_as_in_memory(mechanism, bounds):
    """Clipping counts, the exact score-unit threshold and a data-derived range agree."""
    model, X, y = regression_data()

    def make(ledger):
        return PrivateConformalRegressor(
            model, mechanism=mechanism, score_bounds=bounds, accountant=ledger, random_state=1
        )

    in_memory, by_hand = both_ways(make, X, y)
    assert by_hand.threshold_ == in_memory.threshold_
    assert by_hand.calibration_ == in_memory.calibration_
    assert by_hand.calibration_.owner_diagnostics["n_scores_above_bounds"] == (7 if bounds else 0)
    assert by_hand.calibration_.privacy.holds is (bounds is not None)


def test_steps_refuse_to_run_out_of_order():
    model, X, y = classification_data()
    estimator = PrivateConformalClassifier(model, mechanism=ExponQ(epsilon=1.0))
    run = estimator.start_calibration()
    assert isinstance(run, CalibrationRun) and run.reserved is None and run.model is None
    with pytest.raises(RuntimeError, match="reserve comes after use_model"):
        run.reserve(len(y))
    scorer = run.use_model()
    assert isinstance(scorer, CalibrationScorer) and scorer.score_range is None
    with pytest.raises(RuntimeError, match="score range is not fixed"):
        scorer.map_to_unit(np.array([0.5]))
    with pytest.raises(RuntimeError, match="fix_score_range comes after reserve"):
        run.fix_score_range()
    run.reserve(len(y))
    with pytest.raises(RuntimeError, match="reserves once"):
        run.reserve(len(y))
    with pytest.raises(RuntimeError, match="use_model comes before reserve"):
        run.use_model()
    with pytest.raises(RuntimeError, match="release comes after fix_score_range"):
        run.release(ScoreArray([0.5]), clipping=(0, 0, 0.5), largest_covered=lambda t: None)
    mapped = run.fix_score_range().unit_scores(X, y)
    assert isinstance(mapped, MappedScores)
    with pytest.raises(RuntimeError, match="fixed once"):
        run.fix_score_range()
    with pytest.raises(ValueError, match=f"holds 3 scores but {len(y)} rows were reserved"):
        run.release(ScoreArray([0.1, 0.2, 0.3]), clipping=(0, 0, 0.3), largest_covered=max)
    with pytest.raises(RuntimeError, match="releases once"):  # the failed try counts
        run.release(ScoreArray(mapped.unit), clipping=mapped.clipping(), largest_covered=max)
    assert not hasattr(estimator, "calibration_")


def test_no_row_is_scored_before_the_reservation():
    """Model and target checks read no score; a refused reservation reads none either."""
    model, _X, y = classification_data()
    ledger = BudgetLedger(1.5)
    estimator = PrivateConformalClassifier(model, mechanism=ExponQ(epsilon=1.0), accountant=ledger)
    run = estimator.start_calibration()  # the most it can cost fits: checked first
    scorer = run.use_model()
    scorer.encode_targets(y)
    assert model.rows_read_ == 0
    ledger.spend(1.0, 0.0)  # another calibration took most of the budget meanwhile
    with pytest.raises(RuntimeError, match="over budget"):
        run.reserve(len(y))
    assert model.rows_read_ == 0 and run.reserved is None and ledger.records == [(1.0, 0.0)]
    with pytest.raises(RuntimeError, match="over budget"):
        estimator.start_calibration()


def test_reservation_is_the_public_quantities_one():
    """Feasible: the mechanism's guarantee under adjacency; infeasible: nothing spent."""
    model, _X, y = classification_data()
    ledger = RecordingLedger()
    estimator = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=0.1), adjacency="add/remove", accountant=ledger
    )
    run = estimator.start_calibration()
    run.use_model()
    infeasible = ExponQ(epsilon=0.1).min_informative_samples(0.1) - 1
    assert not run.reserve(infeasible).reads_data and ledger.records == []
    run = estimator.start_calibration()
    run.use_model()
    reserved = run.reserve(len(y))
    assert reserved == ExponQ(epsilon=0.1).privacy_guarantee().under("add/remove")
    assert ledger.records == [reserved.accountant_spend()]


def test_reserve_checks_its_public_quantities():
    model, _X, _y = classification_data()
    central = PrivateConformalClassifier(model, mechanism=ExponQ(epsilon=1.0)).start_calibration()
    central.use_model()
    for bad in (0, -3, 2.5, True, "10"):
        with pytest.raises(ValueError, match="n_samples must be a positive integer"):
            central.reserve(bad)
    with pytest.raises(ValueError, match="central mechanism and takes no groups"):
        central.reserve(10, agent_sizes=(5, 5))
    federated = PrivateConformalClassifier(
        model, mechanism=FedCP2QQ(epsilon=1.0, n_agents=3)
    ).start_calibration()
    federated.use_model()
    with pytest.raises(ValueError, match="needs groups"):
        federated.reserve(30)
    with pytest.raises(ValueError, match="do not add up to n_samples = 30"):
        federated.reserve(30, agent_sizes=(10, 10, 11))
    with pytest.raises(ValueError, match="groups define 2 agents but n_agents = 3"):
        federated.reserve(30, agent_sizes=(15, 15))
    with pytest.raises(ValueError, match="positive integers"):
        federated.reserve(30, agent_sizes=(15, 15, 0))
    assert central.reserved is None and federated.reserved is None


def test_a_range_from_the_data_needs_data_range():
    model, _X, y = regression_data()
    run = PrivateConformalRegressor(model, mechanism=ExponQ(epsilon=1.0)).start_calibration()
    run.use_model()
    run.reserve(len(y))
    with pytest.raises(ValueError, match="pass data_range"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the privacy leak warning comes first
        run.fix_score_range()


def test_mondrian_runs_calibrate_in_memory_only():
    model, _X, y = classification_data()
    estimator = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=1.0), mondrian="class", group_sizes="public"
    )
    run = estimator.start_calibration()
    run.use_model()
    with pytest.raises(RuntimeError, match="Mondrian calibration reserves and releases per"):
        run.reserve(len(y))
