"""The single randomness policy: cryptographic by default, reproducible when seeded."""

import copy

import numpy as np
import pytest
from scipy import stats
from sklearn.linear_model import LinearRegression, LogisticRegression

# The randomness policy is a private module (users reach it through random_state only);
# it is the module under test here.
import privconf_sklearn._random._source as random_module
from privconf_sklearn import PrivateConformalClassifier, PrivateConformalRegressor
from privconf_sklearn._random import NoiseSource, check_noise_source, check_random_state
from privconf_sklearn.datasets import make_poisson_outliers, make_two_gaussians
from privconf_sklearn.mechanisms import ExponQ

from ._stats import FALSE_FAILURE


def test_none_reads_the_operating_system(monkeypatch):
    calls = []
    real = random_module.os.urandom

    def recording(size):
        calls.append(size)
        return real(size)

    monkeypatch.setattr(random_module.os, "urandom", recording)
    source = check_noise_source(None)
    assert source.cryptographic
    source.uniform(10)
    ExponQ(epsilon=1.0).calibrate(np.linspace(0, 1, 5000), 0.1)
    assert calls == [80, 8]


def test_crypto_draws_differ_between_calls():
    source = check_noise_source(None)
    assert not np.array_equal(source.uniform(4), source.uniform(4))


@pytest.mark.parametrize(
    "seed", [0, np.int64(3), np.random.default_rng(1), np.random.RandomState(2)]
)
def test_seeded_sources_are_reproducible(seed):
    first = check_noise_source(seed)
    assert not first.cryptographic
    if isinstance(seed, int | np.integer):
        assert np.array_equal(first.uniform(5), check_noise_source(seed).uniform(5))
    values = first.uniform((3, 4))
    assert values.shape == (3, 4)


def test_source_instance_passes_through():
    source = NoiseSource(np.random.default_rng(0))
    assert check_noise_source(source) is source


@pytest.mark.parametrize("bad", [-1, "0", 1.5, [1], True])
def test_bad_random_state(bad):
    with pytest.raises(ValueError, match="random_state"):
        check_noise_source(bad)


def test_random_state_of_a_generator_shares_and_advances_its_bits():
    generator = np.random.default_rng(4)
    drawn = check_random_state(generator).random_sample(3)
    assert np.array_equal(drawn, np.random.default_rng(4).random(3))
    assert generator.random() == np.random.default_rng(4).random(4)[3]


@pytest.mark.parametrize("random_state", [None, 0])
def test_uniform_laplace_normal_distributions(random_state):
    source = check_noise_source(random_state)
    u = source.uniform(50000)
    assert ((u > 0) & (u < 1)).all()
    assert stats.kstest(u, "uniform").pvalue > FALSE_FAILURE
    assert stats.kstest(source.laplace(2.0, 50000), stats.laplace(scale=2.0).cdf).pvalue > (
        FALSE_FAILURE
    )
    assert stats.kstest(source.normal(3.0, 50000), stats.norm(scale=3.0).cdf).pvalue > (
        FALSE_FAILURE
    )


def test_mechanism_noise_varies_without_seed():
    scores = np.random.default_rng(0).uniform(size=3000)
    thresholds = {ExponQ(epsilon=0.2).calibrate(scores, 0.1).threshold for _ in range(30)}
    assert len(thresholds) > 1


# ------------------------------------------------ random_state through the estimators
def _classification_data():
    X, y = make_two_gaussians(1600, random_state=0)
    return X[:1200], y[:1200], X[1200:]


def _regression_data():
    X, y = make_poisson_outliers(1600, random_state=0)
    return X[:1200], y[:1200], X[1200:]


# Every place an estimator draws from random_state: the randomised score's uniforms at
# calibration and prediction, the prefit=False split, Mondrian and plain noise.
ESTIMATOR_CASES = {
    "aps_randomized": (
        _classification_data,
        lambda rs, X, y: PrivateConformalClassifier(
            LogisticRegression().fit(X, y),
            mechanism=ExponQ(epsilon=1.0),
            conformity_score="aps_randomized",
            random_state=rs,
        ).fit_calibrate(X, y),
    ),
    "aps_randomized_mondrian": (
        _classification_data,
        lambda rs, X, y: PrivateConformalClassifier(
            LogisticRegression().fit(X, y),
            mechanism=ExponQ(epsilon=1.0),
            conformity_score="aps_randomized",
            mondrian="class",
            group_sizes="public",
            random_state=rs,
        ).fit_calibrate(X, y),
    ),
    "classifier_prefit_false": (
        _classification_data,
        lambda rs, X, y: PrivateConformalClassifier(
            LogisticRegression(), mechanism=ExponQ(epsilon=1.0), prefit=False, random_state=rs
        ).fit(X, y),
    ),
    "regressor_prefit_false": (
        _regression_data,
        lambda rs, X, y: PrivateConformalRegressor(
            LinearRegression(),
            mechanism=ExponQ(epsilon=1.0),
            score_bounds=(0.0, 50.0),
            prefit=False,
            random_state=rs,
        ).fit(X, y),
    ),
}


QUIET_BOUNDS = pytest.mark.filterwarnings("ignore::privconf_sklearn.ScoreBoundsWarning")


def _thresholds(estimator):
    return getattr(estimator, "threshold_", None), getattr(estimator, "group_thresholds_", None)


@QUIET_BOUNDS
@pytest.mark.parametrize("case", sorted(ESTIMATOR_CASES))
def test_estimators_accept_a_generator_and_are_reproducible_with_it(case):
    data, make = ESTIMATOR_CASES[case]
    X, y, X_test = data()
    runs = []
    for _ in range(2):
        rng = np.random.default_rng(0)
        estimator = make(rng, X, y)
        runs.append((_thresholds(estimator), estimator.predict_set(X_test)))
    np.testing.assert_equal(runs[0], runs[1])


def _peek(random_state) -> float:
    """The next uniform of a Generator or RandomState, without drawing it."""
    return copy.deepcopy(random_state).random()


@QUIET_BOUNDS
@pytest.mark.parametrize("case", sorted(ESTIMATOR_CASES))
@pytest.mark.parametrize("kind", [np.random.default_rng, np.random.RandomState])
def test_generator_and_random_state_are_advanced_by_every_draw(case, kind):
    data, make = ESTIMATOR_CASES[case]
    X, y, X_test = data()
    random_state = kind(0)
    before = _peek(random_state)
    estimator = make(random_state, X, y)
    after_fit = _peek(random_state)
    assert after_fit != before
    estimator.predict_set(X_test)
    randomised_sets = case.startswith("aps_randomized")
    assert (_peek(random_state) != after_fit) == randomised_sets
