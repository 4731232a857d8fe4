"""The risk-control certificate, checked step by step, exactly, and by Monte Carlo.

The user guide (Conformal risk control) proves ``E[L_{n+1}(lambda_J)] <= (B + sum_theta
G_theta) / (n + 1)`` in three steps; each is checked here on its own:

- the tail bound ``P(S_J > theta) <= G_theta`` (attained exactly by the worst-case curve,
  never exceeded on random curves);
- the arithmetic: ``sum_theta G_theta = floor(tau) + Gamma(phi)``, computed independently
  by brute force, ``tau`` the largest multiple of 1/64 meeting the level, and the
  quantile case reducing to ``coverage >= (1 / (n + 1)) sum_r (1 - G(r))``;
- the whole certificate, exactly (no Monte Carlo), on every calibration set of small
  discrete distributions (random, and adversarial ones that approach the bound).

Then Monte Carlo over many calibration sets, with the exact conditional risk of each
release (the population is known), against the bound with an empirical Bernstein
tolerance (Maurer and Pontil 2009) at a false-failure probability of 1e-7 each.
"""

import itertools
import math

import numpy as np
import pytest
from scipy.special import gammaln

from privconf_sklearn.mechanisms import ExponCRC, ExponQ, LossCurve, SplitCRC
from privconf_sklearn.mechanisms._shaped import (
    TARGET_DENOMINATOR,
    Shape,
    certified_level,
    shaped_curve_log_probabilities,
)

from ._multilabel import make_multilabel, plan_of
from ._stats import FALSE_FAILURE


def _tail_bound(theta, shape: Shape, epsilon: float) -> float:
    """``G_theta`` of the user guide, written out."""
    if theta < math.floor(shape.target):
        return 1.0
    x = math.exp(-epsilon * float(shape.lower_slope) * (theta + 1 - shape.target) / shape.bound)
    return (shape.n_bins - 1) * x / (1 + (shape.n_bins - 1) * x)


@pytest.mark.parametrize(("n", "epsilon", "m", "resolution"), [(300, 1.0, 21, 1), (80, 2.0, 6, 3)])
def test_tail_bound_is_attained_by_the_worst_curve(n, epsilon, m, resolution):
    """Every candidate but the last at ``S = theta + 1``: ``P(S_J > theta) = G_theta``."""
    plan = plan_of(ExponCRC(epsilon), n, 0.3, m, resolution, 1.0)
    shape = plan.shape
    for theta in range(math.floor(shape.target), math.floor(shape.target) + 12):
        curve = np.r_[n * resolution, np.full(m - 1, theta + 1), 0]
        p = np.exp(shaped_curve_log_probabilities(curve, shape, epsilon))
        assert p[:-1].sum() == pytest.approx(_tail_bound(theta, shape, epsilon), rel=1e-12)


def test_tail_bound_holds_on_random_curves():
    rng = np.random.default_rng(0)
    for _ in range(150):
        n, m, resolution = (
            int(rng.integers(5, 400)),
            int(rng.integers(2, 60)),
            int(rng.integers(1, 5)),
        )
        epsilon = float(rng.choice([0.3, 1.0, 3.0]))
        plan = plan_of(ExponCRC(epsilon), n, 0.4, m, resolution, 1.0)
        if plan is None:
            continue
        sums = np.sort(rng.integers(0, n * resolution + 1, size=m))[::-1]
        sums[-1] = 0
        p = np.exp(ExponCRC(epsilon).release_distribution(LossCurve(sums, n, resolution, 1.0), 0.4))
        # P(S_J > theta) at theta = each distinct level just below a curve value
        for theta in np.unique(sums[sums > plan.shape.target]) - 1:
            theta = max(int(theta), math.floor(plan.shape.target))
            assert p[sums > theta].sum() <= _tail_bound(theta, plan.shape, epsilon) * (1 + 1e-12)


@pytest.mark.parametrize(
    ("n", "alpha", "epsilon", "m", "resolution"),
    [(100, 0.1, 1.0, 101, 1), (2000, 0.1, 0.5, 51, 1), (500, 0.2, 2.0, 11, 720720)],
)
def test_certificate_arithmetic(n, alpha, epsilon, m, resolution):
    """``(B + sum_theta G_theta) / (n + 1)`` summed term by term, and ``tau`` is largest.

    The certificate sums 64 terms and bounds the rest by an integral: it may overcharge
    by at most one unit in total, never undercharge. ``tau`` is the largest multiple of
    1/64 meeting the level up to the documented safety margin ``1e-9 (n + 1) level``.
    """
    plan = plan_of(ExponCRC(epsilon), n, alpha, m, resolution, 1.0)
    shape = plan.shape
    terms = 200_000
    theta = np.arange(math.floor(shape.target), math.floor(shape.target) + terms)
    rate = epsilon * float(shape.lower_slope) / shape.bound
    x = np.exp(-rate * (theta + 1 - float(shape.target)))
    g = (m - 1) * x / (1 + (m - 1) * x)
    # remainder beyond the summed terms: the integral bound of the decreasing tail
    remainder = math.log1p((m - 1) * math.exp(-rate * (theta[-1] + 1 - float(shape.target)))) / rate
    total = math.floor(shape.target) + math.fsum(g) + remainder
    brute = (resolution + total) / (n + 1)
    certified = certified_level(n, epsilon, shape)
    assert brute * (1 - 1e-12) <= certified <= brute + 1.0 / (n + 1)
    level = alpha * resolution
    assert certified <= level
    margin = math.ceil(1e-9 * (n + 1) * level * TARGET_DENOMINATOR) + 1
    larger = Shape(shape.lower_slope, shape.target + margin / TARGET_DENOMINATOR, m, resolution)
    assert certified_level(n, epsilon, larger) > level


@pytest.mark.parametrize(
    ("n", "alpha", "epsilon", "m"), [(100, 0.1, 1.0, 50), (1000, 0.05, 0.5, 300)]
)
def test_quantile_case_reduces_to_the_coverage_sum(n, alpha, epsilon, m):
    """B = 1: ``1 - certificate <= (1 / (n + 1)) sum_{r=1}^{n} (1 - G(r)) <= coverage``.

    ``G(r) = G_{n - r}`` bounds the probability that fewer than ``r`` scores are
    covered; the two sides differ only by the (vanishing) terms ``theta >= n`` the
    certificate also sums. ExponQ with the same grid and slope has the same target.
    """
    shape = plan_of(ExponCRC(epsilon, lower_slope=0.65), n, alpha, m, 1, 1.0).shape
    coverage_sum = sum(1 - _tail_bound(n - r, shape, epsilon) for r in range(1, n + 1)) / (n + 1)
    certificate = 1 - certified_level(n, epsilon, shape)
    beyond = sum(_tail_bound(theta, shape, epsilon) for theta in range(n, n + 10_000)) / (n + 1)
    # (the certificate rounds its tail sum up by a relative 1e-9)
    assert certificate <= coverage_sum <= certificate + beyond + 1e-8
    assert coverage_sum >= 1 - alpha
    quantile = ExponQ(epsilon, n_bins=m, lower_slope=0.65).resolve_parameters(n, alpha)
    assert quantile.target_rank == n - shape.target


# ----------------------------------------------------------- exact, small n
def _compositions(n: int, k: int):
    """Every ``(c_1..c_k)`` of non-negative integers summing to ``n``."""
    for bars in itertools.combinations(range(n + k - 1), k - 1):
        edges = (-1, *bars, n + k - 1)
        yield np.diff(edges) - 1


def exact_risk(mechanism, types, probabilities, n, alpha, resolution):
    """``E[L_{n+1}(lambda_J)]`` (loss units) when rows are drawn i.i.d. from ``types``.

    ``types`` (k, m) are integer loss rows in units of ``1 / resolution``: every
    calibration multiset is enumerated with its multinomial probability, the release's
    exact distribution is read, and the test row's expected loss at each candidate is
    ``probabilities @ types``.
    """
    test_loss = probabilities @ types / resolution
    log_p = np.log(np.maximum(probabilities, 1e-300))
    risk = 0.0
    for counts in _compositions(n, len(probabilities)):
        weight = math.exp(gammaln(n + 1) - gammaln(counts + 1).sum() + counts @ log_p)
        if weight < 1e-300:
            continue
        curve = LossCurve(counts @ types, n, resolution, 1.0)
        release = np.exp(mechanism.release_distribution(curve, alpha))
        risk += weight * (release @ test_loss)
    return risk


def _random_types(rng, k, m, resolution):
    types = np.sort(rng.integers(0, resolution + 1, size=(k, m)), axis=1)[:, ::-1]
    types[:, -1] = 0
    return types


def _adversarial_types(m, resolution):
    """A "never found" row (loss B until the last candidate), a "found at once" row, and
    rows that are missed until a step (a lattice stand-in for continuous scores)."""
    steps = [np.where(np.arange(m) < s, resolution, 0) for s in range(m)]
    return np.array([*steps, np.r_[np.full(m - 1, resolution), 0]])


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", [SplitCRC(), ExponCRC(4.0), ExponCRC(8.0, lower_slope=1.0)])
def test_certificate_holds_exactly_on_small_distributions(mechanism):
    """Exact risk <= certified bound on random and adversarial distributions (every
    calibration set of 7 rows enumerated); the bound is not vacuous on them."""
    rng = np.random.default_rng(7)
    n, m, resolution, alpha = 7, 5, 2, 0.45
    bound = mechanism.risk_certificate(n, alpha, m, resolution=resolution).upper_bound
    closest = 0.0
    for trial in range(8):
        if trial % 2:
            types = _random_types(rng, 3, m, resolution)
            probabilities = rng.dirichlet(np.ones(3))
        else:
            types = _adversarial_types(m, resolution)
            probabilities = rng.dirichlet(np.full(types.shape[0], 0.5))
        risk = exact_risk(mechanism, types, probabilities, n, alpha, resolution)
        assert risk <= bound + 1e-12
        closest = max(closest, risk / bound)
    assert closest >= 0.3


# ------------------------------------------------------------ Monte Carlo
def _bernstein_tolerance(values, false_failure=FALSE_FAILURE):
    """Maurer and Pontil (2009), Theorem 4, for values in [0, 1], one-sided."""
    t = values.shape[0]
    log_term = math.log(2.0 / false_failure)
    return math.sqrt(2 * values.var(ddof=1) * log_term / t) + 7 * log_term / (3 * (t - 1))


def _conditional_risks(mechanism, units, pool_loss, n, alpha, resolution, trials, seed):
    """The exact risk ``E[L(lambda_J) | calibration]`` of ``trials`` calibration sets of
    ``n`` rows drawn from the pool (the population: its mean loss is known)."""
    rng = np.random.default_rng(seed)
    risks = np.empty(trials)
    for t in range(trials):
        sums = units[rng.integers(units.shape[0], size=n)].sum(axis=0)
        release = mechanism.release_distribution(LossCurve(sums, n, resolution, 1.0), alpha)
        risks[t] = np.exp(release) @ pool_loss
    return risks


@pytest.fixture(scope="module")
def multilabel_pool():
    """A population of 4000 rows: a model's per-label probabilities and true labels."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.multioutput import MultiOutputClassifier

    from privconf_sklearn.scores import FalseNegativeRate

    X, Y = make_multilabel(6000, seed=1)
    model = MultiOutputClassifier(LogisticRegression()).fit(X[:2000], Y[:2000])
    proba = np.column_stack([p[:, 1] for p in model.predict_proba(X[2000:])])
    targets = Y[2000:].astype(bool)
    thresholds = np.r_[np.arange(0.99, -0.005, -0.01), -np.inf]
    missed = ~(proba[:, None, :] > thresholds[None, :, None]) & targets[:, None, :]
    fnr = missed.sum(axis=2) / targets.sum(axis=1)[:, None]  # (rows, candidates)
    resolution = 60  # lcm(1..5): every FNR is a multiple of 1/60
    units = np.rint(fnr * resolution).astype(np.int64)
    curve = FalseNegativeRate().loss_curve(proba, targets, thresholds)
    assert curve.resolution == resolution and np.array_equal(curve.sums, units.sum(axis=0))
    return units, fnr.mean(axis=0), resolution


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mechanism", "n"), [(ExponCRC(1.0), 500), (ExponCRC(0.5), 2000), (SplitCRC(), 500)]
)
def test_monte_carlo_false_negative_rate(multilabel_pool, mechanism, n):
    """Mean FNR of a new row <= bound, over 3000 calibration sets from a known population."""
    units, pool_loss, resolution = multilabel_pool
    alpha = 0.1
    risks = _conditional_risks(mechanism, units, pool_loss, n, alpha, resolution, 3000, n)
    bound = mechanism.risk_certificate(n, alpha, units.shape[1], resolution=resolution).upper_bound
    assert risks.mean() - _bernstein_tolerance(risks) <= bound


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mechanism", "n", "ratio"), [(ExponCRC(5.0), 500, 0.85), (SplitCRC(), 200, 0.97)]
)
def test_monte_carlo_nearly_tight(mechanism, n, ratio):
    """Continuous scores, a fine grid: the miss loss ``1{p_y <= t}`` comes close to the
    bound (the CRC step is tight for continuous 0/1 losses), and stays below it."""
    m, alpha, trials = 1001, 0.1, 4000
    grid = np.linspace(1, 0, m)  # thresholds, least conservative first
    # p_y uniform: the row is missed at the candidates t_j >= p_y; R(t_j) = t_j.
    rng = np.random.default_rng(n)
    counts = m - np.searchsorted(grid[::-1], rng.uniform(size=(trials, n)), side="left")
    risks = np.empty(trials)
    for t in range(trials):
        histogram = np.bincount(counts[t], minlength=m + 1)
        sums = np.cumsum(histogram[::-1])[::-1][1:]
        release = mechanism.release_distribution(LossCurve(sums, n, 1, 1.0), alpha)
        risks[t] = np.exp(release) @ grid
    bound = mechanism.risk_certificate(n, alpha, m, resolution=1).upper_bound
    tolerance = _bernstein_tolerance(risks)
    assert risks.mean() - tolerance <= bound
    assert risks.mean() + tolerance >= ratio * bound  # nearly tight
