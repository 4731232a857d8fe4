"""Monte Carlo coverage of SplitConformal and ExponQ against their theorems.

Each run draws a calibration set from a known score distribution, calibrates, and draws
one fresh test score: covered ~ Bernoulli(F(threshold)) given the threshold, so the
number of covered runs is exactly Binomial(runs, P(cover)). The theorems bound
P(cover) from below (Theorem 2 / split conformal) and above (Theorem 3 as its proof
gives it, with the atom term p_max), and the tolerances are exact binomial quantiles
(false failure 1e-7 per assertion).
"""

import warnings

import numpy as np
import pytest
from scipy import stats

from privconf_sklearn.mechanisms import ExponQ, SplitConformal, UninformativeCalibrationWarning

from ._stats import binomial_lower_limit, binomial_upper_limit

ATOMS = np.array([0.1, 0.3, 0.5, 0.7, 0.85, 0.95, 1.0])
ATOM_PROBABILITIES = np.array([0.3, 0.2, 0.15, 0.15, 0.1, 0.05, 0.05])


class ContinuousScores:
    """Beta(2, 2) scores (density at most 1.5)."""

    distribution = stats.beta(2.0, 2.0)

    def sample(self, rng, n):
        return rng.beta(2.0, 2.0, size=n)

    def cdf(self, t):
        return float(self.distribution.cdf(t))

    def atom(self):
        return 0.0

    def bin_mass(self, n_bins):
        edges = np.arange(n_bins + 1) / n_bins
        return float(np.diff(self.distribution.cdf(edges)).max())


class TiedScores:
    """Seven atoms carrying all the mass (heavily tied scores)."""

    def sample(self, rng, n):
        return rng.choice(ATOMS, size=n, p=ATOM_PROBABILITIES)

    def cdf(self, t):
        return float(ATOM_PROBABILITIES[ATOMS <= t].sum())

    def atom(self):
        return float(ATOM_PROBABILITIES.max())

    def bin_mass(self, n_bins):
        # Bins are [0, e_1], (e_{j-1}, e_j]; index of each atom's bin as in bin_counts.
        index = np.maximum(np.searchsorted(np.arange(n_bins + 1) / n_bins, ATOMS), 1)
        return float(np.bincount(index, weights=ATOM_PROBABILITIES).max())


DISTRIBUTIONS = {"continuous": ContinuousScores(), "tied": TiedScores()}
RUNS = {100: 4000, 1000: 3000, 10000: 2000}


def _monte_carlo(mechanism, distribution, n, alpha, seed):
    rng = np.random.default_rng(seed)
    covered = 0
    with warnings.catch_warnings():
        # Tied scores put mass on the top bin: some releases are (rightly) the top edge.
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        for _ in range(RUNS[n]):
            scores = distribution.sample(rng, n)
            calibration = mechanism.calibrate(scores, alpha, random_state=rng)
            covered += rng.uniform() <= distribution.cdf(calibration.threshold)
    return covered, calibration


def _check(covered, runs, lower, upper):
    assert covered >= binomial_lower_limit(runs, lower)
    assert covered <= binomial_upper_limit(runs, upper)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(DISTRIBUTIONS))
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2])
@pytest.mark.parametrize("n", [100, 1000, 10000])
def test_split_conformal_coverage(n, alpha, kind):
    distribution = DISTRIBUTIONS[kind]
    covered, calibration = _monte_carlo(SplitConformal(), distribution, n, alpha, seed=n)
    assert calibration.coverage_lower_bound >= 1 - alpha
    _check(
        covered,
        RUNS[n],
        calibration.coverage_lower_bound,
        calibration.upper_bound_with_atoms(distribution.atom()),
    )


def _check_expon_q(mechanism, distribution, n, alpha, seed):
    covered, calibration = _monte_carlo(mechanism, distribution, n, alpha, seed=seed)
    assert calibration.feasible
    assert calibration.coverage_lower_bound == pytest.approx(1 - alpha)
    upper = calibration.upper_bound_with_atoms(distribution.bin_mass(calibration.details["n_bins"]))
    _check(covered, RUNS[n], 1 - alpha, upper)
    return calibration


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(DISTRIBUTIONS))
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2, 0.45])
@pytest.mark.parametrize("n", [100, 1000, 10000])
def test_expon_q_coverage(n, alpha, kind):
    """The default (shaped) ExponQ: coverage >= 1 - alpha (the integrated lower-tail
    certificate) and <= its upper bound with the bins' atoms.

    At n = 100 the level is unreachable with epsilon = 1 at alpha = 0.05, so epsilon = 10
    there; alpha = 0.45 puts q~ near 1/2.
    """
    mechanism = ExponQ(epsilon=10.0 if n == 100 else 1.0)
    calibration = _check_expon_q(mechanism, DISTRIBUTIONS[kind], n, alpha, seed=n + 1)
    assert calibration.details["scaling"] == "shaped"


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(DISTRIBUTIONS))
@pytest.mark.parametrize("scaling", ["tight", "paper", "monotone"])
@pytest.mark.parametrize("n", [1000, 10000])
def test_paper_and_monotone_expon_q_coverage(n, scaling, kind):
    mechanism = ExponQ(epsilon=1.0, scaling=scaling)
    _check_expon_q(mechanism, DISTRIBUTIONS[kind], n, 0.1, seed=n + 2)


def test_expon_q_thresholds_are_bin_edges():
    rng = np.random.default_rng(0)
    for _ in range(20):
        calibration = ExponQ(epsilon=1.0).calibrate(rng.uniform(size=3000), 0.1, random_state=rng)
        m = calibration.details["n_bins"]
        assert calibration.threshold * m == pytest.approx(round(calibration.threshold * m))
