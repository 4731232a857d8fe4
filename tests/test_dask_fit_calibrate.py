"""privconf_sklearn.dask.fit_calibrate releases exactly what the in-memory fit_calibrate
releases (threshold, Calibration, budget spent), on a local cluster that listens on
127.0.0.1 only; bad input gets the in-memory errors and leaves nothing fitted or spent."""

import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pytest.importorskip("distributed")

import pandas as pd  # noqa: E402
from sklearn.linear_model import LinearRegression  # noqa: E402
from sklearn.naive_bayes import GaussianNB  # noqa: E402
from sklearn.tree import DecisionTreeClassifier  # noqa: E402

# The private module constants below set when the cluster path gathers scores on the
# client instead of narrowing by another histogram pass. There is no public knob (the
# defaults need > 10^6 rows to leave the gathering branch), so the tests shrink them to
# run every branch of the order statistic and the rank counter on small data.
import privconf_sklearn.dask._statistics as dask_statistics  # noqa: E402
from privconf_sklearn import PrivateConformalClassifier, PrivateConformalRegressor  # noqa: E402
from privconf_sklearn.dask import fit_calibrate, local_cluster  # noqa: E402
from privconf_sklearn.mechanisms import (  # noqa: E402
    DPAPS,
    PCOQS,
    ExponQ,
    FedCP2QQ,
    FedCPQQ,
    SplitConformal,
)

MECHANISMS = {
    "ExponQ": lambda: ExponQ(epsilon=1.0),
    "ExponQ-paper": lambda: ExponQ(epsilon=0.5, scaling="paper"),
    "DPAPS": lambda: DPAPS(epsilon=1.0),
    "PCOQS": lambda: PCOQS(epsilon=1.0, delta=1e-6),
    "PCOQS-bounds": lambda: PCOQS(epsilon=2.0, delta=1e-6, bounds=(0.05, 0.8)),
    # Scores clipped to the regressor's score_bounds sit exactly on these bounds.
    "PCOQS-at-0": lambda: PCOQS(epsilon=2.0, delta=1e-6, bounds=(0.0, 0.8)),
    "PCOQS-at-1": lambda: PCOQS(epsilon=2.0, delta=1e-6, bounds=(0.2, 1.0)),
    "SplitConformal": SplitConformal,
}


class RecordingLedger:
    """A budget ledger that records what is spent."""

    def __init__(self):
        self.records = []

    def check(self, epsilon, delta):
        pass

    def spend(self, epsilon, delta):
        self.records.append((epsilon, delta))


@pytest.fixture(scope="module")
def client():
    with local_cluster(n_workers=1, threads_per_worker=2, processes=False) as client:
        yield client


@pytest.fixture(params=["gathered", "narrowed"])
def fetch_limit(request, monkeypatch):
    """Default limits (scores gathered at once), or tiny ones (every histogram pass)."""
    if request.param == "narrowed":
        monkeypatch.setattr(dask_statistics, "FETCH_LIMIT", 37)
        monkeypatch.setattr(dask_statistics, "HISTOGRAM_MIN_SCORES", 1000)
    return request.param


def classification_data(n=6000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] + X[:, 1] + rng.normal(size=n) > 0).astype(int) + (X[:, 2] > 1)
    return X, y


def regression_data(n=6000, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, X @ [1.0, -2.0, 0.5] + rng.normal(size=n)


def both_ways(make, X, y, chunks, groups=None, lazy_groups=False):
    """(in memory, on dask): two fresh estimators from ``make(ledger)``, same data."""
    memory_ledger, dask_ledger = RecordingLedger(), RecordingLedger()
    with warnings.catch_warnings(record=True) as memory_warnings:
        warnings.simplefilter("always")
        in_memory = make(memory_ledger).fit_calibrate(X, y, groups=groups)
    with warnings.catch_warnings(record=True) as dask_warnings:
        warnings.simplefilter("always")
        on_dask = fit_calibrate(
            make(dask_ledger),
            da.from_array(X, chunks=(chunks, X.shape[1])),
            da.from_array(y, chunks=chunks),
            groups=da.from_array(groups, chunks=chunks + 13) if lazy_groups else groups,
        )
    assert [type(w.message) for w in dask_warnings] == [type(w.message) for w in memory_warnings]
    assert dask_ledger.records == memory_ledger.records
    return in_memory, on_dask


def assert_same_release(in_memory, on_dask):
    assert on_dask.threshold_ == in_memory.threshold_
    assert on_dask.calibration_ == in_memory.calibration_
    assert on_dask.score_bounds_ == in_memory.score_bounds_


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
@pytest.mark.parametrize("score", ["lac", "aps", "raps"])
def test_classifier_release_equals_in_memory(client, fetch_limit, mechanism, score):
    X, y = classification_data()
    model = GaussianNB().fit(*classification_data(500, seed=9))

    def make(ledger):
        return PrivateConformalClassifier(
            model,
            mechanism=MECHANISMS[mechanism](),
            conformity_score=score,
            alpha=0.1,
            accountant=ledger,
            random_state=3,
        )

    in_memory, on_dask = both_ways(make, X, y, chunks=1777)
    assert_same_release(in_memory, on_dask)
    np.testing.assert_array_equal(on_dask.classes_, in_memory.classes_)
    np.testing.assert_array_equal(on_dask.predict_set(X[:200]), in_memory.predict_set(X[:200]))


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["ExponQ", "DPAPS", "SplitConformal"])
def test_many_partitions_release_equals_in_memory(client, fetch_limit, mechanism):
    """100 partitions: the count arrays (bin counts, key histograms) are summed on the
    workers in a reduction tree of three levels; the total, and so the release, are
    those in memory."""
    X, y = classification_data()
    model = GaussianNB().fit(*classification_data(500, seed=9))

    def make(ledger):
        return PrivateConformalClassifier(
            model, mechanism=MECHANISMS[mechanism](), accountant=ledger, random_state=11
        )

    assert_same_release(*both_ways(make, X, y, chunks=60))


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_heavily_tied_scores_release_equals_in_memory(client, fetch_limit, mechanism):
    # A depth-2 tree has at most 4 distinct probability vectors: thousands of equal scores.
    X, y = classification_data()
    model = DecisionTreeClassifier(max_depth=2, random_state=0).fit(X[:300], y[:300])

    def make(ledger):
        return PrivateConformalClassifier(
            model, mechanism=MECHANISMS[mechanism](), accountant=ledger, random_state=5
        )

    assert_same_release(*both_ways(make, X, y, chunks=1000))


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
@pytest.mark.parametrize("score_bounds", [(0.0, 4.0), (0.0, 3.0), (0.5, 2.0), None])
def test_regressor_release_equals_in_memory(client, fetch_limit, mechanism, score_bounds):
    # (0.5, 2.0) clips scores on both sides; None takes the range from the data; with
    # (0.0, 3.0) neighbouring scores share an image in [0, 1].
    X, y = regression_data()
    model = LinearRegression().fit(*regression_data(300, seed=8))

    def make(ledger):
        return PrivateConformalRegressor(
            model,
            mechanism=MECHANISMS[mechanism](),
            score_bounds=score_bounds,
            accountant=ledger,
            random_state=11,
        )

    in_memory, on_dask = both_ways(make, X, y, chunks=2500)
    assert_same_release(in_memory, on_dask)
    assert on_dask.threshold_at_upper_bound_ == in_memory.threshold_at_upper_bound_


@pytest.mark.parametrize("mechanism", ["ExponQ", "SplitConformal"])
def test_regressor_rows_sorted_by_score(client, mechanism):
    # Partitions hold increasing residuals: the owner diagnostics that compare the
    # threshold with the largest calibration score must see the largest of all rows.
    X, y = regression_data()
    model = LinearRegression().fit(*regression_data(300, seed=8))
    order = np.argsort(np.abs(y - model.predict(X)))
    X, y = X[order], y[order]

    def make(ledger):
        return PrivateConformalRegressor(
            model,
            mechanism=MECHANISMS[mechanism](),
            score_bounds=(0.0, 4.0),
            accountant=ledger,
            random_state=11,
        )

    in_memory, on_dask = both_ways(make, X, y, chunks=2500)
    assert_same_release(in_memory, on_dask)
    assert in_memory.calibration_.owner_diagnostics["threshold_above_every_score"] is False


FEDERATED = {
    "FedCPQQ": FedCPQQ,
    "FedCP2QQ": lambda: FedCP2QQ(epsilon=1.0),
    "FedCP2QQ-gamma": lambda: FedCP2QQ(epsilon=0.5, gamma=0.3),
}


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", sorted(FEDERATED))
@pytest.mark.parametrize("sizes", [(3, 200, 250), (900, 1400, 1100, 2600)])
def test_federated_release_equals_in_memory(client, fetch_limit, mechanism, sizes):
    # (3, 200, 250): every agent uses a random subset of 3 scores; rows are shuffled so
    # that each agent's rows (and subsets) span several partitions. The other sizes come
    # agent by agent: the first partitions miss some agents.
    n = sum(sizes)
    X, y = classification_data(n, seed=6)
    groups = np.repeat(np.arange(len(sizes)) * 10, sizes)
    if n < 1000:
        groups = np.random.default_rng(7).permutation(groups)
    model = GaussianNB().fit(*classification_data(500, seed=9))

    def make(ledger):
        return PrivateConformalClassifier(
            model, mechanism=FEDERATED[mechanism](), accountant=ledger, random_state=4
        )

    in_memory, on_dask = both_ways(
        make, X, y, chunks=97 if n < 1000 else 1500, groups=groups, lazy_groups=True
    )
    assert_same_release(in_memory, on_dask)


def test_dataframe_inputs(client):
    X, y = classification_data(3000)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    model = GaussianNB().fit(frame.iloc[:400], y[:400])

    def make():
        return PrivateConformalClassifier(model, mechanism=ExponQ(epsilon=1.0), random_state=2)

    in_memory = make().fit_calibrate(frame, y)
    lazy_X = dd.from_pandas(frame, npartitions=4)
    for lazy_y in (dd.from_pandas(pd.Series(y), npartitions=3), da.from_array(y, chunks=1000), y):
        assert_same_release(in_memory, fit_calibrate(make(), lazy_X, lazy_y))


def test_unknown_chunk_sizes(client):
    X, y = classification_data(3000)
    model = GaussianNB().fit(X[:400], y[:400])
    lazy_X = da.from_array(X, chunks=(500, 2))
    lazy_X = lazy_X[lazy_X[:, 0] > -np.inf]  # same rows, unknown chunk sizes
    in_memory = PrivateConformalClassifier(model, mechanism=DPAPS(epsilon=1.0), random_state=1)
    on_dask = PrivateConformalClassifier(model, mechanism=DPAPS(epsilon=1.0), random_state=1)
    assert_same_release(in_memory.fit_calibrate(X, y), fit_calibrate(on_dask, lazy_X, y))


# ----------------------------------------------------------------- bad input
def classifier_for_errors(ledger, **params):
    model = GaussianNB().fit(*classification_data(300, seed=4))
    params = {"mechanism": ExponQ(epsilon=1.0), **params}
    return PrivateConformalClassifier(model, accountant=ledger, random_state=0, **params)


def regressor_for_errors(ledger, **params):
    model = LinearRegression().fit(*regression_data(300, seed=4))
    params = {"mechanism": ExponQ(epsilon=1.0), "score_bounds": (0.0, 5.0), **params}
    return PrivateConformalRegressor(model, accountant=ledger, random_state=0, **params)


def in_memory_error(make, X, y, **kwargs):
    with pytest.raises((TypeError, ValueError)) as info:
        make(RecordingLedger()).fit_calibrate(X, y, **kwargs)
    return info.type, str(info.value)


def assert_dask_error(make, X, y, dask_X, dask_y, partition=None, **kwargs):
    """The dask path raises the in-memory error; nothing is fitted or spent.

    An error found in the rows of a partition names it: ``partition=(start, stop)``,
    with the in-memory message's row numbers counted from ``start``.
    """
    if partition is None:
        error, message = in_memory_error(make, X, y, **kwargs)
    else:
        start, stop = partition
        rows = {k: v[start:stop] for k, v in kwargs.items()}  # the partition's agent ids
        error, message = in_memory_error(make, X[start:stop], y[start:stop], **rows)
        message += f" [in rows {start}..{stop - 1} of X: row numbers above count from row {start}]"
    ledger = RecordingLedger()
    estimator = make(ledger)
    with pytest.raises(error) as info:
        fit_calibrate(estimator, dask_X, dask_y, **kwargs)
    assert str(info.value) == message
    assert ledger.records == []
    assert not hasattr(estimator, "calibration_") and not hasattr(estimator, "threshold_")


def test_nan_target(client):
    X, y = regression_data(1000)
    y[777] = np.nan
    lazy = da.from_array(X, chunks=(300, 3)), da.from_array(y, chunks=300)
    assert_dask_error(regressor_for_errors, X, y, *lazy, partition=(600, 900))


def test_nan_target_with_bounds_from_the_data(client):
    X, y = regression_data(1000)
    y[[430, 777]] = np.nan
    lazy = da.from_array(X, chunks=(300, 3)), da.from_array(y, chunks=300)

    def make(ledger):
        return regressor_for_errors(ledger, score_bounds=None)

    # The targets are checked first, as in memory: the error comes before the warning
    # about score_bounds=None (and before any budget is reserved).
    assert_dask_error(make, X, y, *lazy, partition=(300, 600))


def test_unknown_label(client):
    X, y = classification_data(1000)
    y[650] = 7
    lazy = da.from_array(X, chunks=(300, 4)), da.from_array(y, chunks=300)
    assert_dask_error(classifier_for_errors, X, y, *lazy, partition=(600, 900))


def test_boolean_targets(client):
    X, y = regression_data(1000)
    flags = y > 0
    lazy = da.from_array(X, chunks=(300, 3)), da.from_array(flags, chunks=300)
    assert_dask_error(regressor_for_errors, X, flags, *lazy, partition=(0, 300))


def test_length_mismatch(client):
    X, y = classification_data(1000)
    lazy_X = da.from_array(X, chunks=(300, 4))
    assert_dask_error(classifier_for_errors, X, y[:999], lazy_X, da.from_array(y[:999], chunks=300))
    assert_dask_error(classifier_for_errors, X, y[:999], lazy_X, y[:999])


def test_missing_target(client):
    X, _ = classification_data(100)
    assert_dask_error(classifier_for_errors, X, None, da.from_array(X, chunks=(30, 4)), None)


def test_groups_for_a_central_mechanism(client):
    X, y = classification_data(600)
    groups = np.arange(600) % 3
    lazy = da.from_array(X, chunks=(300, 4)), da.from_array(y, chunks=300)
    assert_dask_error(classifier_for_errors, X, y, *lazy, groups=groups)


def test_non_dask_features():
    X, y = classification_data(100)
    ledger = RecordingLedger()
    estimator = classifier_for_errors(ledger)
    with pytest.raises(TypeError, match="dask array or a dask DataFrame; got ndarray"):
        fit_calibrate(estimator, X, y)
    with pytest.raises(TypeError, match="dask DataFrame or a two-dimensional dask array"):
        fit_calibrate(estimator, dd.from_pandas(pd.Series(X[:, 0]), npartitions=2), y)
    with pytest.raises(ValueError, match="two-dimensional"):
        fit_calibrate(estimator, da.from_array(X[:, 0], chunks=30), y)
    with pytest.raises(TypeError, match="PrivateConformalClassifier or PrivateConformalRegressor"):
        fit_calibrate(GaussianNB(), da.from_array(X, chunks=(30, 4)), y)
    assert ledger.records == [] and not hasattr(estimator, "calibration_")


def test_bad_agent_ids(client):
    X, y = classification_data(900)
    lazy = da.from_array(X, chunks=(300, 4)), da.from_array(y, chunks=300)

    def make(ledger):
        return classifier_for_errors(ledger, mechanism=FedCPQQ())

    nan_ids = (np.arange(900) % 3).astype(float)
    nan_ids[[400, 500]] = np.nan
    assert_dask_error(make, X, y, *lazy, groups=nan_ids, partition=(300, 600))
    one_agent = np.zeros(900, dtype=int)
    assert_dask_error(make, X, y, *lazy, groups=one_agent)
    assert_dask_error(make, X, y, *lazy, groups=one_agent[:899])
    assert_dask_error(make, X, y, *lazy)


@pytest.mark.parametrize(
    "params, named",
    [
        ({"conformity_score": "aps_randomized"}, "randomised APS"),
        ({"mondrian": "class", "group_sizes": "public"}, "Mondrian"),
    ],
)
def test_unsupported_configurations_refused_before_reading(params, named):
    X, y = classification_data(100)
    ledger = RecordingLedger()
    estimator = classifier_for_errors(ledger, **params)
    reads = []

    def never_read(block):
        reads.append(block)
        return block

    lazy_X = da.from_array(X, chunks=(30, 4)).map_blocks(never_read, meta=np.empty((0, 4)))
    with pytest.raises(ValueError, match=named):
        fit_calibrate(estimator, lazy_X, y)
    assert reads == [] and ledger.records == [] and not hasattr(estimator, "calibration_")


def test_budget_checked_before_reading():
    class Exhausted(RecordingLedger):
        def check(self, epsilon, delta):
            raise RuntimeError("over budget")

    X, y = classification_data(100)
    estimator = classifier_for_errors(Exhausted())
    with pytest.raises(RuntimeError, match="over budget"):
        fit_calibrate(estimator, da.from_array(X, chunks=(30, 4)), y)
    assert not hasattr(estimator, "calibration_")


def test_quick_benchmark_runs_and_matches_in_memory(capsys):
    bench_dask = pytest.importorskip("benchmarks.bench_dask")
    pytest.importorskip("diffprivlib")
    result = bench_dask.main(["--quick", "--threads", "--workers", "1"])
    assert result["rows"] == result["baseline_rows"] == 10**5
    assert result["same_release"] is True
    assert result["addresses"] and all(
        a.startswith("tcp://127.0.0.1:") for a in result["addresses"]
    )
    assert 0.0 < result["coverage"] <= 1.0
    out = capsys.readouterr().out
    assert "identical release = True" in out and "load average" in out
