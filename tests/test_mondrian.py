"""Mondrian (group-conditional) calibration: exactness, privacy, coverage, bad input."""

import dataclasses
import itertools
import math
import pickle
import warnings
from dataclasses import replace

import numpy as np
import pytest
from mapie.classification import SplitConformalClassifier
from mapie.regression import SplitConformalRegressor
from scipy import stats
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from privconf_sklearn import (
    InfeasibleCalibrationWarning,
    PrivateConformalClassifier,
    PrivateConformalRegressor,
    ScoreBoundsWarning,
    UninformativeCalibrationWarning,
)
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.mechanisms import DPAPS, PCOQS, ExponQ, SplitConformal
from privconf_sklearn.metrics import neg_mean_set_size_scorer
from privconf_sklearn.mondrian import (
    MondrianCalibration,
    PrivateGroupSizes,
    UnseenGroupWarning,
    mondrian_privacy,
    private_sizes_coverage_floor,
    size_grid_floor,
)
from privconf_sklearn.privacy import PrivacyGuarantee, gaussian_epsilon
from privconf_sklearn.scores import APS

from ._privacy import dict_privacy_loss, private_size_distribution
from ._stats import FALSE_FAILURE, binomial_lower_limit


# ---------------------------------------------------------------------- helpers
class ProbabilitiesAsFeatures(ClassifierMixin, BaseEstimator):
    """A 'fitted' classifier whose features are its predicted probabilities."""

    def fit(self, X, y):
        self.classes_ = np.arange(np.asarray(X).shape[1])
        return self

    def predict_proba(self, X):
        return np.asarray(X, dtype=np.float64)

    def predict(self, X):
        return np.argmax(self.predict_proba(X), axis=1)


class SecondColumn(RegressorMixin, BaseEstimator):
    """A 'fitted' regressor predicting the second feature (the first one is the group)."""

    def fit(self, X, y):
        self.fitted_ = True
        return self

    def predict(self, X):
        return np.asarray(X, dtype=np.float64)[:, 1]


def first_column_positive(X):
    return np.asarray(X)[:, 0] > 0


def first_column(X):
    return np.asarray(X)[:, 0]


class AddRemoveOnly(ExponQ):
    """ExponQ stated as private under add/remove adjacency only (like its monotone scaling)."""

    def _privacy_guarantee(self, params):
        return PrivacyGuarantee.pure(params["epsilon"], adjacency="add/remove")


class AddRemoveOnlyPCOQS(PCOQS):
    """P-COQS stated under add/remove adjacency only (replace-one: 4 rho, group privacy)."""

    def privacy_guarantee(self):
        return replace(super().privacy_guarantee(), adjacency="add/remove")


@pytest.fixture(scope="module")
def three_classes():
    """3 classes, a 10% minority overlapping class 1; LogisticRegression."""
    rng = np.random.default_rng(0)
    n = 12000
    y = rng.choice(3, size=n, p=[0.6, 0.3, 0.1])
    centres = np.array([[0.0, 0.0], [1.5, 0.0], [1.8, 0.4]])
    X = centres[y] + rng.normal(size=(n, 2))
    model = LogisticRegression().fit(X[:4000], y[:4000])
    return model, (X[4000:8000], y[4000:8000]), (X[8000:], y[8000:])


# ------------------------------------------------------------------- exactness
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2])
def test_class_mondrian_split_equals_mapie_per_class(three_classes, alpha):
    """SplitConformal + mondrian='class' (LAC) = MAPIE split conformal run per label."""
    model, (X_cal, y_cal), (X_test, _) = three_classes
    ours = PrivateConformalClassifier(
        model, mechanism=SplitConformal(), alpha=alpha, mondrian="class", group_sizes="public"
    ).fit_calibrate(X_cal, y_cal)
    expected = np.zeros((len(X_test), 3), dtype=bool)
    for label in range(3):
        mapie = SplitConformalClassifier(
            model, confidence_level=1 - alpha, conformity_score="lac", prefit=True
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # MAPIE warns that one label is present
            mapie.conformalize(X_cal[y_cal == label], y_cal[y_cal == label])
        expected[:, label] = mapie.predict_set(X_test)[1][:, label, 0]
    np.testing.assert_array_equal(ours.predict_set(X_test), expected)


@pytest.mark.filterwarnings("ignore::privconf_sklearn.UninformativeCalibrationWarning")
@pytest.mark.parametrize("score", [APS(), "lac"])
def test_class_mondrian_split_equals_numpy_per_class(three_classes, score):
    """Label j is in the set iff its score is at most the k-th smallest score of label j."""
    model, (X_cal, y_cal), (X_test, _) = three_classes
    ours = PrivateConformalClassifier(
        model,
        mechanism=SplitConformal(),
        conformity_score=score,
        mondrian="class",
        group_sizes="public",
    ).fit_calibrate(X_cal, y_cal)
    proba_cal, proba_test = model.predict_proba(X_cal), model.predict_proba(X_test)
    for label in range(3):
        scores = ours.score_.conformity_scores(
            proba_cal[y_cal == label], np.full((y_cal == label).sum(), label)
        )
        k = math.ceil((len(scores) + 1) * 0.9)
        quantile = np.sort(scores)[k - 1]
        test_scores = ours.score_.conformity_scores(proba_test, np.full(len(X_test), label))
        np.testing.assert_array_equal(ours.predict_set(X_test)[:, label], test_scores <= quantile)
        assert ours.group_thresholds_[label] == quantile


def test_group_mondrian_split_regression_equals_mapie_per_group():
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(6000, 2))
    y = 3 * X[:, 1] + rng.normal(size=6000) * np.where(X[:, 0] > 0, 2.0, 0.5)
    model = LinearRegression().fit(X[:2000], y[:2000])
    X_cal, y_cal, X_test = X[2000:4000], y[2000:4000], X[4000:]
    ours = PrivateConformalRegressor(
        model,
        mechanism=SplitConformal(),
        score_bounds=(0.0, 20.0),
        mondrian=first_column_positive,
        group_sizes="public",
    ).fit_calibrate(X_cal, y_cal)
    intervals = ours.predict_interval(X_test)
    for group in (False, True):
        mapie = SplitConformalRegressor(model, confidence_level=0.9, prefit=True)
        mapie.conformalize(X_cal[(X_cal[:, 0] > 0) == group], y_cal[(X_cal[:, 0] > 0) == group])
        rows = (X_test[:, 0] > 0) == group
        np.testing.assert_array_equal(
            intervals[rows], mapie.predict_interval(X_test[rows])[1][:, :, 0]
        )
    widths = intervals[:, 1] - intervals[:, 0]
    assert widths[X_test[:, 0] > 0].min() > widths[X_test[:, 0] <= 0].max()


# --------------------------------------------------------------------- privacy
@pytest.mark.parametrize(
    ("mechanism", "sizes", "adjacency", "read", "expected"),
    [
        (ExponQ(epsilon=1.0), "public", "add/remove", 2, 1.0),
        (ExponQ(epsilon=1.0), "public", "replace-one", 2, 2.0),
        (ExponQ(epsilon=1.0), "public", "replace-one", 1, 1.0),
        (ExponQ(epsilon=1.0), "public", "replace-one", 0, 0.0),
        (AddRemoveOnly(epsilon=1.0), "public", "add/remove", 2, 1.0),
        (AddRemoveOnly(epsilon=1.0), "public", "replace-one", 2, 2.0),
        (AddRemoveOnly(epsilon=1.0), "public", "replace-one", 1, 2.0),
        (DPAPS(epsilon=0.5, n_bins=10), "public", "replace-one", 5, 1.0),
        (ExponQ(epsilon=1.0), PrivateGroupSizes(0.25), "add/remove", 2, 1.25),
        (ExponQ(epsilon=1.0), PrivateGroupSizes(0.25), "replace-one", 2, 2.5),
        (ExponQ(epsilon=1.0), PrivateGroupSizes(0.25), "replace-one", 1, 1.5),
        (AddRemoveOnly(epsilon=1.0), PrivateGroupSizes(0.25), "add/remove", 2, 2.25),
        (AddRemoveOnly(epsilon=1.0), PrivateGroupSizes(0.25), "replace-one", 2, 4.5),
        (SplitConformal(), "public", "replace-one", 2, math.inf),
    ],
)
def test_composed_pure_privacy(mechanism, sizes, adjacency, read, expected):
    guarantee = mondrian_privacy(mechanism, sizes, adjacency, n_groups_read=read)
    assert guarantee.epsilon == pytest.approx(expected, rel=1e-12)
    assert guarantee.adjacency == adjacency


@pytest.mark.parametrize(
    ("mechanism", "sizes", "adjacency", "expected"),
    [
        (ExponQ(epsilon=1.0), "public", "replace-one", 1.0),
        (AddRemoveOnly(epsilon=1.0), "public", "replace-one", 2.0),
        (ExponQ(epsilon=1.0), PrivateGroupSizes(0.25), "replace-one", 1.0),
        (ExponQ(epsilon=1.0), PrivateGroupSizes(0.25), "add/remove", 1.25),
    ],
)
def test_one_group_cannot_lose_a_row_to_another(mechanism, sizes, adjacency, expected):
    """With a single group a replaced row stays in it: no second release, no size change."""
    guarantee = mondrian_privacy(mechanism, sizes, adjacency, n_groups_read=1, n_groups=1)
    assert guarantee.epsilon == pytest.approx(expected, rel=1e-12)


def test_composed_gaussian_privacy_is_exact():
    """Two P-COQS releases compose to a Gaussian mechanism with twice the rho (exact GDP)."""
    rho = 0.3
    composed = mondrian_privacy(PCOQS(rho=rho), "public", "replace-one")
    assert composed.notion == "zcdp" and composed.rho == pytest.approx(2 * rho)
    assert composed.epsilon == pytest.approx(
        PCOQS(rho=2 * rho).privacy_guarantee().epsilon, rel=1e-9
    )
    single = mondrian_privacy(PCOQS(rho=rho), "public", "add/remove")
    assert single.epsilon == pytest.approx(PCOQS(rho=rho).privacy_guarantee().epsilon, rel=1e-12)
    # With a Laplace size release the mixture is converted generically (CKS), rho adds.
    mixed = mondrian_privacy(PCOQS(rho=rho), PrivateGroupSizes(0.2), "add/remove")
    assert mixed.rho == pytest.approx(rho + 0.2**2 / 2)


# Exact privacy on neighbouring datasets: DP-APS on a grid of B = 3 public edges has an
# output distribution in closed form (first noisy cumulative count above k + lambda,
# independent discrete Laplace noises of scale B / epsilon), so every output's
# probability is computed. Feasible (k + lambda <= n) from two scores per group.
EPSILON, SIZE_EPSILON, ALPHA_EXACT, B, BETA = 4.0, 1.5, 0.7, 3, 0.9


def _dpaps_distribution(scores, n):
    """{threshold: probability} of DPAPS(EPSILON, n_bins=B, beta=BETA) with n scores.

    From the mechanism's own exact distribution (first noisy cumulative count above
    k + lambda, independent discrete Laplace noises); an empty group releases 1.
    """
    if n == 0:
        return {1.0: 1.0}
    values, log_p = DPAPS(
        epsilon=EPSILON, n_bins=B, beta=BETA, release="vector"
    ).threshold_distribution(np.asarray(scores, dtype=float), ALPHA_EXACT)
    return {float(v): float(np.exp(lp)) for v, lp in zip(values, log_p, strict=True)}


def _public_release_distribution(groups):
    """Joint {(t_A, t_B): p}: independent DPAPS releases on each group's scores."""
    per_group = [_dpaps_distribution(scores, len(scores)) for scores in groups]
    return {
        key: math.prod(d[k] for d, k in zip(per_group, key, strict=True))
        for key in itertools.product(*(sorted(d) for d in per_group))
    }


def _subsample_distribution(scores, m):
    """The DPAPS release on m of the scores drawn uniformly, or padded with ones."""
    if m > len(scores):
        return _dpaps_distribution([*scores, *[1.0] * (m - len(scores))], m)
    subsets = list(itertools.combinations(scores, m))
    total: dict = {}
    for subset in subsets:
        for t, p in _dpaps_distribution(subset, m).items():
            total[t] = total.get(t, 0.0) + p / len(subsets)
    return total


def _private_release_distribution(groups, n_cap):
    offset = PrivateGroupSizes(SIZE_EPSILON, beta=BETA).offset()
    joint: dict = {}
    sizes = [
        private_size_distribution(len(scores), n_cap, offset, SIZE_EPSILON) for scores in groups
    ]
    for ms in itertools.product(*(range(n_cap + 1) for _ in groups)):
        p_sizes = math.prod(sizes[g][m] for g, m in enumerate(ms))
        releases = [
            _subsample_distribution(scores, m) for scores, m in zip(groups, ms, strict=True)
        ]
        for ts in itertools.product(*(sorted(r) for r in releases)):
            joint[(*ms, *ts)] = p_sizes * math.prod(r[t] for r, t in zip(releases, ts, strict=True))
    return joint


# Every group keeps at least two rows in every neighbour, so each release is feasible
# (the sizes decide feasibility, and with public sizes they are part of the public input).
GROUP_A, GROUP_B = [0.2, 0.5, 0.9], [0.1, 0.7, 0.4]
NEIGHBOURS = {
    # name: (adjacency, group A scores, group B scores)
    "replace within A": ("replace-one", [0.95, 0.5, 0.9], GROUP_B),
    "replace, A -> B": ("replace-one", [0.5, 0.9], [0.1, 0.7, 0.4, 0.95]),
    "replace, B -> A": ("replace-one", [0.2, 0.5, 0.9, 0.05], [0.7, 0.4]),
    "add to A": ("add/remove", [0.2, 0.5, 0.9, 0.4], GROUP_B),
    "remove from B": ("add/remove", GROUP_A, [0.7, 0.4]),
}


@pytest.mark.parametrize("name", sorted(NEIGHBOURS))
def test_exact_privacy_public_sizes(name):
    """max_o |log P_D(o) - log P_D'(o)| <= the recorded epsilon (2 eps for a moving row)."""
    adjacency, group_a, group_b = NEIGHBOURS[name]
    loss = dict_privacy_loss(
        _public_release_distribution([GROUP_A, GROUP_B]),
        _public_release_distribution([group_a, group_b]),
    )
    mechanism = DPAPS(epsilon=EPSILON, n_bins=B, beta=BETA, release="vector")
    recorded = mondrian_privacy(mechanism, "public", adjacency).epsilon
    assert loss <= recorded * (1 + 1e-9)


@pytest.mark.parametrize("name", sorted(NEIGHBOURS))
def test_exact_privacy_private_sizes(name):
    """Sizes and thresholds together; add/remove with the public n fixed (the convention)."""
    adjacency, group_a, group_b = NEIGHBOURS[name]
    n_cap = len(GROUP_A) + len(GROUP_B)
    loss = dict_privacy_loss(
        _private_release_distribution([GROUP_A, GROUP_B], n_cap),
        _private_release_distribution([group_a, group_b], n_cap),
    )
    mechanism = DPAPS(epsilon=EPSILON, n_bins=B, beta=BETA, release="vector")
    sizes = PrivateGroupSizes(SIZE_EPSILON, beta=BETA)
    recorded = mondrian_privacy(mechanism, sizes, adjacency).epsilon
    assert loss <= recorded * (1 + 1e-9)
    if "->" in name:  # two groups change: more than either release alone can lose
        assert loss > max(SIZE_EPSILON, EPSILON)


def _exact_data(groups):
    """Regression rows whose score |y - x_1| is the given score, group from x_0's sign."""
    X, y = [], []
    for sign, scores in zip((-1.0, 1.0), groups, strict=True):
        for score in scores:
            X.append([sign, 0.0])
            y.append(score)
    return np.array(X), np.array(y)


@pytest.mark.slow
@pytest.mark.parametrize("private", [False, True], ids=["public", "private"])
def test_estimator_release_follows_the_exact_distribution(private):
    """The estimator's joint release matches the product distribution above, cell by cell.

    Exact two-sided binomial limits per cell with a Bonferroni split: a release that
    reused one noise stream in both groups, or a different subsample, fails here.
    """
    runs = 3000
    X, y = _exact_data([GROUP_A, GROUP_B])
    sizes = "public"
    if private:
        sizes = PrivateGroupSizes(SIZE_EPSILON, beta=BETA, group_ids=[False, True])
    estimator = PrivateConformalRegressor(
        SecondColumn().fit(X, y),
        mechanism=DPAPS(epsilon=EPSILON, n_bins=B, beta=BETA, release="vector"),
        alpha=ALPHA_EXACT,
        score_bounds=(0.0, 1.0),
        mondrian=first_column_positive,
        group_sizes=sizes,
        accountant=_Unlimited(),
    )
    counts: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        warnings.simplefilter("ignore", ScoreBoundsWarning)  # releases at the top are expected
        for run in range(runs):
            estimator.set_params(random_state=run).fit_calibrate(X, y)
            released = (
                tuple(estimator.calibration_.details["group_calibration_sizes"]) if private else ()
            )
            key = (*released, *(g.calibration.threshold for g in estimator.calibration_.groups))
            counts[key] = counts.get(key, 0) + 1
    exact = (
        _private_release_distribution([GROUP_A, GROUP_B], len(y))
        if private
        else _public_release_distribution([GROUP_A, GROUP_B])
    )
    assert set(counts) <= set(exact)
    per_cell = FALSE_FAILURE / (2 * len(exact))
    for key, p in exact.items():
        observed = counts.get(key, 0)
        assert stats.binom.cdf(observed, runs, p) > per_cell, (key, observed, p)
        assert stats.binom.sf(observed - 1, runs, p) > per_cell, (key, observed, p)


class _Unlimited:
    """A ledger without a budget (records nothing): any check(...)/spend(...) object works."""

    def check(self, epsilon, delta):
        pass

    def spend(self, epsilon, delta):
        pass


@pytest.mark.parametrize("adjacency", ["replace-one", "add/remove"])
@pytest.mark.parametrize("sizes", ["public", PrivateGroupSizes(0.3)], ids=["public", "private"])
def test_estimator_spends_exactly_the_composed_guarantee(dp, three_classes, adjacency, sizes):
    model, (X_cal, y_cal), _ = three_classes
    ledger = dp.accountant.BudgetAccountant()
    mechanism = ExponQ(epsilon=0.8)
    estimator = PrivateConformalClassifier(
        model,
        mechanism=mechanism,
        mondrian="class",
        group_sizes=sizes,
        adjacency=adjacency,
        accountant=ledger,
        random_state=0,
    ).fit_calibrate(X_cal, y_cal)
    expected = mondrian_privacy(mechanism, sizes, adjacency, n_groups_read=3)
    assert estimator.calibration_.privacy == expected
    assert ledger.spent_budget == [expected.accountant_spend()]
    # The budget check happens before any data is read, with the planned guarantee.
    tight = dp.accountant.BudgetAccountant(epsilon=expected.epsilon * 0.99)
    with pytest.raises(dp.utils.BudgetError):
        clone(estimator).set_params(accountant=tight).fit_calibrate(X_cal, y_cal)
    assert tight.spent_budget == []


def test_trivial_groups_spend_nothing_with_public_sizes(dp):
    """Only groups whose release read data count: one such group, one row: epsilon."""
    X, y = _exact_data([[0.2, 0.5, 0.9, 0.3, 0.6] * 200, [0.1]])
    ledger = dp.accountant.BudgetAccountant()
    with pytest.warns(InfeasibleCalibrationWarning, match=r"1 of 2 groups.*group True"):
        estimator = PrivateConformalRegressor(
            SecondColumn().fit(X, y),
            mechanism=ExponQ(epsilon=1.0),
            score_bounds=(0.0, 1.0),
            mondrian=first_column_positive,
            group_sizes="public",
            accountant=ledger,
            random_state=0,
        ).fit_calibrate(X, y)
    assert [g.informative for g in estimator.calibration_.groups] == [True, False]
    assert ledger.spent_budget == [(1.0, 0.0)]


@pytest.mark.parametrize(
    ("mechanism", "adjacency", "rho"),
    [
        # A row is added or removed in one group: one release.
        (PCOQS(rho=1e-6, delta=1e-3), "add/remove", 1e-6),
        # A replaced row moving between groups changes two releases: 2 rho.
        (PCOQS(rho=1e-6, delta=1e-3), "replace-one", 2e-6),
        # Replaced within its group: 4 rho by group privacy, more than 2 rho moving,
        # although both convert to epsilon = 0 at delta = 1e-3.
        (AddRemoveOnlyPCOQS(rho=1e-7, delta=1e-3), "replace-one", 4e-7),
    ],
)
def test_zcdp_groups_that_read_rows_count_whatever_their_converted_epsilon(
    dp, mechanism, adjacency, rho
):
    """The audit's case: every group's P-COQS release converts to epsilon = 0 at its delta
    (rho = 1e-6, delta = 1e-3), yet read its rows. The record used to be (0, 0) and
    nothing was spent."""
    X, y = make_two_gaussians(6000, random_state=1)
    ledger = dp.accountant.BudgetAccountant()
    estimator = PrivateConformalClassifier(
        LogisticRegression().fit(X[:2000], y[:2000]),
        mechanism=mechanism,
        mondrian="class",
        group_sizes="public",
        adjacency=adjacency,
        accountant=ledger,
        random_state=0,
    ).fit_calibrate(X[2000:], y[2000:])
    releases = [g.calibration for g in estimator.calibration_.groups]
    assert [(c.feasible, c.privacy.epsilon, c.privacy.rho > 0) for c in releases] == [
        (True, 0.0, True)
    ] * 2
    privacy = estimator.calibration_.privacy
    assert privacy.notion == "zcdp" and privacy.holds and privacy.delta == 1e-3
    assert privacy.rho == pytest.approx(rho, rel=1e-12)
    assert privacy.epsilon == gaussian_epsilon(math.sqrt(2 * privacy.rho), 1e-3)
    assert ledger.spent_budget == [(privacy.epsilon, 1e-3)]


# -------------------------------------------------------------------- coverage
def _dirichlet_rows(rng, label, size):
    concentration = [
        np.array([6.0, 2.0, 1.0]),
        np.array([1.5, 4.0, 3.0]),
        np.array([1.0, 3.5, 3.0]),
    ]
    return rng.dirichlet(concentration[label], size=size)


COVERAGE_RUNS = 800
CLASS_SIZES = (900, 450, 150)


def _coverage_mechanisms():
    return {
        "split": (SplitConformal(), "public"),
        "exponq": (ExponQ(epsilon=1.0), "public"),
        "pcoqs": (PCOQS(rho=0.5), "public"),
        "dpaps": (DPAPS(epsilon=1.0), "public"),
        "exponq-private-sizes": (ExponQ(epsilon=1.0), PrivateGroupSizes(0.5, beta=0.01)),
        "dpaps-private-sizes": (DPAPS(epsilon=1.0), PrivateGroupSizes(0.5, beta=0.01)),
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_coverage_mechanisms()))
def test_per_class_coverage_meets_the_group_bound(name):
    """Each run: fresh calibration set with fixed class counts, one fresh test row per class.

    Given the calibration set, a class's test row is covered with probability its
    conditional coverage, so over independent runs the covered count of a class is
    Binomial(runs, p_class) with p_class >= that class's bound (marginal over the noise:
    bound * confidence).
    """
    mechanism, sizes = _coverage_mechanisms()[name]
    rng = np.random.default_rng(11)
    labels = np.repeat(np.arange(3), CLASS_SIZES)
    estimator = PrivateConformalClassifier(
        ProbabilitiesAsFeatures().fit(np.eye(3), [0, 1, 2]),
        mechanism=mechanism,
        mondrian="class",
        group_sizes=sizes,
        accountant=_Unlimited(),
    )
    covered, bounds = np.zeros(3, dtype=int), set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        for run in range(COVERAGE_RUNS):
            X = np.vstack(
                [_dirichlet_rows(rng, label, size) for label, size in enumerate(CLASS_SIZES)]
            )
            estimator.set_params(random_state=run).fit_calibrate(X, labels)
            test = np.vstack([_dirichlet_rows(rng, label, 1) for label in range(3)])
            covered += estimator.predict_set(test)[np.arange(3), np.arange(3)]
            for g in estimator.calibration_.groups:
                if g.informative:
                    bounds.add((g.group, g.coverage_lower_bound * g.lower_bound_confidence))
    for label in range(3):
        (bound,) = {b for group, b in bounds if group == label} or {1.0}
        coverage = covered[label] / COVERAGE_RUNS
        print(f"{name} class {label}: coverage {coverage:.3f}, bound {bound:.4f}")
        assert covered[label] >= binomial_lower_limit(COVERAGE_RUNS, bound)
    if isinstance(sizes, PrivateGroupSizes):
        floor = private_sizes_coverage_floor(mechanism, 0.1, sum(CLASS_SIZES))
        assert {b for _, b in bounds} == {(1 - sizes.beta) * floor}


@pytest.mark.slow
@pytest.mark.parametrize("sizes", ["public", "private"])
def test_per_group_interval_coverage_meets_the_bound(sizes):
    """Regression, groups from a feature: noise sd 0.5 in group False, 2 in group True.

    Each run: 600 / 200 fresh calibration rows, one fresh test row per group; covered
    counts are Binomial(runs, p_group) with p_group >= the group's bound."""
    runs, rng = 800, np.random.default_rng(21)
    group_sizes = "public" if sizes == "public" else PrivateGroupSizes(0.5, group_ids=[False, True])
    estimator = PrivateConformalRegressor(
        SecondColumn().fit(np.zeros((1, 2)), [0.0]),
        mechanism=ExponQ(epsilon=1.0),
        score_bounds=(0.0, 10.0),
        mondrian=first_column_positive,
        group_sizes=group_sizes,
        accountant=_Unlimited(),
    )

    def draw(n_false, n_true):
        group = np.repeat([-1.0, 1.0], [n_false, n_true])
        noise = rng.normal(size=group.shape[0]) * np.where(group > 0, 2.0, 0.5)
        return np.column_stack([group, np.zeros_like(group)]), noise

    covered, bounds = np.zeros(2, dtype=int), set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        for run in range(runs):
            X, y = draw(600, 200)
            estimator.set_params(random_state=run).fit_calibrate(X, y)
            X_test, y_test = draw(1, 1)
            intervals = estimator.predict_interval(X_test)
            covered += (intervals[:, 0] <= y_test) & (y_test <= intervals[:, 1])
            bounds |= {
                (g.group, g.coverage_lower_bound)
                for g in estimator.calibration_.groups
                if g.informative  # a trivial group's full sets always cover
            }
    for index, group in enumerate((False, True)):
        (bound,) = {b for g, b in bounds if g == group} or {1.0}
        assert covered[index] >= binomial_lower_limit(runs, bound)


def test_marginal_calibration_misses_the_minority_class_mondrian_does_not():
    """The reason for Mondrian: ExponQ at 0.1 leaves class 2 far below 0.9 marginally."""
    rng = np.random.default_rng(12)
    labels = np.repeat(np.arange(3), CLASS_SIZES)
    X_cal = np.vstack([_dirichlet_rows(rng, label, size) for label, size in enumerate(CLASS_SIZES)])
    test = {label: _dirichlet_rows(rng, label, 4000) for label in range(3)}
    model = ProbabilitiesAsFeatures().fit(np.eye(3), [0, 1, 2])
    coverage = {}
    for mondrian in (None, "class"):
        estimator = PrivateConformalClassifier(
            model,
            mechanism=SplitConformal(),
            mondrian=mondrian,
            group_sizes=None if mondrian is None else "public",
        ).fit_calibrate(X_cal, labels)
        coverage[mondrian] = [estimator.predict_set(test[j])[:, j].mean() for j in range(3)]
    assert coverage[None][2] < 0.8 < 0.85 < min(coverage["class"])


@pytest.mark.slow
def test_private_sizes_subsample_the_group_uniformly():
    """With m < n_h released, the mechanism sees m of the group's rows drawn uniformly.

    SplitConformal makes it visible: the threshold is the k-th smallest of the subset, so
    P(threshold = s_(j)) = C(j - 1, k - 1) C(N - j, m - k) / C(N, m) exactly; checked cell
    by cell (exact binomial limits, Bonferroni) for the most frequent released m."""
    n_rows, runs = 20, 2000
    scores = ((np.arange(n_rows) + 0.5) / n_rows).tolist()  # rows in increasing score order
    X, y = _exact_data([scores, [0.5] * 5])
    estimator = PrivateConformalRegressor(
        SecondColumn().fit(X, y),
        mechanism=SplitConformal(),
        alpha=0.5,
        score_bounds=(0.0, 1.0),
        mondrian=first_column_positive,
        accountant=_Unlimited(),
        group_sizes=PrivateGroupSizes(3.0, beta=0.3, group_ids=[False, True]),
    )
    released: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for run in range(runs):
            record = estimator.set_params(random_state=run).fit_calibrate(X, y).calibration_
            group = record.group(False).calibration
            released.setdefault(group.n_samples, []).append(group.threshold)
    m = max((size for size in released if size < n_rows), key=lambda size: len(released[size]))
    observed, k = released[m], math.ceil((m + 1) * 0.5)
    cells = FALSE_FAILURE / (2 * n_rows)
    for j, score in enumerate(scores, start=1):
        p = math.comb(j - 1, k - 1) * math.comb(n_rows - j, m - k) / math.comb(n_rows, m)
        count = sum(t == score for t in observed)
        assert stats.binom.cdf(count, len(observed), p) > cells, (j, count, p)
        assert stats.binom.sf(count - 1, len(observed), p) > cells, (j, count, p)


def test_private_sizes_grid_and_floor():
    assert [size_grid_floor(v) for v in (-3, 0, 1, 64, 65, 66, 200)] == [0, 0, 1, 64, 65, 66, 198]
    assert all(size_grid_floor(v) >= v * (1 - 1 / 64) for v in range(64, 5000))
    assert private_sizes_coverage_floor(ExponQ(epsilon=1.0), 0.1, 10**5) == pytest.approx(0.9)
    assert private_sizes_coverage_floor(
        DPAPS(epsilon=1.0, n_bins=20, beta=1e-3), 0.1, 10**5
    ) == pytest.approx(0.899)
    assert private_sizes_coverage_floor(ExponQ(epsilon=1.0), 0.1, 5) == 1.0  # never feasible


class ConfidentExponQ(ExponQ):
    """ExponQ whose certified bound is stated to hold with probability 0.95 only, as a
    mechanism that certifies "with confidence 1 - beta" may (the public
    QuantileMechanism contract); positive at every feasible size, unlike P-COQS, whose
    zero bound at small sizes makes every floor over the grid 0."""

    def coverage_certificate(self, n_samples, alpha):
        certificate = super().coverage_certificate(n_samples, alpha)
        return dataclasses.replace(certificate, confidence=0.95)


@pytest.mark.parametrize(
    "mechanism", [ConfidentExponQ(epsilon=1.0), PCOQS(rho=0.5)], ids=["confident-0.95", "pcoqs"]
)
def test_private_sizes_floor_is_the_smallest_certified_marginal_bound(mechanism):
    """The floor is the minimum, over the grid sizes ``v <= n`` at which the mechanism
    certifies, of ``lower_bound * confidence`` (a bound holding with probability
    ``confidence`` over the noise is marginally their product): a floor that forgot the
    confidence would exceed one of those products, and the group bound built on it
    would overstate coverage."""
    alpha, n_max = 0.1, 2000
    grid = [v for v in range(1, n_max + 1) if size_grid_floor(v) == v]
    certificates = [mechanism.coverage_certificate(v, alpha) for v in grid]
    feasible = [c for c in certificates if c.feasible]
    assert feasible and all(c.confidence < 1 for c in feasible)
    floor = private_sizes_coverage_floor(mechanism, alpha, n_max)
    assert floor == min(c.lower_bound * c.confidence for c in feasible)


def test_a_group_smaller_than_its_released_size_is_padded_with_top_scores():
    """Private sizes: when the released size ``m`` exceeds a group's ``n_g`` rows, the
    mechanism runs on the group's scores plus ``m - n_g`` scores at the top of the range
    (padding that can only raise the threshold, so the coverage bound still holds). With
    SplitConformal the release is then deterministic: the ``ceil((m + 1)(1 - alpha))``-th
    smallest padded score, or the trivial top of the range when that rank exceeds ``m``."""
    alpha = 0.5
    X, y = _exact_data([GROUP_A, GROUP_B])
    estimator = PrivateConformalRegressor(
        SecondColumn().fit(X, y),
        mechanism=SplitConformal(),
        alpha=alpha,
        score_bounds=(0.0, 1.0),
        mondrian=first_column_positive,
        group_sizes=PrivateGroupSizes(SIZE_EPSILON, beta=BETA, group_ids=[False, True]),
        accountant=_Unlimited(),
    )
    padded_releases = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        warnings.simplefilter("ignore", ScoreBoundsWarning)
        for run in range(60):
            estimator.set_params(random_state=run).fit_calibrate(X, y)
            released = estimator.calibration_.details["group_calibration_sizes"]
            for scores, m, group in zip(
                (GROUP_A, GROUP_B), released, estimator.calibration_.groups, strict=True
            ):
                if m <= len(scores):
                    continue
                padded = np.sort(np.r_[scores, np.ones(m - len(scores))])
                rank = math.ceil((m + 1) * (1 - alpha))
                expected = padded[rank - 1] if rank <= m else 1.0
                assert group.calibration.threshold == expected, (m, scores)
                padded_releases += 1
    assert padded_releases >= 10  # padding happened: the check is not vacuous


def test_private_size_lower_bound_fails_with_probability_at_most_beta():
    """P(m_g > n_g) <= beta: the released bound is below the size in all but ~beta runs."""
    sizes = PrivateGroupSizes(0.5, beta=0.02)
    from privconf_sklearn._random import check_noise_source  # the noise source a fit uses

    runs, n_g = 20000, 300
    noise = check_noise_source(0)
    released = sizes.release(np.full(runs, n_g), 10**6, noise)
    exceed = int((released > n_g).sum())
    assert exceed <= stats.binom.isf(FALSE_FAILURE, runs, 0.02)
    # P(Z > c) = e^{-3.5} / (1 + e^{-0.5}) = 0.0189 for the smallest integer c = 6
    assert sizes.offset() == 6
    assert exceed >= stats.binom.ppf(FALSE_FAILURE, runs, 0.01)


# ------------------------------------------------------------------ behaviour
def test_unseen_group_gets_the_trivial_set_and_a_warning():
    X = np.column_stack([np.repeat([0.0, 1.0], 500), np.linspace(0, 1, 1000)])
    y = X[:, 1] + np.random.default_rng(0).normal(scale=0.1, size=1000)
    estimator = PrivateConformalRegressor(
        SecondColumn().fit(X, y),
        mechanism=SplitConformal(),
        score_bounds=(0.0, 5.0),
        mondrian=first_column,
        group_sizes="public",
    ).fit_calibrate(X, y)
    assert list(estimator.groups_) == [0.0, 1.0]
    test = np.array([[0.0, 0.5], [7.0, 0.5], [1.0, 0.5], [7.0, 0.2], [-2.0, 0.0]])
    with pytest.warns(UnseenGroupWarning, match=r"3 test rows .*\[7\.0, -2\.0\]"):
        intervals = estimator.predict_interval(test, batch_size=2)
    np.testing.assert_array_equal(intervals[[1, 3, 4]], [[-4.5, 5.5], [-4.8, 5.2], [-5.0, 5.0]])
    threshold = estimator.group_thresholds_[0]
    np.testing.assert_array_equal(
        intervals[[0, 2]],
        [
            [0.5 - threshold, 0.5 + threshold],
            [0.5 - estimator.group_thresholds_[1], 0.5 + estimator.group_thresholds_[1]],
        ],
    )


def test_class_absent_from_calibration_is_trivial_and_warned(three_classes):
    model, (X_cal, y_cal), (X_test, _) = three_classes
    keep = y_cal != 2
    with pytest.warns(InfeasibleCalibrationWarning, match="group 2 .*no calibration rows"):
        estimator = PrivateConformalClassifier(
            model,
            mechanism=ExponQ(epsilon=1.0),
            mondrian="class",
            group_sizes="public",
            random_state=0,
        ).fit_calibrate(X_cal[keep], y_cal[keep])
    assert estimator.predict_set(X_test)[:, 2].all()
    record = estimator.calibration_.group(2)
    assert not record.informative and record.calibration.n_samples == 0
    assert not estimator.calibration_.informative and estimator.calibration_.group(0).informative


def test_class_mondrian_with_string_labels():
    rng = np.random.default_rng(3)
    names = np.array(["cat", "dog", "eel"])
    X = rng.normal(size=(6000, 3))
    y = names[np.argmax(X + rng.normal(scale=0.7, size=X.shape), axis=1)]
    model = LogisticRegression().fit(X[:2000], y[:2000])
    estimator = PrivateConformalClassifier(
        model, mechanism=SplitConformal(), mondrian="class", group_sizes="public"
    ).fit_calibrate(X[2000:4000], y[2000:4000])
    assert estimator.calibration_.group_ids == ("cat", "dog", "eel")
    assert list(estimator.groups_) == ["cat", "dog", "eel"]
    proba = model.predict_proba(X[4000:])
    np.testing.assert_array_equal(
        estimator.predict_set(X[4000:]), 1 - proba <= estimator.group_thresholds_[None, :]
    )


def test_record_structure(three_classes):
    model, (X_cal, y_cal), _ = three_classes
    estimator = PrivateConformalClassifier(
        model,
        mechanism=ExponQ(epsilon=1.0),
        mondrian="class",
        group_sizes=PrivateGroupSizes(0.5),
        random_state=0,
    ).fit_calibrate(X_cal, y_cal)
    record = estimator.calibration_
    assert isinstance(record, MondrianCalibration)
    assert record.group_ids == (0, 1, 2) and record.group_sizes == "private"
    assert record.n_samples == len(y_cal)
    assert record.owner_diagnostics == {"group_sizes": np.bincount(y_cal).tolist()}
    released = record.details["group_calibration_sizes"]
    assert released == [g.calibration.n_samples for g in record.groups]
    assert record.coverage_lower_bound == min(g.coverage_lower_bound for g in record.groups)
    assert record.to_dict()["groups"][0]["group"] == 0
    assert "MondrianCalibration(mechanism='ExponQ'" in repr(record)
    with pytest.raises(KeyError, match="no calibrated group 5"):
        record.group(5)
    assert not hasattr(estimator, "threshold_")
    np.testing.assert_array_equal(estimator.groups_, estimator.classes_)


def test_refit_without_mondrian_drops_group_attributes(three_classes):
    model, (X_cal, y_cal), _ = three_classes
    estimator = PrivateConformalClassifier(
        model, mechanism=SplitConformal(), mondrian="class", group_sizes="public"
    ).fit_calibrate(X_cal, y_cal)
    estimator.set_params(mondrian=None, group_sizes=None).fit_calibrate(X_cal, y_cal)
    assert hasattr(estimator, "threshold_")
    assert not any(hasattr(estimator, a) for a in ("groups_", "group_thresholds_", "mondrian_"))


def test_pipeline_grid_search_and_pickle(three_classes):
    _, (X_cal, y_cal), (X_test, _) = three_classes
    search = GridSearchCV(
        PrivateConformalClassifier(
            make_pipeline(StandardScaler(), LogisticRegression()),
            mechanism=ExponQ(epsilon=1.0),
            mondrian="class",
            group_sizes="public",
            prefit=False,
            random_state=0,
            accountant=_Unlimited(),
        ),
        {"alpha": [0.1, 0.2], "mechanism__epsilon": [1.0, 2.0]},
        scoring=neg_mean_set_size_scorer,
        cv=2,
    ).fit(X_cal, y_cal)
    best = search.best_estimator_
    assert best.get_params()["alpha"] == 0.2
    restored = pickle.loads(pickle.dumps(best))
    np.testing.assert_array_equal(restored.predict_set(X_test), best.predict_set(X_test))


# ------------------------------------------------------------------ bad input
def _fails_atomically(estimator, X, y, error, match):
    with pytest.raises(error, match=match):
        estimator.fit_calibrate(X, y)
    assert not hasattr(estimator, "calibration_")


@pytest.mark.parametrize(
    ("mondrian", "error", "match"),
    [
        (lambda X: np.zeros(len(X) - 1), ValueError, r"one group id per row: shape \(200,\)"),
        (lambda X: np.zeros((len(X), 2)), ValueError, r"got shape \(200, 2\)"),
        (lambda X: [[i] for i in range(len(X))], TypeError, r"unhashable group ids.*\[0\]"),
        (lambda X: np.where(np.arange(len(X)) == 7, np.nan, 1.0), ValueError, r"NaN .* rows \[7\]"),
        (lambda X: [float("nan") if i == 3 else "a" for i in range(len(X))], ValueError, r"\[3\]"),
        (lambda X: "abc", TypeError, r"got 'abc' of type str"),
        (lambda X: None, TypeError, r"mondrian=<lambda>: .* length 200; got None of type NoneType"),
        (lambda X: 3, TypeError, r"one group id per row.*got 3 of type int"),
        (lambda X: set(range(len(X))), TypeError, r"of type set"),
        (lambda X: (0 for _ in range(len(X))), TypeError, r"of type generator"),
        (lambda X: np.int64(3), ValueError, r"got shape \(\)"),
    ],
)
def test_bad_group_ids(mondrian, error, match):
    X, y = _exact_data([[0.2, 0.5] * 50, [0.1, 0.3] * 50])
    estimator = PrivateConformalRegressor(
        SecondColumn().fit(X, y),
        mechanism=SplitConformal(),
        score_bounds=(0.0, 1.0),
        mondrian=mondrian,
        group_sizes="public",
    )
    _fails_atomically(estimator, X, y, error, match)


def test_mondrian_returning_no_ids_is_refused_before_spending(dp):
    X = np.random.default_rng(0).normal(size=(300, 2))
    y = (X[:, 0] > 0).astype(int)
    ledger = dp.accountant.BudgetAccountant()
    estimator = PrivateConformalClassifier(
        LogisticRegression().fit(X, y),
        mechanism=ExponQ(epsilon=1.0),
        mondrian=lambda X: None,
        group_sizes="public",
        accountant=ledger,
        random_state=0,
    )
    with pytest.raises(TypeError, match=r"mondrian=<lambda>: mondrian\(X\) must return .*None"):
        estimator.fit_calibrate(X, y)
    assert ledger.spent_budget == []
    assert not hasattr(estimator, "calibration_")


def test_bad_group_ids_at_predict_time():
    X, y = _exact_data([[0.2, 0.5] * 50, [0.1, 0.3] * 50])
    ids = {"n": None}
    estimator = PrivateConformalRegressor(
        SecondColumn().fit(X, y),
        mechanism=SplitConformal(),
        score_bounds=(0.0, 1.0),
        mondrian=lambda X: first_column_positive(X) if ids["n"] is None else ids["n"],
        group_sizes="public",
    ).fit_calibrate(X, y)
    ids["n"] = np.full(3, np.nan)
    with pytest.raises(ValueError, match="NaN"):
        estimator.predict_set(X[:3])


def test_undeclared_groups_with_private_sizes():
    X, y = _exact_data([[0.2, 0.5] * 50, [0.1, 0.3] * 50])
    estimator = PrivateConformalRegressor(
        SecondColumn().fit(X, y),
        mechanism=SplitConformal(),
        score_bounds=(0.0, 1.0),
        mondrian=first_column_positive,
        group_sizes=PrivateGroupSizes(1.0, group_ids=[True]),
    )
    _fails_atomically(estimator, X, y, ValueError, r"not in PrivateGroupSizes.group_ids: \[False\]")
    for bad, error in (
        ([True, True], ValueError),
        ([[1]], TypeError),
        ([], ValueError),
        ("ab", TypeError),
    ):
        estimator.set_params(group_sizes=PrivateGroupSizes(1.0, group_ids=bad))
        _fails_atomically(estimator, X, y, error, "group_ids")


def test_agent_groups_with_mondrian():
    X, y = _exact_data([[0.2, 0.5] * 50, [0.1, 0.3] * 50])
    estimator = PrivateConformalRegressor(
        SecondColumn().fit(X, y),
        mechanism=SplitConformal(),
        score_bounds=(0.0, 1.0),
        mondrian=first_column_positive,
        group_sizes="public",
    )
    with pytest.raises(ValueError, match=r"groups \(agent ids\) is for federated"):
        estimator.fit_calibrate(X, y, groups=np.zeros(len(y)))
    assert not hasattr(estimator, "calibration_")
