"""Exact privacy of ExponCRC: the release's full distribution on neighbouring loss matrices.

The released candidate's distribution is computed exactly
(``ExponCRC.release_distribution``), so the privacy loss of a pair of neighbouring loss
matrices is the largest log-ratio over candidates. Replace-one pairs may replace a row
by one whose loss curve *crosses* it (the summed curve then moves up at some candidates
and down at others); add/remove pairs keep the release's parameters at the public ``n``
(the user guide, Conformal risk control). The sampler is then checked against the exact
distribution, and quantile calibration (ExponQ) is checked to be the special case of
the miscoverage loss, bit for bit.
"""

import warnings

import numpy as np
import pytest

from privconf_sklearn._random import check_noise_source
from privconf_sklearn.mechanisms import (
    ExponCRC,
    ExponQ,
    LossCurve,
    UninformativeCalibrationWarning,
)
from privconf_sklearn.mechanisms._shaped import sample_shaped, shaped_curve_log_probabilities
from privconf_sklearn.mechanisms.expon_q import bin_counts

from ._exact_tails import assert_counts_match
from ._multilabel import plan_of

EPSILONS = [0.1, 1.0, 4.0]
SLOPES = ["auto", 0.3, 0.5, 0.85, 1.0]
ALPHAS = [0.02, 0.1, 0.25, 0.5, 0.9, 0.98]


def _random_row(rng, m, top):
    """A non-increasing integer row in {0..top}, 0 at the last candidate."""
    kind = rng.integers(4)
    if kind == 0:  # extremal: top until a step, then 0
        row = np.where(np.arange(m) < rng.integers(m), top, 0)
    elif kind == 1:  # extremal: all zero
        row = np.zeros(m, dtype=np.int64)
    else:
        row = np.sort(rng.integers(top + 1, size=m))[::-1]
    row = np.asarray(row, dtype=np.int64)
    row[-1] = 0
    return row


def _crossing_pair(rng, m, top):
    """Two rows that cross: one high early and low late, the other the reverse shape."""
    a = rng.integers(1, m)
    b = rng.integers(a, m)
    early = np.where(np.arange(m) < a, top, 0)
    late = np.where(np.arange(m) < b, rng.integers(1, top + 1), 0)
    return early.astype(np.int64), late.astype(np.int64)


def _curve(rows, resolution, n=None):
    units = np.asarray(rows, dtype=np.int64)
    return LossCurve.from_units(units, resolution) if n is None else units.sum(axis=0)


def _pairs(rng, kind, n, m, top):
    """A loss matrix and a neighbour (replace / add / remove), as unit matrices."""
    rows = np.array([_random_row(rng, m, top) for _ in range(n)])
    if kind == "cross":
        old, new = _crossing_pair(rng, m, top)
        if rng.integers(2):
            old, new = new, old
        rows[0] = old
        neighbour = rows.copy()
        neighbour[0] = new
    elif kind == "replace":
        neighbour = rows.copy()
        neighbour[rng.integers(n)] = _random_row(rng, m, top)
    elif kind == "add":
        neighbour = np.vstack([rows, _random_row(rng, m, top)])
    else:
        neighbour = np.delete(rows, rng.integers(n), axis=0)
    return rows, neighbour


def _privacy_loss(p, q) -> float:
    """Largest |log P(j) - log Q(j)|; both infeasible (a point mass) gives 0."""
    assert np.array_equal(np.isneginf(p), np.isneginf(q))
    finite = np.isfinite(p)
    return float(np.max(np.abs(p[finite] - q[finite])))


def _replace_one_loss(rng, kinds, trials):
    worst = 0.0
    for _ in range(trials):
        n = int(rng.choice([1, 2, 3, 5, 20, 200]))
        m = int(rng.choice([2, 3, 5, 12, 40]))
        resolution = int(rng.choice([1, 2, 3, 7]))
        epsilon = float(rng.choice(EPSILONS))
        mechanism = ExponCRC(epsilon, lower_slope=SLOPES[rng.integers(len(SLOPES))])
        alpha = float(rng.choice(ALPHAS))
        rows, neighbour = _pairs(rng, kinds[rng.integers(len(kinds))], n, m, resolution)
        p = mechanism.release_distribution(LossCurve.from_units(rows, resolution), alpha)
        q = mechanism.release_distribution(LossCurve.from_units(neighbour, resolution), alpha)
        worst = max(worst, _privacy_loss(p, q) / epsilon)
    return worst


def _add_remove_loss(rng, trials):
    """Add/remove with the release's parameters (shape, S_0 = n Q) from the public n."""
    worst = 0.0
    for _ in range(trials):
        n = int(rng.choice([2, 3, 5, 20, 200]))
        m = int(rng.choice([2, 3, 5, 12, 40]))
        resolution = int(rng.choice([1, 2, 3, 7]))
        epsilon = float(rng.choice(EPSILONS))
        mechanism = ExponCRC(epsilon, lower_slope=SLOPES[rng.integers(len(SLOPES))])
        alpha = float(rng.choice(ALPHAS))
        plan = plan_of(mechanism, n, alpha, m, resolution, 1.0)
        if plan is None:
            continue
        rows, neighbour = _pairs(rng, ["add", "remove"][rng.integers(2)], n, m, resolution)
        curves = [np.concatenate([[n * resolution], r.sum(axis=0)]) for r in (rows, neighbour)]
        p, q = (shaped_curve_log_probabilities(c, plan.shape, epsilon) for c in curves)
        worst = max(worst, _privacy_loss(p, q) / epsilon)
    return worst


@pytest.mark.slow
@pytest.mark.parametrize("kinds", [("replace",), ("cross",)], ids=["random", "crossing"])
def test_replace_one_is_epsilon_dp(kinds):
    """Max |log P(D) - log P(D')| <= epsilon over random and crossing replacements."""
    rng = np.random.default_rng(len(kinds[0]))
    assert _replace_one_loss(rng, kinds, 800) <= 1.0 + 1e-9


@pytest.mark.slow
def test_add_remove_is_epsilon_dp():
    rng = np.random.default_rng(11)
    assert _add_remove_loss(rng, 800) <= 1.0 + 1e-9


@pytest.mark.parametrize("lower_slope", [0.3, 0.5, 0.8])
def test_extremal_replacement_reaches_epsilon(lower_slope):
    """The extremal pair: the audit is not vacuous and the range-1 analysis is tight.

    The curve sits at ``ceil(tau)`` on a long plateau, then at ``floor(tau) - 1 <= tau -
    1`` at the second-to-last candidate; a row of zeros becomes "B at every candidate
    but the last". The plateau's penalties rise by ``s_l`` while the last candidate's
    "above" penalty falls by ``s_h``: its log-probability moves by nearly ``(s_l + s_h)
    epsilon = epsilon`` (a sensitivity-2 analysis of the same utility would spend 2
    epsilon).
    """
    epsilon, m, n, alpha = 1.0, 400, 1000, 0.2
    mechanism = ExponCRC(epsilon, lower_slope=lower_slope)
    tau = plan_of(mechanism, n, alpha, m, 1, 1.0).shape.target
    high, low = int(np.ceil(tau)), int(np.floor(tau)) - 1
    rows = np.zeros((n, m), dtype=np.int64)
    rows[:high, : m - 1] = 1  # S_j = ceil(tau) up to candidate m - 2 ...
    rows[low:high, m - 2] = 0  # ... and floor(tau) - 1 at m - 1
    neighbour = rows.copy()
    neighbour[-1, : m - 1] = 1
    p = mechanism.release_distribution(LossCurve.from_units(rows, 1), alpha)
    q = mechanism.release_distribution(LossCurve.from_units(neighbour, 1), alpha)
    assert 0.98 * epsilon <= _privacy_loss(p, q) <= epsilon + 1e-9


@pytest.mark.slow
def test_sampler_matches_exact_distribution():
    """calibrate_curve's draws against release_distribution, exact binomial tails."""
    rng = np.random.default_rng(3)
    losses = np.clip(rng.uniform(size=(400, 1)) - np.linspace(0, 1, 30), 0, None)
    curve = LossCurve.from_losses(np.maximum.accumulate(losses[:, ::-1], axis=1)[:, ::-1])
    mechanism = ExponCRC(epsilon=0.3)
    probabilities = np.exp(mechanism.release_distribution(curve, 0.2))
    generator = np.random.default_rng(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        draws = [
            mechanism.calibrate_curve(curve, 0.2, random_state=generator).index for _ in range(6000)
        ]
    assert np.count_nonzero(probabilities > 1e-3) >= 5  # a spread-out distribution
    assert_counts_match(np.bincount(draws, minlength=curve.n_candidates), probabilities)


def test_sample_shaped_draws_in_proportion_to_exp_minus_epsilon_penalty():
    """``P(j) = exp(-epsilon a_j / D) / sum_k exp(-epsilon a_k / D)``, exact binomial tails.

    The expected probabilities are written out here, not taken from the library.
    """
    numerators, denominator, epsilon = np.array([3, 0, 1, 7, 2, 0]), 4, 1.5
    weights = np.exp(-epsilon * numerators / denominator)
    noise = check_noise_source(np.random.default_rng(11))
    draws = [sample_shaped(numerators, denominator, epsilon, noise) for _ in range(4000)]
    assert_counts_match(np.bincount(draws, minlength=6), weights / weights.sum())


@pytest.mark.parametrize(("n", "alpha", "epsilon"), [(200, 0.1, 1.0), (1000, 0.05, 0.5)])
@pytest.mark.parametrize("n_bins", [20, 137])
def test_quantile_is_the_miscoverage_special_case(n, alpha, epsilon, n_bins):
    """ExponCRC on L_i(e_j) = 1{s_i > e_j} over ExponQ's edges is ExponQ, bit for bit.

    Same shape (the same certificate with B = 1, resolution 1), same curve, the same
    function computes the distribution: quantile calibration is not a second copy.
    """
    scores = np.random.default_rng(n_bins).beta(2, 5, size=n)
    quantile = ExponQ(epsilon, n_bins=n_bins, lower_slope=0.65)
    values, log_p = quantile.threshold_distribution(scores, alpha)
    counts = bin_counts(scores, n_bins)
    binned = np.repeat(values, counts)  # each score rounded up to its edge
    losses = (binned[:, None] > values[None, :]).astype(float)
    risk = ExponCRC(epsilon, lower_slope=0.65)
    log_q = risk.release_distribution(LossCurve.from_losses(losses, resolution=1), alpha)
    assert np.array_equal(log_p, log_q)
