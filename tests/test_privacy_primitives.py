"""The privacy primitives: exact privacy of each, their samplers, bounds and bad input.

- ExponentialMechanism: the output distribution is exact; on utility pairs whose
  changes fit the stated analysis, the largest log-ratio is at most epsilon, and it
  reaches epsilon on the extremal pair (so the check is sharp).
- LaplaceVectorMechanism: exact probabilities of product events (half-lines in every
  coordinate) from its noise CDF; the log-ratio is at most epsilon and reaches it.
- GaussianQueryComposer: the composition of its N queries is one Gaussian shift of
  sqrt(N) sensitivity / sigma; its hockey-stick divergence, integrated numerically,
  stays below the stated delta at the stated epsilon.
Samplers are checked against the exact distributions with exact tails (binomial per
cell, or the DKW band).
"""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from privconf_sklearn.privacy import (
    ExponentialMechanism,
    GaussianQueryComposer,
    LaplaceVectorMechanism,
    gaussian_delta,
)

from ._exact_tails import assert_counts_match, assert_sample_follows
from ._privacy import privacy_loss


# ------------------------------------------------------------ exponential mechanism
def _loss(mechanism, utilities, changed):
    first = mechanism.log_probabilities(utilities)
    return privacy_loss(first, mechanism.log_probabilities(changed))


def _changes(rng, analysis, m, size):
    """Utility changes allowed by an analysis with ``sensitivity = size``."""
    ends = rng.integers(3, size=m)  # many changes at the ends of the interval
    inside = np.where(ends == 0, 0.0, np.where(ends == 1, 1.0, rng.uniform(size=m)))
    if analysis == "range-bounded":
        return rng.uniform(-3, 3) * size + size * inside
    if analysis == "monotone":
        return size * inside * rng.choice([-1.0, 1.0])
    return size * (2.0 * inside - 1.0)


@pytest.mark.parametrize("analysis", ["standard", "monotone", "range-bounded"])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 7.0])
def test_exponential_mechanism_is_epsilon_dp_for_its_analysis(analysis, epsilon):
    rng = np.random.default_rng(int(10 * epsilon))
    worst = 0.0
    for _ in range(400):
        m = int(rng.choice([2, 3, 10, 50]))
        size = float(rng.choice([0.5, 1.0, 3.0]))
        mechanism = ExponentialMechanism(epsilon, size, analysis=analysis)
        utilities = rng.normal(scale=rng.choice([0.1, 5.0, 100.0]), size=m)
        changed = utilities + _changes(rng, analysis, m, size)
        stated = mechanism.privacy_guarantee().epsilon
        worst = max(worst, _loss(mechanism, utilities, changed) / stated)
    assert worst <= 1.0 + 1e-12


@pytest.mark.parametrize(
    ("analysis", "low", "high"),
    [("standard", -1.0, 1.0), ("monotone", 0.0, 1.0), ("range-bounded", -0.3, 0.7)],
)
def test_exponential_mechanism_loss_reaches_epsilon_and_the_check_has_power(analysis, low, high):
    """One unlikely candidate moves by the top of the interval, the others by its bottom.

    The ratio for that candidate is then e^epsilon up to the vanishing weight it carries
    in the normaliser. A mechanism whose range is half the true one loses 2 epsilon.
    """
    epsilon = 1.0
    mechanism = ExponentialMechanism(epsilon, 1.0, analysis=analysis)
    utilities = np.r_[-1e4, np.zeros(4)]
    changed = utilities + np.r_[high, np.full(4, low)]
    stated = mechanism.privacy_guarantee().epsilon
    assert _loss(mechanism, utilities, changed) == pytest.approx(stated, rel=1e-9)
    too_small = ExponentialMechanism(epsilon, mechanism.utility_range / 2, analysis="range-bounded")
    assert _loss(too_small, utilities, changed) == pytest.approx(2 * epsilon, rel=1e-9)


def test_exponential_mechanism_ranges():
    assert ExponentialMechanism(1.0, 3.0).utility_range == 6.0  # standard: 2 Delta
    assert ExponentialMechanism(1.0, 3.0, analysis="monotone").utility_range == 3.0
    assert ExponentialMechanism(1.0, 3.0, analysis="range-bounded").utility_range == 3.0
    guarantee = ExponentialMechanism(2.0, 1.0, adjacency="add/remove").privacy_guarantee()
    assert (guarantee.notion, guarantee.epsilon, guarantee.adjacency) == (
        "pure",
        2.0,
        "add/remove",
    )


@pytest.mark.parametrize("epsilon", [1e308, 1e300, 5e-324])
def test_exponential_mechanism_extreme_epsilon_is_never_nan(epsilon):
    mechanism = ExponentialMechanism(epsilon, 0.5)
    log_p = mechanism.log_probabilities([0.0, 3.0, 3.0, -1e300, 2.999])
    assert not np.isnan(log_p).any()
    assert np.exp(log_p).sum() == pytest.approx(1.0)
    if epsilon >= 1e300:  # all the mass on the two best candidates, evenly
        assert np.exp(log_p).tolist() == pytest.approx([0.0, 0.5, 0.5, 0.0, 0.0])


def test_exponential_mechanism_sampler_matches_its_distribution():
    mechanism = ExponentialMechanism(1.5, 1.0, analysis="range-bounded")
    utilities = np.array([0.0, -0.5, -1.0, -2.0, -4.0, -8.0])
    rng = np.random.default_rng(3)
    draws = [mechanism.select(utilities, random_state=rng) for _ in range(20000)]
    observed = np.bincount(draws, minlength=utilities.size)
    assert_counts_match(observed, np.exp(mechanism.log_probabilities(utilities)))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"epsilon": 0.0, "sensitivity": 1.0}, ValueError),
        ({"epsilon": math.inf, "sensitivity": 1.0}, ValueError),
        ({"epsilon": 10**400, "sensitivity": 1.0}, ValueError),
        ({"epsilon": "1", "sensitivity": 1.0}, TypeError),
        ({"epsilon": 1.0, "sensitivity": -1.0}, ValueError),
        ({"epsilon": 1.0, "sensitivity": 1.0, "analysis": "loose"}, ValueError),
        ({"epsilon": 1.0, "sensitivity": 1.0, "adjacency": "swap"}, ValueError),
    ],
)
def test_exponential_mechanism_bad_parameters(kwargs, error):
    with pytest.raises(error, match="ExponentialMechanism"):
        ExponentialMechanism(**kwargs)


@pytest.mark.parametrize("utilities", [[], [0.0, np.nan], [[0.0, 1.0]], [0.0, np.inf]])
def test_exponential_mechanism_bad_utilities(utilities):
    with pytest.raises(ValueError, match="utilities"):
        ExponentialMechanism(1.0, 1.0).log_probabilities(utilities)


# --------------------------------------------------------------------- Laplace
def _log_event(mechanism, values, thresholds, above):
    """log P(Y_i > t_i for i in above, Y_i <= t_i otherwise) with Y = values + noise."""
    gaps = thresholds - values
    return float(np.where(above, mechanism.noise_log_sf(gaps), mechanism.noise_log_cdf(gaps)).sum())


@pytest.mark.parametrize("epsilon", [0.2, 1.0, 5.0])
@pytest.mark.parametrize("l1_sensitivity", [1.0, 4.0, 20.0])
def test_laplace_vector_mechanism_is_epsilon_dp_on_product_events(epsilon, l1_sensitivity):
    """Exact event probabilities from the noise CDF, for neighbours at l1 distance Delta_1."""
    mechanism = LaplaceVectorMechanism(epsilon, l1_sensitivity)
    rng = np.random.default_rng(int(epsilon * 100 + l1_sensitivity))
    worst = 0.0
    for _ in range(300):
        d = int(rng.choice([1, 3, 20]))
        values = rng.normal(scale=10.0, size=d)
        shift = rng.dirichlet(np.ones(d)) * l1_sensitivity * rng.choice([-1.0, 1.0], size=d)
        thresholds = values + rng.normal(scale=3 * mechanism.scale, size=d)
        above = rng.integers(2, size=d).astype(bool)
        loss = privacy_loss(
            [_log_event(mechanism, values, thresholds, above)],
            [_log_event(mechanism, values + shift, thresholds, above)],
        )
        worst = max(worst, loss)
    stated = mechanism.privacy_guarantee().epsilon
    assert worst <= stated * (1 + 1e-9)
    # Sharp: half-lines beyond both inputs, on the side each coordinate moves to.
    d = 5
    values = np.zeros(d)
    shift = np.full(d, l1_sensitivity / d) * np.array([1, -1, 1, -1, 1])
    above = shift > 0
    thresholds = np.where(above, 10.0 * l1_sensitivity, -10.0 * l1_sensitivity)
    loss = _log_event(mechanism, values + shift, thresholds, above) - _log_event(
        mechanism, values, thresholds, above
    )
    assert loss == pytest.approx(stated, rel=1e-9)


def test_laplace_noise_follows_its_distribution_and_tail_bound():
    mechanism = LaplaceVectorMechanism(0.5, 3.0)
    assert mechanism.scale == 6.0
    values = np.linspace(-5, 5, 40000)
    noisy = mechanism.randomise(values, random_state=11)
    assert_sample_follows(noisy - values, stats.laplace(scale=6.0).cdf)
    beta, d = 1e-3, 20
    bound = mechanism.tail_bound(beta, d)
    assert bound == pytest.approx(6.0 * math.log(d / beta))
    per_coordinate = 2 * stats.laplace.sf(bound, scale=6.0)
    assert per_coordinate == pytest.approx(beta / d)
    assert 1 - (1 - per_coordinate) ** d <= beta


def test_laplace_bad_parameters():
    with pytest.raises(TypeError, match="l1_sensitivity"):
        LaplaceVectorMechanism(1.0, "4")
    with pytest.raises(ValueError, match="epsilon"):
        LaplaceVectorMechanism(-1.0, 4)


# -------------------------------------------------------------------- Gaussian
def _hockey_stick(mu, epsilon):
    """delta(epsilon) of N(mu, 1) against N(0, 1), by quadrature."""
    start = epsilon / mu + mu / 2.0
    value, _ = integrate.quad(
        lambda x: stats.norm.pdf(x, mu) - math.exp(epsilon) * stats.norm.pdf(x),
        start,
        start + 40.0,
        epsabs=1e-16,
        epsrel=1e-10,
        limit=200,
    )
    return value


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_queries": 34, "rho": 0.5},
        {"n_queries": 3, "rho": 0.02, "delta": 1e-9},
        {"n_queries": 52, "epsilon": 1.0, "delta": 1e-6},
        {"n_queries": 10, "epsilon": 4.0, "delta": 1e-5, "sensitivity": 2.0},
    ],
)
def test_gaussian_composition_meets_its_stated_epsilon_delta(kwargs):
    """N queries shifted by the sensitivity each: one Gaussian shift of norm sqrt(N) Delta.

    That pair is the worst case of the adaptive composition (Dong, Roth and Su 2022);
    its exact hockey-stick divergence at the stated epsilon must not exceed delta, and
    is tight (a slightly smaller epsilon exceeds it).
    """
    composer = GaussianQueryComposer(**kwargs)
    mu = math.sqrt(composer.n_queries) * composer.sensitivity / composer.noise_sd
    assert mu == pytest.approx(math.sqrt(2 * composer.rho))
    guarantee = composer.privacy_guarantee()
    assert (guarantee.notion, guarantee.rho) == ("zcdp", composer.rho)
    assert guarantee.delta == kwargs.get("delta", 1e-5)
    if "epsilon" in kwargs:
        assert guarantee.epsilon == kwargs["epsilon"]
    assert _hockey_stick(mu, guarantee.epsilon) <= guarantee.delta * (1 + 1e-7)
    assert _hockey_stick(mu, guarantee.epsilon * (1 - 1e-5)) > guarantee.delta
    assert gaussian_delta(guarantee.epsilon, mu) <= guarantee.delta


def test_gaussian_noise_and_union_tail_bound():
    composer = GaussianQueryComposer(34, rho=0.5)
    rng = np.random.default_rng(4)
    draws = np.concatenate([composer.noise(random_state=rng) for _ in range(1000)])
    assert draws.shape == (34000,)
    assert_sample_follows(draws, stats.norm(scale=composer.noise_sd).cdf)
    beta = 1e-3
    bound = composer.upper_tail_bound(beta)
    # Each noise exceeds the bound with probability beta / N exactly ...
    assert stats.norm.sf(bound, scale=composer.noise_sd) == pytest.approx(beta / 34)
    # ... so all N stay below it except with probability <= beta (and not much less).
    failure = 1 - stats.norm.cdf(bound, scale=composer.noise_sd) ** 34
    assert 0.98 * beta <= failure <= beta


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_queries": 3}, ValueError, "exactly one budget"),
        ({"n_queries": 3, "rho": 1.0, "epsilon": 1.0}, ValueError, "exactly one budget"),
        ({"n_queries": 0, "rho": 1.0}, ValueError, "n_queries"),
        ({"n_queries": 3.0, "rho": 1.0}, TypeError, "n_queries"),
        ({"n_queries": 3, "rho": 1.0, "delta": 0.0}, ValueError, "delta"),
    ],
)
def test_gaussian_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        GaussianQueryComposer(**kwargs)
