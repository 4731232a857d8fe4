"""The reproduction suite (``python -m benchmarks.reproduce``) runs and is right.

Every table runs in ``--quick`` mode (2 runs per cell) so the scripts cannot rot; the
pieces the tables rest on are checked exactly: the re-implementation of the authors'
public ExponQ against a brute-force evaluation of its definition, its sampler by a
chi-square test, the vectorised metrics against the estimator's ``predict_set``, the
tree-skeleton cache against diffprivlib's own fit, the split sizes against the
authors' ``train_test_split`` calls, and the transcribed paper numbers.
"""

import math
import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from benchmarks.reproduce import __main__ as cli
from benchmarks.reproduce._evaluate import SetMetrics
from benchmarks.reproduce._forest_cache import reuse_tree_skeletons
from benchmarks.reproduce._paper002_numbers import PAPER_TABLE4, PAPER_TABLES
from benchmarks.reproduce._public_code import (
    _draw_edges,
    _edge_index,
    edge_log_probabilities,
    public_gamma_roots,
    public_pcoqs_threshold,
    public_qtilde,
)
from benchmarks.reproduce.paper002 import TABLES, split_sizes
from privconf_sklearn._random import check_noise_source
from privconf_sklearn.metrics import mean_set_size, set_coverage, singleton_rate
from privconf_sklearn.scores import LAC

from ._stats import FALSE_FAILURE


def _brute_force_public_probabilities(scores, m, q, scale):
    """The public mechanism's edge probabilities, evaluated edge by edge on the full grid.

    Written from the definition: scores moved to the first edge of linspace(0, 1, m)
    strictly above them (the top edge for 1), cumulative counts with the top edge
    counting every score binned there, utility max(below / q, above / (1 - q)).
    """
    edges = np.linspace(0, 1, m)
    binned = np.array([min(int(np.sum(edges <= s)), m - 1) for s in scores])
    below = np.array([np.sum(binned < j) for j in range(m)], dtype=float)
    below[m - 1] = len(scores)
    above = np.array([np.sum(binned > j) for j in range(m)], dtype=float)
    log_weights = -scale * np.maximum(below / q, above / (1 - q))
    return log_weights - logsumexp(log_weights)


@pytest.mark.parametrize("seed", range(40))
def test_public_exponq_segments_equal_the_full_grid(seed):
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(3, 80)), int(rng.integers(1, 40))
    scores = np.sort(np.round(rng.uniform(size=n), int(rng.integers(1, 4))))
    if seed % 4 == 0:
        scores[-1] = 1.0
    q, scale = float(rng.uniform(0.5, 0.99)), float(rng.uniform(0.01, 3.0))
    start, length, log_mass = edge_log_probabilities(
        _edge_index(scores, np.array([m])), np.array([m]), np.array([q]), np.array([scale])
    )
    per_edge = np.full(m, -np.inf)
    for first, count, mass in zip(start[0], length[0], log_mass[0], strict=True):
        if count > 0:
            assert np.isneginf(per_edge[first : first + count]).all()  # disjoint
            per_edge[first : first + count] = mass - math.log(count)
    expected = _brute_force_public_probabilities(scores, m, q, scale)
    np.testing.assert_allclose(per_edge - logsumexp(per_edge), expected, atol=1e-9)


def test_public_exponq_sampler_matches_its_probabilities():
    m, draws = 40, 40000
    scores = np.array([0.1, 0.33, 0.5, 0.52, 0.9])
    q, scale = 0.7, 0.8
    index = _edge_index(scores, np.array([m]))
    start, length, log_mass = edge_log_probabilities(
        index, np.array([m]), np.array([q]), np.array([scale])
    )
    rows = np.repeat(np.arange(1), draws)
    edges = _draw_edges(start[rows], length[rows], log_mass[rows], check_noise_source(1))
    observed = np.bincount(edges, minlength=m)
    expected = draws * np.exp(_brute_force_public_probabilities(scores, m, q, scale))
    keep = expected > 5
    other = observed[~keep].sum(), expected[~keep].sum()
    chi2 = np.sum((observed[keep] - expected[keep]) ** 2 / expected[keep])
    chi2 += (other[0] - other[1]) ** 2 / max(other[1], 1e-300) if other[1] > 5 else 0.0
    assert stats.chi2.sf(chi2, keep.sum() - (0 if other[1] > 5 else 1)) > FALSE_FAILURE


def test_public_parameters_follow_the_published_formulas():
    n, alpha, epsilon = 2400, 0.1, 1.0
    small, large = sorted(public_gamma_roots(n, alpha, epsilon))
    b = alpha * epsilon * (n + 1) * (1 - alpha) / 2 + 2 * alpha
    assert alpha**2 * small**2 - b * small + 1 == pytest.approx(0.0, abs=1e-9)
    assert large == 1.0 - 1e-12  # the root above 1 is clipped
    level = public_qtilde(n, alpha, small, epsilon, 10**4)
    expected = (n + 1) * 0.9 / (n * (1 - small * alpha)) + 2 / n * math.log(1e4 / (small * alpha))
    assert level == pytest.approx(expected)
    assert public_qtilde(24, alpha, small, 0.1, 10**4) == 1.0 - 1e-12


def test_public_pcoqs_rounds_to_two_decimals():
    scores = np.linspace(0.0, 1.0, 2001)[1:]  # 2000 scores, quantile 0.9005
    # Huge rho: noise far below one count, the search ends at the quantile, rounded.
    threshold = public_pcoqs_threshold(scores, 0.1, 1e12, check_noise_source(0))
    assert threshold == 0.9
    assert public_pcoqs_threshold(scores, 0.001, 1e12, check_noise_source(0)) == 1.0


def test_set_metrics_equal_the_library_sets():
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(3), size=500)
    y = np.array([rng.choice(3, p=p) for p in proba])
    metrics = SetMetrics(1.0 - proba, y)
    for threshold in (0.0, 0.35, 0.5, 0.71, 0.999, 1.0):
        sets = LAC().predict_set(proba, threshold)
        coverage, size, singletons = metrics([threshold])
        assert coverage[0] == set_coverage(y, sets, np.arange(3))
        assert size[0] == mean_set_size(sets)
        assert singletons[0] == singleton_rate(sets)


def test_tree_skeleton_cache_fits_the_same_forest():
    from diffprivlib.accountant import BudgetAccountant
    from diffprivlib.models import RandomForestClassifier

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 4)), rng.integers(0, 2, 300)

    def fit(data_seed):
        Xs = X + data_seed
        model = RandomForestClassifier(
            epsilon=2.0, n_estimators=6, max_depth=4, bounds=(-5, 5), classes=[0, 1],
            random_state=42, accountant=BudgetAccountant(),
        ).fit(Xs, y)  # fmt: skip
        return model.predict_proba(Xs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = [fit(0), fit(1)]
        with reuse_tree_skeletons():
            cached = [fit(0), fit(1)]  # the second fit reuses the first's skeletons
    assert all(np.array_equal(a, b) for a, b in zip(plain, cached, strict=True))


def test_split_sizes_follow_train_test_split():
    from sklearn.model_selection import train_test_split

    for n in (100, 200, 500, 1000, 2000, 6000, 10000, 999):
        rows = np.arange(n)
        train, rest = train_test_split(rows, test_size=0.4, random_state=0)
        cal, test = train_test_split(rest, test_size=0.4, random_state=0)
        assert split_sizes(n) == (len(train), len(cal), len(test))


def test_paper_numbers_are_complete():
    for name, spec in TABLES.items():
        assert set(PAPER_TABLES[name]) == set(spec.values), name
        for row in PAPER_TABLES[name].values():
            for column in ("ExponQ", "P-COQS"):
                (coverage, _), (size, _), (singletons, _) = row[column]
                assert 0.8 < coverage <= 1.0 and 1.0 <= size <= 2.0
                assert size + singletons == pytest.approx(2.0, abs=1.5e-4)
    assert PAPER_TABLES["paper002-table1"][1.0]["ExponQ"][0] == (0.9217, 0.0116)
    assert PAPER_TABLES["paper002-table2"][100.0]["accuracy"] == (0.5867, 0.1248)
    assert PAPER_TABLE4["dp_nb", "P-COQS"][4] == (0.0072, 0.0003)


@pytest.mark.slow
def test_every_reproduction_runs_quick(tmp_path, capsys):
    assert cli.main(["all", "--quick", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for name in cli.PAPER002:
        assert (tmp_path / f"{name}.md").read_text().strip()
        assert (tmp_path / f"{name}.csv").exists()
        if name in TABLES:
            assert (tmp_path / f"{name}.png").stat().st_size > 10000
    assert "0.9217 (0.0116)" in printed  # the paper's Table 1 ExponQ cell, beside ours


def test_paper004_metrics_equal_predict_interval():
    from benchmarks.reproduce import paper004
    from privconf_sklearn import PrivateConformalRegressor
    from privconf_sklearn.datasets import make_poisson_outliers
    from privconf_sklearn.mechanisms import FedCPQQ
    from privconf_sklearn.metrics import interval_coverage, mean_interval_width

    key = "fedcp_qq_10x100"
    (record,) = paper004._run_chunk(([0], (key,)))
    seed = int(paper004._seed(0, "paper004").generate_state(1)[0] >> 1)
    X, y = make_poisson_outliers(7000, random_state=seed)
    pair = paper004._quantile_pair(seed).fit(X[:1000], y[:1000])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scores clipped to the public range are counted
        estimator = PrivateConformalRegressor(
            pair, mechanism=FedCPQQ(), conformity_score="cqr", score_bounds=(-5.0, 5.0)
        ).fit_calibrate(X[1000:2000], y[1000:2000], groups=np.repeat(np.arange(10), 100))
    intervals = estimator.predict_interval(X[2000:])
    assert record[2] == estimator.threshold_
    assert record[3] == pytest.approx(interval_coverage(y[2000:], intervals), abs=1e-12)
    assert record[4] == pytest.approx(mean_interval_width(intervals), rel=1e-12)
    assert record[5] == estimator.calibration_.coverage_lower_bound


def test_speed_suite_modules_exist():
    import importlib

    from benchmarks import speed

    for name, full, quick in speed.SUITE:
        module = importlib.import_module(f"benchmarks.{name}")
        assert callable(module.main), name
        assert isinstance(full, list) and isinstance(quick, list)
