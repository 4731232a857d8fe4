"""Exact privacy of ExponQ: the full output distribution on neighbouring score sets.

The released threshold is a bin edge whose distribution is computed exactly
(``ExponQ.threshold_distribution``, or ``quantile_log_probabilities`` at a fixed level),
so the privacy loss is checked exactly (max log-ratio over outputs), for every scaling,
under both adjacencies, with small ``n``, levels near 1/2 and near 1, ties and scores
exactly on bin edges. Under add/remove adjacency the level and the bins stay those of
the public ``n`` (see the user guide): the check holds them fixed. The sampler is then
checked against the exact distribution with exact binomial tails, and the distribution
the sampler realises is audited exactly (issue 24: the removed 53-bit sampler lost
1.386 epsilon at n = 200, alpha = 0.1, epsilon = 1; the exact one loses epsilon).
"""

import itertools
import math
import warnings
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import pytest

from privconf_sklearn._random import NoiseSource
from privconf_sklearn.mechanisms import ExponQ, UninformativeCalibrationWarning
from privconf_sklearn.mechanisms.expon_q import (
    SCALINGS,
    bin_counts,
    exponq_parameters,
    inflated_level,
    quantile_exponential_mechanism,
    quantile_log_probabilities,
    quantile_utilities,
)

from ._exact_sampling import ScriptedSource, exponential_boundaries, words_of
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


# --------------------------------------------- the released draw, audited exactly
# Issue 24's audit: at n = 200, alpha = 0.1, epsilon = 1 the distribution the *sampler*
# realises is compared on replace-one neighbours. The removed sampler drew one 53-bit
# uniform and searched float64 cumulative weights: each edge had probability (count of
# the 2^53 uniforms landing on it) / 2^53, so edges near 2^-53 got 0, 1, 4... uniforms
# and the loss reached log 4 = 1.386 epsilon (and was infinite where one side got 0).
AUDIT_N, AUDIT_ALPHA, AUDIT_EPSILON = 200, 0.1, 1.0


def _audit_pairs():
    """Six replace-one neighbour pairs of Beta scores (seed 2 reproduces the 1.386)."""
    rng = np.random.default_rng(2)
    for _ in range(6):
        scores = rng.beta(rng.uniform(0.5, 5), rng.uniform(0.5, 5), size=AUDIT_N)
        neighbour = scores.copy()
        neighbour[rng.integers(AUDIT_N)] = rng.choice([0.0, 1.0, rng.uniform()])
        yield scores, neighbour


def _removed_sampler_counts(scores) -> list[int]:
    """How many of the 2^53 uniforms of the removed sampler release each edge (exact).

    That sampler (at the level before rounding) computed ``cdf = cumsum(exp(lp -
    max(lp)))``, ``u = ((k + 0.5) / 2^53) cdf[-1]`` for a uniform integer ``k < 2^53`` and
    released ``min(searchsorted(cdf, u, "right"), m - 1)``; the release is monotone in
    ``k``, so each edge's set of ``k`` is an interval, found by bisection.
    """
    n_bins, gamma, _ = exponq_parameters(AUDIT_N, AUDIT_ALPHA, AUDIT_EPSILON)
    level = inflated_level(AUDIT_N, AUDIT_ALPHA, AUDIT_EPSILON, n_bins, gamma)
    counts = bin_counts(np.asarray(scores, dtype=float), n_bins)
    mechanism = quantile_exponential_mechanism(level, AUDIT_EPSILON, "tight")
    log_p = mechanism.log_probabilities(quantile_utilities(counts, level, "tight"))
    cdf = np.cumsum(np.exp(log_p - np.max(log_p)))
    firsts = [0]
    for boundary in cdf[:-1]:
        low, high = firsts[-1], 2**53
        while low < high:
            middle = (low + high) // 2
            if (np.float64(middle) + 0.5) / 2.0**53 * cdf[-1] >= boundary:
                high = middle
            else:
                low = middle + 1
        firsts.append(low)
    firsts.append(2**53)
    return [b - a for a, b in itertools.pairwise(firsts)]


class _RecordingSource(NoiseSource):
    """A seeded noise source that records the exact problem handed to the sampler."""

    def __init__(self):
        super().__init__(np.random.default_rng(0))
        self.problems = []

    def exponential_mechanism(self, penalties, denominator, rate):
        self.problems.append((np.asarray(penalties), int(denominator), Fraction(rate)))
        return super().exponential_mechanism(penalties, denominator, rate)


def _sampler_problem(scores, n_bins="auto", n=AUDIT_N, alpha=AUDIT_ALPHA, scaling="tight"):
    """``(penalties, D, rate)`` that ``ExponQ.calibrate`` hands the exact sampler.

    Recorded from a real calibration (the public parameters of ``n``; for a neighbour of
    another size the level and bins stay those of ``n``, as in the user guide's proof):
    the sampler draws edge ``j`` with probability exactly proportional to
    ``exp(-rate P_j / D)``.
    """
    mechanism = ExponQ(epsilon=AUDIT_EPSILON, n_bins=n_bins, scaling=scaling)
    source = _RecordingSource()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)  # top-edge draws
        mechanism.calibrate(np.asarray(scores, dtype=float), alpha, random_state=source)
    ((penalties, denominator, rate),) = source.problems
    return penalties, denominator, rate


def _exact_log_probabilities(
    scores, n_bins="auto", n=AUDIT_N, alpha=AUDIT_ALPHA, scaling="tight"
) -> tuple[list[Decimal], tuple]:
    """``log P(edge j)`` of the exact sampler, to 60 digits, and its penalties problem.

    From the problem the sampler is actually given (:func:`_sampler_problem`), in
    :mod:`decimal` arithmetic: no float enters the audited distribution.
    """
    problem = _sampler_problem(scores, n_bins, n, alpha, scaling)
    penalties, denominator, rate = problem
    context = Context(prec=60)
    scale = context.divide(Decimal(rate.numerator), Decimal(rate.denominator * denominator))
    exponents = [context.multiply(Decimal(int(a)), scale) for a in penalties]
    total = Decimal(0)
    for exponent in exponents:
        total = context.add(total, context.exp(exponent.copy_negate()))
    log_total = context.ln(total)
    log_probabilities = [context.subtract(e.copy_negate(), log_total) for e in exponents]
    return log_probabilities, problem


def test_removed_sampler_fails_the_exact_audit():
    """The 53-bit sampler: loss log 4 = 1.386 epsilon on finite edges, infinite on others."""
    finite, one_sided = 0.0, 0
    for scores, neighbour in _audit_pairs():
        first, second = _removed_sampler_counts(scores), _removed_sampler_counts(neighbour)
        both = [(a, b) for a, b in zip(first, second, strict=True) if a and b]
        finite = max(finite, *(abs(math.log(a / b)) for a, b in both))
        one_sided += sum((a == 0) != (b == 0) for a, b in zip(first, second, strict=True))
    assert finite == pytest.approx(math.log(4.0))
    assert finite > 1.3 * AUDIT_EPSILON and one_sided > 0


@pytest.mark.parametrize("scaling", ["tight", "shaped"])
def test_exact_sampler_passes_the_same_audit(scaling):
    """Max over edges and pairs of |log P_D(e) - log P_D'(e)| <= epsilon, to 50 digits.

    For the paper's utility (``"tight"``) and the shaped default, from the exact
    problem each release hands the sampler. The random pairs lose at most q~ = 0.964
    epsilon (tight). With three bins, the extremal pair of
    ``test_tight_loss_reaches_epsilon_under_replace_one`` (every score on the first
    edge, one moved to the top) reaches 1.000 epsilon for the tight utility, the bound;
    the shaped utility's loss on it is ``s_h + s_l`` minus the plateau's share, within
    the bound too.
    """
    extremal = np.full(AUDIT_N, 1.0 / 3.0)
    pairs = [(*pair, "auto") for pair in _audit_pairs()]
    pairs.append((extremal, np.r_[extremal[1:], 1.0], 3))
    losses = []
    for scores, neighbour, n_bins in pairs:
        first, _ = _exact_log_probabilities(scores, n_bins, scaling=scaling)
        second, _ = _exact_log_probabilities(neighbour, n_bins, scaling=scaling)
        losses.append(max(abs(a - b) for a, b in zip(first, second, strict=True)))
    assert max(losses) <= Decimal(AUDIT_EPSILON) + Decimal("1e-50")
    if scaling == "tight":
        assert round(losses[-1], 3) == Decimal("1.000")
    else:
        assert max(losses) >= Decimal("0.5")  # the pairs are not vacuous


@pytest.mark.parametrize(
    ("n", "alpha", "scaling"),
    [
        (200, 0.1, "paper"),
        (100, 0.1, "tight"),
        (1000, 0.05, "tight"),
        (500, 0.45, "paper"),
        (100, 0.1, "shaped"),
        (1000, 0.05, "shaped"),
        (500, 0.45, "shaped"),
    ],
)
def test_exact_sampler_audit_at_other_sizes_and_scalings(n, alpha, scaling):
    """The same exact audit, on Beta, tied and on-edge scores: loss <= epsilon (50 digits)."""
    rng = np.random.default_rng(n)
    n_bins = ExponQ(epsilon=AUDIT_EPSILON, scaling=scaling).resolve_parameters(n, alpha).n_bins
    worst = Decimal(0)
    for kind in ("continuous", "ties", "edges"):
        scores = _random_scores(rng, n, n_bins, kind)
        neighbour = _neighbour(rng, scores, n_bins, "replace")
        first, _ = _exact_log_probabilities(scores, "auto", n, alpha, scaling)
        second, _ = _exact_log_probabilities(neighbour, "auto", n, alpha, scaling)
        worst = max(worst, *(abs(a - b) for a, b in zip(first, second, strict=True)))
    assert worst <= Decimal(AUDIT_EPSILON) + Decimal("1e-50")


def test_exponq_releases_exactly_that_distribution_at_its_boundaries():
    """ExponQ.calibrate with its uniform scripted just below / above boundaries of the edges.

    On the first audit pair, at the edges where the removed sampler was off (a zero or
    a ratio beyond e^epsilon between neighbours) and at the two ends: U = F_j / Z - delta
    releases edge j, U = F_j / Z + delta edge j + 1, with delta far below the edges'
    probabilities (down to exp(-190) here). So the realised CDF is the exact one there.
    """
    scores, neighbour = next(_audit_pairs())
    first, second = _removed_sampler_counts(scores), _removed_sampler_counts(neighbour)
    off = [
        j
        for j, (a, b) in enumerate(zip(first, second, strict=True))
        if (a == 0) != (b == 0) or (a and b and abs(math.log(a / b)) > AUDIT_EPSILON)
    ]
    penalties, denominator, rate = _sampler_problem(scores)
    boundaries = exponential_boundaries(penalties, denominator, rate, digits=300)
    n_bins = len(penalties)
    probed = sorted({0, 1, n_bins - 3, n_bins - 2} | {j for j in off if j < n_bins - 1})
    assert len(probed) > 4
    mechanism = ExponQ(epsilon=AUDIT_EPSILON, scaling="tight")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)  # top-edge draws
        for j in probed:
            for offset, edge in ((-Fraction(1, 2**700), j + 1), (Fraction(1, 2**700), j + 2)):
                source = ScriptedSource(words_of(boundaries[j] + offset, 16))
                threshold = mechanism.calibrate(scores, AUDIT_ALPHA, random_state=source).threshold
                assert threshold == edge / n_bins
