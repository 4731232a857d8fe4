"""The exact samplers: random bits, Bernoulli(exp(-gamma)), discrete Laplace, exponential.

Distribution tests compare counts with the exact probabilities (exact binomial tails,
false failure below 1e-7 per assertion); boundary tests script the random words so that
the exponential mechanism's uniform lands just below, just above or exactly on a
boundary of its inverse CDF, computed independently with :mod:`decimal`.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from privconf_sklearn._random import _discrete, check_noise_source
from privconf_sklearn.mechanisms.expon_q import quantile_penalties
from privconf_sklearn.privacy import DiscreteLaplaceMechanism, ExponentialMechanism
from privconf_sklearn.privacy._exponential import exact_penalties

from ._exact_sampling import (
    ScriptedSource,
    exponential_boundaries,
    exponential_probabilities,
    words_of,
)
from ._exact_tails import assert_counts_match


# ------------------------------------------------------------------------ bits
def test_words_are_reproducible_for_a_seed_and_fresh_from_the_os():
    first = check_noise_source(3).random_words(4)
    assert first.dtype == np.uint64 and first.shape == (4,)
    assert np.array_equal(first, check_noise_source(3).random_words(4))
    assert not np.array_equal(check_noise_source(4).random_words(4), first)
    crypto = check_noise_source(None)
    assert not np.array_equal(crypto.random_words(4), crypto.random_words(4))


def test_random_bits_are_the_top_bits_of_the_words():
    source = ScriptedSource([2**64 - 1, 5 << 61])
    assert source.random_bits(70) == (2**64 - 1) << 6 | 0b101000
    assert source.words_drawn == 2
    assert check_noise_source(0).random_bits(0) == 0
    assert 0 <= check_noise_source(0).random_bits(1) <= 1


def test_integers_below_rejects_out_of_range_top_bits():
    """bound 5 uses the top 3 bits of a word; 7 and 5 are redrawn, 2 is kept."""
    source = ScriptedSource([7 << 61, 5 << 61, 2 << 61 | 12345])
    assert source.integers_below(5, 1).tolist() == [2]
    assert source.words_drawn == 3
    assert check_noise_source(0).integers_below(1, 3).tolist() == [0, 0, 0]


@pytest.mark.parametrize("bound", [3, 10, 2**63, 2**64 + 13, 3**50])
def test_integers_below_are_uniform(bound):
    """Seven buckets floor(7 x / bound), whose exact sizes are known, on 70,000 draws."""
    draws = check_noise_source(bound % 1000).integers_below(bound, 70_000)
    assert draws.dtype == (np.int64 if bound <= 2**63 else object)
    assert min(draws) >= 0 and max(draws) < bound
    buckets = np.array([7 * int(x) // bound for x in draws])
    sizes = [math.ceil((b + 1) * bound / 7) - math.ceil(b * bound / 7) for b in range(7)]
    assert_counts_match(np.bincount(buckets, minlength=7), np.array(sizes) / bound)


# ------------------------------------------------------------ Bernoulli(exp(-g))
GAMMAS = [0, Fraction(1, 3), 1, 0.1, Fraction(5, 2), Fraction(7, 2) + Fraction(1, 2**80)]


@pytest.mark.parametrize("gamma", GAMMAS, ids=str)
@pytest.mark.parametrize(
    "size", [_discrete.SCALAR_BATCH, 300_000], ids=["one-by-one", "vectorised"]
)
def test_bernoulli_exp_has_probability_exp_minus_gamma(gamma, size):
    draws = check_noise_source(7).bernoulli_exp(gamma, size)
    assert draws.dtype == bool and draws.shape == (size,)
    p = math.exp(-float(Fraction(gamma)))
    assert_counts_match([int(draws.sum()), size - int(draws.sum())], [p, 1 - p])


def test_bernoulli_exp_distinguishes_close_gammas():
    """300,000 draws tell exp(-1/3) from exp(-0.34) (a wrong ratio would fail above)."""
    draws = check_noise_source(8).bernoulli_exp(Fraction(1, 3), 300_000)
    p_wrong = math.exp(-0.34)
    with pytest.raises(AssertionError):
        assert_counts_match([int(draws.sum()), int((~draws).sum())], [p_wrong, 1 - p_wrong])


# ----------------------------------------------------------- discrete Laplace
def _laplace_bins(scale: Fraction, edges: list[int]) -> np.ndarray:
    """P(Z in [e_i, e_{i+1})) for P(Z = z) proportional to rho^|z|, from the closed form."""
    rho = math.exp(-1 / float(scale))

    def at_least(k):  # P(Z >= k)
        return rho**k / (1 + rho) if k >= 0 else 1 - rho ** (1 - k) / (1 + rho)

    cdf = [1 - at_least(e) for e in edges]
    return np.diff([0.0, *cdf, 1.0])


SCALES = {
    "5/2": Fraction(5, 2),
    "600/0.1 (t = 75 2^58)": Fraction(600) / Fraction(0.1),
    "1 + 2^-70 (odd t > 2^63)": Fraction(1) + Fraction(1, 2**70),
}
SIZES = {"one-by-one": _discrete.SCALAR_BATCH, "vectorised": 200_000}


@pytest.mark.parametrize("scale", list(SCALES.values()), ids=list(SCALES))
@pytest.mark.parametrize("size", list(SIZES.values()), ids=list(SIZES))
def test_discrete_laplace_follows_its_pmf(scale, size):
    if scale.numerator >= 2**63:  # Python-int arithmetic in the vectorised path: fewer draws
        size = min(size, 20_000)
    draws = check_noise_source(11).discrete_laplace(scale, size)
    assert draws.dtype == np.int64 and draws.shape == (size,)
    width = max(1, round(float(scale) / 2))
    edges = [width * k for k in range(-6, 7)]
    observed = np.bincount(np.searchsorted(edges, draws, side="right"), minlength=len(edges) + 1)
    assert_counts_match(observed, _laplace_bins(scale, edges))


def test_discrete_laplace_beyond_int64_returns_python_ints():
    draws = check_noise_source(0).discrete_laplace(Fraction(10**30), 50)
    assert draws.dtype == object and all(isinstance(v, int) for v in draws)
    assert max(abs(v) for v in draws) > 2**63  # |Z| < 2^63 has probability ~1e-11 here


def test_discrete_laplace_is_reproducible_and_shaped():
    first = check_noise_source(5).discrete_laplace(3, (2, 3))
    assert first.shape == (2, 3)
    assert np.array_equal(first, check_noise_source(5).discrete_laplace(3, (2, 3)))


@pytest.mark.parametrize("bad", [0, -1, math.inf, math.nan, "1", True, None])
def test_bad_sampler_parameters_are_named(bad):
    source = check_noise_source(0)
    with pytest.raises(ValueError, match="scale"):
        source.discrete_laplace(bad, 3)
    with pytest.raises(ValueError, match="rate"):
        source.exponential_mechanism([0, 1], 1, bad)
    if bad != 0:
        with pytest.raises(ValueError, match="gamma"):
            source.bernoulli_exp(bad, 3)


# ------------------------------------------------------ exponential mechanism
EXPONENTIAL_CASES = {  # penalties, denominator, rate, draws
    "small": ([0, 3, 1, 7, 0, 2], 2, Fraction(9, 10), 20_000),
    "python ints": ([2**70, 2**70 + 1, 2**70 + 3, 2**71], 1, 1.0, 10_000),
    "huge penalties and denominator": ([0, 2**1100, 3 * 2**1099], 2**1100, 1.0, 10_000),
    "huge rate": ([5, 5, 6], 1, 1e300, 10_000),
    # rate below the float range: every draw goes through the refinement
    "subnormal rate": ([0, 2**1100, 3 * 2**1099], 1, Fraction(1, 2**1100), 300),
}
SLOW_CASES = {"subnormal rate"}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(case, marks=pytest.mark.slow) if case in SLOW_CASES else case
        for case in sorted(EXPONENTIAL_CASES)
    ],
)
def test_exponential_mechanism_follows_its_distribution(case):
    penalties, denominator, rate, n_draws = EXPONENTIAL_CASES[case]
    source = check_noise_source(13)
    draws = [source.exponential_mechanism(penalties, denominator, rate) for _ in range(n_draws)]
    expected = exponential_probabilities(penalties, denominator, rate)
    assert_counts_match(np.bincount(draws, minlength=len(penalties)), expected)


def test_exponential_mechanism_large_range_follows_its_distribution():
    """m = 10^5 candidates (one float pass each): draws grouped into 10 index blocks."""
    penalties = np.random.default_rng(0).integers(0, 3000, size=10**5)
    rate = Fraction(1, 1000)
    weights = np.exp(-penalties / 1000.0)  # exact to 1e-15 relative; blocks are large
    blocks = weights.reshape(10, -1).sum(axis=1) / weights.sum()
    source = check_noise_source(14)
    draws = [source.exponential_mechanism(penalties, 1, rate) // 10**4 for _ in range(1000)]
    assert_counts_match(np.bincount(draws, minlength=10), blocks)


def _boundary_probe(penalties, denominator, rate, boundary: Fraction, offset: Fraction):
    """The draw and the words used when U = boundary + offset (dyadic, 1024 bits)."""
    u = boundary + offset
    source = ScriptedSource(words_of(u, 16))
    index = source.exponential_mechanism(penalties, denominator, rate)
    return index, source.words_drawn


@pytest.mark.parametrize(
    ("penalties", "denominator", "rate"),
    [([0, 3, 1, 7, 0, 2], 2, Fraction(9, 10)), ([40, 0, 90, 1, 400], 1, 1.0)],
)
def test_uniform_just_below_or_above_a_boundary_gives_the_exact_side(penalties, denominator, rate):
    """U = F_j / Z -+ 2^-300: index j, then j + 1; the float pass cannot tell, the refinement does.

    The weights here reach exp(-400) ~ 2^-577, so the last boundaries differ from 1 by
    less than 2^-300 and are probed 2^-700 away.
    """
    boundaries = exponential_boundaries(penalties, denominator, rate, digits=300)
    for j, boundary in enumerate(boundaries):
        gap = min(
            boundary - (boundaries[j - 1] if j else 0),
            (boundaries[j + 1] if j + 1 < len(boundaries) else 1) - boundary,
        )
        offset = Fraction(1, 2**300) if gap > Fraction(1, 2**290) else Fraction(1, 2**700)
        below, words_below = _boundary_probe(penalties, denominator, rate, boundary, -offset)
        above, words_above = _boundary_probe(penalties, denominator, rate, boundary, offset)
        assert (below, above) == (j, j + 1)
        assert words_below > 1 and words_above > 1  # decided by the refinement


def test_float_rounding_never_decides_a_draw():
    """U between a float64 boundary (the float pass's own arithmetic) and the exact one.

    2000 candidates: the float cumulative sums are off by up to ~1e-13; wherever a float
    boundary misses the exact one by more than 2^-60, U is put halfway between them. A
    sampler trusting the floats would return the wrong side there.
    """
    penalties = np.random.default_rng(3).integers(0, 50, size=2000)
    rate = Fraction(1, 10)
    cumulative = np.cumsum(np.exp(-(penalties.astype(float) * 0.1)))
    floats = [Fraction(float(c)) / Fraction(float(cumulative[-1])) for c in cumulative[:-1]]
    exact = exponential_boundaries(penalties, 1, rate, digits=40)
    probed = 0
    for j, (approximate, boundary) in enumerate(zip(floats, exact, strict=True)):
        if abs(approximate - boundary) > Fraction(1, 2**60) and probed < 25:
            u = (approximate + boundary) / 2
            index = ScriptedSource(words_of(u, 4)).exponential_mechanism(penalties, 1, rate)
            assert index == (j if u < boundary else j + 1)
            probed += 1
    assert probed == 25


def test_uniform_exactly_on_a_dyadic_boundary_belongs_to_the_upper_candidate():
    """Equal weights: F_0 / Z = 1/2 exactly; U = 1/2 draws 1, U = 1/2 - 2^-1024 draws 0."""
    assert ScriptedSource(words_of(Fraction(1, 2), 16)).exponential_mechanism([4, 4], 1, 1.0) == 1
    just_below = Fraction(1, 2) - Fraction(1, 2**1024)
    assert ScriptedSource(words_of(just_below, 16)).exponential_mechanism([4, 4], 1, 1.0) == 0


def test_one_word_decides_a_uniform_far_from_every_boundary():
    boundaries = exponential_boundaries([0, 1, 2], 1, 1.0)
    middle = (boundaries[0] + boundaries[1]) / 2
    source = ScriptedSource(words_of(middle, 1))
    assert source.exponential_mechanism([0, 1, 2], 1, 1.0) == 1
    assert source.words_drawn == 1


def test_exponential_mechanism_is_reproducible():
    draws = [check_noise_source(s).exponential_mechanism([0, 1, 2, 3], 1, 0.5) for s in range(40)]
    again = [check_noise_source(s).exponential_mechanism([0, 1, 2, 3], 1, 0.5) for s in range(40)]
    assert draws == again and len(set(draws)) > 1


@pytest.mark.parametrize(
    ("penalties", "denominator", "match"),
    [
        ([], 1, "penalties"),
        ([[0, 1]], 1, "penalties"),
        ([0, -1], 1, "penalties"),
        ([0.0, 1.0], 1, "penalties"),
        ([True, False], 1, "penalties"),
        (np.array([0, "a"], dtype=object), 1, "penalties"),
        ([0, 1], 0, "denominator"),
        ([0, 1], True, "denominator"),
        ([0, 1], 1.0, "denominator"),
    ],
)
def test_bad_penalties_and_denominators_are_named(penalties, denominator, match):
    with pytest.raises(ValueError, match=match):
        check_noise_source(0).exponential_mechanism(penalties, denominator, 1.0)


# ------------------------------------------------- ExponentialMechanism.select
def test_float_utilities_become_exact_integer_penalties():
    rng = np.random.default_rng(0)
    for utilities in (
        rng.normal(size=50) * 10.0 ** rng.integers(-30, 30, size=50),
        np.array([0.0, -0.0, 5e-324, -1e300, 1e300]),
        np.array([3.0, 3.0]),
        np.array([2.0**70, 2.0**75]),
    ):
        penalties, denominator = exact_penalties(utilities)
        top = Fraction(float(utilities.max()))
        assert all(
            Fraction(int(a), denominator) == top - Fraction(float(u))
            for a, u in zip(penalties, utilities, strict=True)
        )


def test_select_draws_the_exact_distribution_of_float_utilities():
    utilities = np.array([0.0, -0.1, -2.5, 0.3, -1e-9])
    mechanism = ExponentialMechanism(1.3, 0.7, analysis="standard")
    source = check_noise_source(21)
    draws = [mechanism.select(utilities, source) for _ in range(10_000)]
    assert_counts_match(
        np.bincount(draws, minlength=5), np.exp(mechanism.log_probabilities(utilities))
    )


def test_select_penalties_uses_the_exact_rate():
    mechanism = ExponentialMechanism(0.1, 3.0, analysis="standard")
    assert mechanism.exact_rate == Fraction(0.1) / 6
    source = check_noise_source(22)
    draws = [mechanism.select_penalties([0, 30, 90], 1, source) for _ in range(10_000)]
    expected = exponential_probabilities([0, 30, 90], 1, mechanism.exact_rate)
    assert_counts_match(np.bincount(draws, minlength=3), expected)


# ------------------------------------------------ DiscreteLaplaceMechanism
def test_discrete_laplace_mechanism_distribution_functions():
    mechanism = DiscreteLaplaceMechanism(0.7, 3)
    z = np.arange(-400, 401)
    pmf = np.exp(mechanism.noise_log_pmf(z))
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
    assert mechanism.scale == Fraction(3) / Fraction(0.7)
    for x in (-50.5, -3, -0.2, 0, 0.9, 2, 41.7):
        below = pmf[z <= x].sum()
        assert np.exp(mechanism.noise_log_cdf(x)) == pytest.approx(below, rel=1e-12, abs=1e-300)
        assert np.exp(mechanism.noise_log_sf(x)) == pytest.approx(1 - below, rel=1e-9)
    assert mechanism.noise_log_pmf(0.5) == -np.inf
    assert mechanism.noise_log_cdf(-np.inf) == -np.inf and mechanism.noise_log_sf(np.inf) == -np.inf


@pytest.mark.parametrize(
    ("epsilon", "sensitivity", "probability"),
    [(0.7, 3, 1e-3), (5.0, 1, 0.2), (0.01, 1000, 1e-9), (1.0, 1, 0.45), (76.0, 2, 0.125)],
)
def test_noise_isf_is_the_smallest_integer_with_the_tail(epsilon, sensitivity, probability):
    mechanism = DiscreteLaplaceMechanism(epsilon, sensitivity)
    c = mechanism.noise_isf(probability)
    rho = math.exp(-epsilon / sensitivity)
    assert rho ** (c + 1) / (1 + rho) <= probability
    assert c == 0 or rho**c / (1 + rho) > probability
    assert mechanism.tail_bound(probability, 4) == mechanism.noise_isf(probability / 8)


def test_discrete_laplace_mechanism_is_exactly_epsilon_dp():
    """Neighbouring count vectors (l1 distance Delta): loss over integer outputs is epsilon."""
    epsilon, delta = 0.8, 3
    mechanism = DiscreteLaplaceMechanism(epsilon, delta)
    first, second = np.array([10, 4, 7]), np.array([11, 2, 7])  # l1 distance 3
    grid = np.stack(np.meshgrid(*(np.arange(-40, 60),) * 3, indexing="ij"), axis=-1).reshape(-1, 3)
    log_first = mechanism.noise_log_pmf(grid - first).sum(axis=1)
    log_second = mechanism.noise_log_pmf(grid - second).sum(axis=1)
    loss = np.max(np.abs(log_first - log_second))
    assert loss == pytest.approx(epsilon, rel=1e-12)


def test_randomise_adds_integer_noise_to_integers_only():
    mechanism = DiscreteLaplaceMechanism(1.0, 2)
    released = mechanism.randomise(np.array([5, 6]), random_state=3)
    noise = mechanism.sample_noise(2, random_state=3)
    assert released.dtype == np.int64 and np.array_equal(released, np.array([5, 6]) + noise)
    assert mechanism.randomise([2**70, 1], random_state=0).dtype == object
    for bad in (np.array([1.0, 2.0]), [True, False], ["1"]):
        with pytest.raises(ValueError, match="values must be integers"):
            mechanism.randomise(bad, random_state=0)
    with pytest.raises(ValueError, match="probability"):
        mechanism.noise_isf(1.0)
    guarantee = mechanism.privacy_guarantee()
    assert guarantee.epsilon == 1.0 and "exactly" in guarantee.description


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"epsilon": 0.0, "l1_sensitivity": 1}, ValueError, "epsilon"),
        ({"epsilon": math.inf, "l1_sensitivity": 1}, ValueError, "epsilon"),
        ({"epsilon": 1.0, "l1_sensitivity": "4"}, TypeError, "l1_sensitivity"),
        ({"epsilon": 1.0, "l1_sensitivity": -2}, ValueError, "l1_sensitivity"),
        ({"epsilon": 1.0, "l1_sensitivity": 1, "adjacency": "swap"}, ValueError, "adjacency"),
    ],
)
def test_discrete_laplace_mechanism_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        DiscreteLaplaceMechanism(**kwargs)


@pytest.mark.parametrize("scaling", ["tight", "paper"])
def test_quantile_penalties_are_exact_beyond_int64(scaling):
    """ExponQ's integer penalties switch to Python ints when 2^30 n reaches 2^63."""
    counts = np.array([2**33, 5, 2**34, 0])
    penalties, denominator = quantile_penalties(counts, 0.75, scaling)
    assert penalties.dtype == object
    k, scale = 3 * 2**28, 2**30
    below = [0, 2**33, 2**33 + 5, 2**33 + 5 + 2**34]
    above = [5 + 2**34, 2**34, 0, 0]
    expected = [max((scale - k) * b, k * a) for b, a in zip(below, above, strict=True)]
    assert penalties.tolist() == expected
    assert denominator == (scale if scaling == "tight" else k)
    small, _ = quantile_penalties(np.array([3, 5, 2, 0]), 0.75, scaling)
    assert small.dtype == np.int64
