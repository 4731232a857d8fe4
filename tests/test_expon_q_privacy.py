"""Exact privacy of ExponQ: the full output distribution on neighbouring score sets.

The released threshold is a bin edge whose distribution is computed exactly
(``ExponQ.threshold_distribution``, or ``quantile_log_probabilities`` at a fixed level),
so the privacy loss is checked exactly (max log-ratio over outputs), for every scaling,
under both adjacencies, with small ``n``, levels near 1/2 and near 1, ties and scores
exactly on bin edges. Under add/remove adjacency the level and the bins stay those of
the public ``n`` (see the user guide): the check holds them fixed. The sampler is then
checked against the exact distribution with exact binomial tails.
"""

import warnings

import numpy as np
import pytest

from privconf_sklearn.mechanisms import ExponQ, UninformativeCalibrationWarning
from privconf_sklearn.mechanisms.expon_q import (
    SCALINGS,
    bin_counts,
    quantile_log_probabilities,
)

from ._exact_tails import assert_counts_match
from ._privacy import privacy_loss

LEVELS = [0.01, 0.2, 0.5, 0.5001, 0.6, 0.75, 0.9, 0.95, 0.99, 0.999]
EPSILONS = [0.1, 1.0, 5.0]

#: The scalings of the paper's utility (the shaped default has its own tests).
PAPER_SCALINGS = tuple(s for s in SCALINGS if s != "shaped")


def _log_probabilities(scores, n_bins, q, epsilon, scaling):
    counts = bin_counts(np.asarray(scores, dtype=float), n_bins)
    return quantile_log_probabilities(counts, q, epsilon, scaling=scaling)


def _random_scores(rng, n, n_bins, kind):
    if kind == "ties":
        return rng.choice([0.0, 0.2, 0.2, 0.5, 0.9, 1.0], size=n)
    if kind == "edges":  # every score exactly on a bin edge
        return rng.integers(n_bins + 1, size=n) / n_bins
    return rng.beta(2.0, 5.0, size=n)


def _neighbour(rng, scores, n_bins, kind):
    """Add, remove or replace one score; the new score is often extreme or on an edge."""
    new = rng.choice([0.0, 1.0, rng.integers(n_bins + 1) / n_bins, rng.uniform()])
    if kind == "add":
        return np.append(scores, new)
    if kind == "remove":
        return np.delete(scores, rng.integers(scores.shape[0]))
    replaced = scores.copy()
    replaced[rng.integers(scores.shape[0])] = new
    return replaced


def _stated_epsilon(epsilon, scaling, adjacency):
    """The epsilon ExponQ states for itself under ``adjacency``."""
    guarantee = ExponQ(epsilon=epsilon, scaling=scaling).privacy_guarantee()
    return guarantee.under(adjacency).epsilon


def _worst_loss_over_stated(rng, scaling, kinds, adjacency, n_trials=30):
    """Max over random neighbours of the exact loss divided by the stated epsilon."""
    worst = 0.0
    for q in LEVELS:
        for epsilon in EPSILONS:
            stated = _stated_epsilon(epsilon, scaling, adjacency)
            for _ in range(n_trials):
                n = int(rng.choice([1, 2, 3, 5, 50, 400]))
                n_bins = int(rng.choice([2, 7, 50, 300]))
                data = rng.choice(["continuous", "ties", "edges"])
                scores = _random_scores(rng, n, n_bins, data)
                neighbour = _neighbour(rng, scores, n_bins, kinds[rng.integers(len(kinds))])
                if neighbour.size == 0:
                    continue
                p = _log_probabilities(scores, n_bins, q, epsilon, scaling)
                p_prime = _log_probabilities(neighbour, n_bins, q, epsilon, scaling)
                worst = max(worst, privacy_loss(p, p_prime) / stated)
    return worst


ADJACENCY_OF_KINDS = {("replace",): "replace-one", ("add", "remove"): "add/remove"}


@pytest.mark.parametrize("scaling", PAPER_SCALINGS)
@pytest.mark.parametrize("kinds", list(ADJACENCY_OF_KINDS), ids=["replace", "add-remove"])
def test_every_scaling_meets_its_stated_guarantee(scaling, kinds):
    """Max |log P(D) - log P(D')| <= the epsilon ExponQ states under that adjacency, for
    q in (0, 1) and any neighbour (monotone states 2 epsilon under replace-one). The
    shaped default is audited the same way in tests/test_expon_q_shaped.py."""
    rng = np.random.default_rng(len(kinds) + 10 * SCALINGS.index(scaling))
    adjacency = ADJACENCY_OF_KINDS[kinds]
    assert _worst_loss_over_stated(rng, scaling, kinds, adjacency) <= 1.0 + 1e-9


def test_monotone_scaling_needs_its_replace_one_restatement():
    """Documented caveat: replace-one moves utilities both ways, so monotone's epsilon
    stated for add/remove is exceeded there: the 2 epsilon of its restatement is needed."""
    rng = np.random.default_rng(2)
    assert _stated_epsilon(1.0, "monotone", "replace-one") > _stated_epsilon(
        1.0, "monotone", "add/remove"
    )
    over_add_remove = _worst_loss_over_stated(rng, "monotone", ("replace",), "add/remove")
    assert over_add_remove > 1.0


@pytest.mark.parametrize("q", [0.5, 0.7, 0.9, 0.99])
def test_tight_loss_reaches_epsilon_under_replace_one(q):
    """The extremal pair: every score on the first edge, one moved to the top edge.

    Edge 1 carries almost all the mass and its utility falls by q; the top edge's rises
    by 1 - q: the loss there is q + (1 - q) = 1 times epsilon, up to the normaliser's
    vanishing remainder. A mechanism spending 2 epsilon would fail the checks above.
    """
    epsilon, n_bins = 1.0, 3
    scores = np.full(5000, 1 / 3)
    moved = np.r_[scores[1:], 1.0]
    loss = privacy_loss(
        _log_probabilities(scores, n_bins, q, epsilon, "tight"),
        _log_probabilities(moved, n_bins, q, epsilon, "tight"),
    )
    assert loss == pytest.approx(_stated_epsilon(epsilon, "tight", "replace-one"), rel=1e-9)


def test_printed_algorithm_without_sensitivity_would_leak():
    """exp(-eps/2 * w) (no Delta_q, as printed) exceeds epsilon; ours does not."""
    scores = np.full(200, 0.5)
    neighbour = np.append(scores, 1.0)  # raises #{[s] > e_j} for every edge below 1
    q, epsilon, n_bins = 0.9, 1.0, 20

    def printed_loss():
        losses = []
        for data in (scores, neighbour):
            counts = bin_counts(data, n_bins).astype(float)
            cumulative = np.cumsum(counts)
            w = np.maximum((cumulative - counts) / q, (cumulative[-1] - cumulative) / (1 - q))
            log_w = -epsilon / 2 * w
            losses.append(log_w - np.logaddexp.reduce(log_w))
        return privacy_loss(*losses)

    assert printed_loss() > 3 * epsilon
    for scaling in PAPER_SCALINGS:
        ours = _log_probabilities(scores, n_bins, q, epsilon, scaling)
        ours_prime = _log_probabilities(neighbour, n_bins, q, epsilon, scaling)
        stated = _stated_epsilon(epsilon, scaling, "add/remove")
        assert privacy_loss(ours, ours_prime) <= stated * (1 + 1e-9)


@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize(
    ("n", "alpha"), [(60, 0.1), (100, 0.1), (300, 0.1), (1000, 0.1), (2400, 0.1), (500, 0.45)]
)
def test_full_mechanism_is_epsilon_dp_under_replace_one(n, alpha, scaling):
    """ExponQ.threshold_distribution on replace-one neighbours (the level from public n).

    Each scaling is checked against its own stated replace-one guarantee (monotone's is
    2 epsilon). An infeasible level releases the constant top of the range (zero
    privacy loss).
    """
    mechanism = ExponQ(epsilon=1.0, scaling=scaling)
    bound = mechanism.privacy_guarantee().under("replace-one").epsilon
    rng = np.random.default_rng(n + int(100 * alpha))
    n_bins = mechanism.resolve_parameters(n, alpha).n_bins or 10
    for _ in range(25):
        scores = _random_scores(rng, n, n_bins, rng.choice(["continuous", "ties", "edges"]))
        neighbour = _neighbour(rng, scores, n_bins, "replace")
        values, p = mechanism.threshold_distribution(scores, alpha)
        values_prime, p_prime = mechanism.threshold_distribution(neighbour, alpha)
        assert np.array_equal(values, values_prime)
        assert privacy_loss(p, p_prime) <= bound * (1 + 1e-9)
    if mechanism.resolve_parameters(n, alpha).n_bins is None:
        assert values.tolist() == [1.0] and p.tolist() == [0.0]


@pytest.mark.slow
@pytest.mark.parametrize("scaling", SCALINGS)
def test_sampler_matches_exact_distribution(scaling):
    """ExponQ.calibrate's outputs against threshold_distribution, exact binomial tails."""
    scores = np.random.default_rng(5).beta(5.0, 2.0, size=1000)
    gamma = "auto" if scaling == "shaped" else 0.1  # the shaped utility has no gamma
    mechanism = ExponQ(epsilon=0.5, n_bins=40, gamma=gamma, scaling=scaling)
    values, log_p = mechanism.threshold_distribution(scores, 0.1)
    generator = np.random.default_rng(6)
    draws = 6000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)  # top-edge draws
        thresholds = np.array(
            [
                mechanism.calibrate(scores, 0.1, random_state=generator).threshold
                for _ in range(draws)
            ]
        )
    index = np.searchsorted(values, thresholds)
    assert np.array_equal(values[index], thresholds)  # every release is an edge
    assert_counts_match(np.bincount(index, minlength=values.size), np.exp(log_p))
