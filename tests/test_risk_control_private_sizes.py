"""Mondrian risk control with private group sizes: exact privacy, the release, the bound.

- Exact privacy: the joint distribution of the released sizes ``m_g`` and every group's
  released candidate is computed in closed form (discrete Laplace sizes, a uniform
  ``m_g``-subset of the group's rows or the rows padded with loss-``B`` rows, ExponCRC's
  own exact release distribution), on neighbouring data sets of every kind; the largest
  log-ratio must not exceed the recorded epsilon.
- The estimator draws from that distribution (cell-by-cell binomial limits).
- Monte Carlo: every group's expected loss stays below ``alpha + beta (B - alpha)``, and
  with split CRC close to ``alpha`` (a biased subsample would break it).
- The record, the card and its verification, the ledger, and the errors.
"""

from __future__ import annotations

import itertools
import json
import math
import warnings

import numpy as np
import pytest
from scipy import stats

from privconf_sklearn import PrivateRiskControlClassifier
from privconf_sklearn.cards import RiskCard, RiskContract, verify_card
from privconf_sklearn.mechanisms import (
    ExponCRC,
    InfeasibleCalibrationWarning,
    LossCurve,
    SplitCRC,
    UninformativeCalibrationWarning,
)
from privconf_sklearn.mondrian import PrivateGroupSizes, mondrian_privacy
from privconf_sklearn.risk_control import private_sizes_risk_bound

from ._multilabel import SecondColumnProbability
from ._privacy import dict_privacy_loss, private_size_distribution
from ._stats import FALSE_FAILURE


def sign_group(X):
    return np.asarray(X)[:, 0] > 0


# ------------------------------------------------------------ exact privacy
# Label 1 is every row's true label, with probability p; the sets are {k : p_k > t} on
# the grid (0.6, 0.3, -inf): the row is missed (FNR 1, Q = 2 units) at every t >= p.
EPSILON, SIZE_EPSILON, BETA, ALPHA = 2.0, 1.5, 0.9, 0.5
GRID = (0.6, 0.3)
Q = 2  # the FNR's resolution with two labels: lcm(1, 2)
PADDING = (Q, Q, 0)  # every label true at probability 0: missed down to t = 0


def _units(p: float) -> tuple[int, ...]:
    return tuple(Q if p <= t else 0 for t in (*GRID, -math.inf))


def _release(rows: list[tuple[int, ...]]) -> dict:
    """{candidate: probability} of ExponCRC on these loss rows (m_g = 0: every label)."""
    if not rows:
        return {2: 1.0}
    sums = np.sum(rows, axis=0).astype(np.int64)
    log_p = ExponCRC(EPSILON).release_distribution(LossCurve(sums, len(rows), Q, 1.0), ALPHA)
    return {j: float(np.exp(v)) for j, v in enumerate(log_p) if v > -np.inf}


def _group_release(ps: list[float], m: int) -> dict:
    """The group's release at private size m: a uniform m-subset, or all rows padded."""
    rows = [_units(p) for p in ps]
    if m > len(rows):
        return _release(rows + [PADDING] * (m - len(rows)))
    subsets = list(itertools.combinations(rows, m))
    total: dict = {}
    for subset in subsets:
        for j, p in _release(list(subset)).items():
            total[j] = total.get(j, 0.0) + p / len(subsets)
    return total


def _joint(groups: list[list[float]], n_cap: int) -> dict:
    """{(m_A, m_B, j_A, j_B): probability} of the whole release."""
    offset = PrivateGroupSizes(SIZE_EPSILON, beta=BETA).offset()
    sizes = [private_size_distribution(len(g), n_cap, offset, SIZE_EPSILON) for g in groups]
    joint: dict = {}
    for ms in itertools.product(range(n_cap + 1), repeat=len(groups)):
        weight = math.prod(sizes[g][m] for g, m in enumerate(ms))
        releases = [_group_release(g, m) for g, m in zip(groups, ms, strict=True)]
        for js in itertools.product(*(sorted(r) for r in releases)):
            probability = weight * math.prod(r[j] for r, j in zip(releases, js, strict=True))
            joint[(*ms, *js)] = joint.get((*ms, *js), 0.0) + probability
    return joint


GROUP_A, GROUP_B = [0.2, 0.5, 0.9], [0.1, 0.7, 0.4]
NEIGHBOURS = {
    # name: (adjacency, group A, group B)
    "replace within A": ("replace-one", [0.95, 0.5, 0.9], GROUP_B),
    "replace, A -> B": ("replace-one", [0.5, 0.9], [0.1, 0.7, 0.4, 0.2]),
    "replace, B -> A": ("replace-one", [0.2, 0.5, 0.9, 0.05], [0.7, 0.4]),
    "add to A": ("add/remove", [0.2, 0.5, 0.9, 0.25], GROUP_B),
    "remove from B": ("add/remove", GROUP_A, [0.7, 0.4]),
}


def test_the_exact_model_is_a_distribution_with_padding_and_subsets():
    joint = _joint([GROUP_A, GROUP_B], 6)
    assert sum(joint.values()) == pytest.approx(1.0, abs=1e-12)
    sizes = {key[:2] for key, p in joint.items() if p > 0}
    assert any(m > 3 for m, _ in sizes) and any(0 < m < 3 for m, _ in sizes)  # both paths
    assert len({key[2] for key in joint}) == 3  # every candidate is possible


@pytest.mark.parametrize("name", sorted(NEIGHBOURS))
def test_exact_privacy_of_private_sizes(name):
    """Sizes and candidates together: max |log P_D - log P_D'| <= the recorded epsilon
    (add/remove with the public n fixed, the library's convention)."""
    adjacency, group_a, group_b = NEIGHBOURS[name]
    loss = dict_privacy_loss(_joint([GROUP_A, GROUP_B], 6), _joint([group_a, group_b], 6))
    recorded = mondrian_privacy(
        ExponCRC(EPSILON), PrivateGroupSizes(SIZE_EPSILON, beta=BETA), adjacency
    ).epsilon
    assert loss <= recorded * (1 + 1e-9)
    assert loss > 0.5 * SIZE_EPSILON  # the pair is distinguishable: the check is not void


def _exact_rows(groups):
    X = [[sign, p] for sign, ps in zip((-1.0, 1.0), groups, strict=True) for p in ps]
    return np.array(X), np.ones(len(X), dtype=int)


def _estimator(mechanism, sizes, **params):
    X, y = _exact_rows([GROUP_A, GROUP_B])
    return PrivateRiskControlClassifier(
        SecondColumnProbability().fit(X, y),
        mechanism=mechanism,
        mondrian=sign_group,
        group_sizes=sizes,
        **params,
    )


@pytest.mark.slow
def test_estimator_release_follows_the_exact_distribution():
    """Exact two-sided binomial limits per cell, Bonferroni over the cells: a biased
    subsample, a wrong padding row or a shared noise stream fails here."""
    runs = 3000
    X, y = _exact_rows([GROUP_A, GROUP_B])
    sizes = PrivateGroupSizes(SIZE_EPSILON, beta=BETA, group_ids=[False, True])
    estimator = _estimator(ExponCRC(EPSILON), sizes, alpha=ALPHA, thresholds=list(GRID))
    counts: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        for run in range(runs):
            record = estimator.set_params(random_state=run).fit_calibrate(X, y).calibration_
            key = (
                *(r.n_samples for _, r in record.groups),
                *(r.index for _, r in record.groups),
            )
            counts[key] = counts.get(key, 0) + 1
    exact = _joint([GROUP_A, GROUP_B], len(y))
    assert set(counts) <= {key for key, p in exact.items() if p > 0}
    per_cell = FALSE_FAILURE / (2 * len(exact))
    for key, p in exact.items():
        observed = counts.get(key, 0)
        assert stats.binom.cdf(observed, runs, p) > per_cell, (key, observed, p)
        assert stats.binom.sf(observed - 1, runs, p) > per_cell, (key, observed, p)
    # Where the subset matters: group A's candidate given m_A = 2 (of its 3 rows).
    given = {j: 0 for j in range(3)}
    for key, count in counts.items():
        if key[0] == 2:
            given[key[2]] += count
    total = sum(given.values())
    expected = _group_release(GROUP_A, 2)
    for j, count in given.items():
        p = expected.get(j, 0.0)
        assert stats.binom.cdf(count, total, p) > FALSE_FAILURE / 6, (j, count, total, p)
        assert stats.binom.sf(count - 1, total, p) > FALSE_FAILURE / 6, (j, count, total, p)


# ------------------------------------------------------------ the risk bound
def _bernstein_tolerance(values, false_failure=FALSE_FAILURE):
    """Maurer and Pontil (2009), Theorem 4, for values in [0, 1], one-sided."""
    t = values.shape[0]
    log_term = math.log(2.0 / false_failure)
    return math.sqrt(2 * values.var(ddof=1) * log_term / t) + 7 * log_term / (3 * (t - 1))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mechanism", "beta", "tight"),
    [(SplitCRC(), 1e-3, 0.9), (ExponCRC(2.0), 1e-3, None), (SplitCRC(), 0.4, None)],
    ids=["split", "expon", "split-padded"],
)
def test_every_group_risk_meets_the_private_sizes_bound(mechanism, beta, tight):
    """p ~ U(0, 1) in both groups (30% of rows in group True): a row is missed at t
    iff p <= t, so a release at t has conditional risk exactly t (0 for every label).
    The mean over calibration sets of each group's risk is at most alpha + beta (1 -
    alpha); split CRC on a uniform subset comes close to alpha (the CRC step is tight)."""
    alpha, n, trials = 0.1, 600, 1500
    sizes = PrivateGroupSizes(0.5, beta=beta, group_ids=[False, True])
    rng = np.random.default_rng(7)
    model = SecondColumnProbability().fit(np.zeros((1, 2)), [1])
    estimator = PrivateRiskControlClassifier(
        model,
        mechanism=mechanism,
        alpha=alpha,
        thresholds=np.linspace(0.999, 0.0, 1000),
        mondrian=sign_group,
        group_sizes=sizes,
    )
    risks = np.empty((trials, 2))
    padded = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        warnings.simplefilter("ignore", InfeasibleCalibrationWarning)
        for t in range(trials):
            X = np.column_stack([rng.uniform(-0.7, 0.3, n), rng.uniform(size=n)])
            estimator.set_params(random_state=t).fit_calibrate(X, np.ones(n, dtype=int))
            thresholds = estimator.group_thresholds_
            risks[t] = np.where(np.isfinite(thresholds), thresholds, 0.0)
            real = estimator.calibration_.owner_diagnostics["group_sizes"]
            released = [r.n_samples for _, r in estimator.calibration_.groups]
            padded += sum(m > g for m, g in zip(released, real, strict=True))
    bound = private_sizes_risk_bound(alpha, beta, 1.0)
    for group in range(2):
        values = risks[:, group]
        assert values.mean() - _bernstein_tolerance(values) <= bound, group
        if tight is not None:
            assert values.mean() + _bernstein_tolerance(values) >= tight * alpha, group
    if beta > 0.1:
        assert padded > trials / 10  # the padding path ran


# ------------------------------------------------------------ record and card
@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(3)
    X = np.column_stack([rng.uniform(-1, 1, 3000), rng.uniform(size=3000)])
    sizes = PrivateGroupSizes(0.5, group_ids=[False, True, "never"])
    estimator = PrivateRiskControlClassifier(
        SecondColumnProbability().fit(X, np.ones(3000, dtype=int)),
        mechanism=ExponCRC(1.0),
        alpha=0.1,
        mondrian=sign_group,
        group_sizes=sizes,
        random_state=0,
    )
    with pytest.warns(InfeasibleCalibrationWarning, match="private lower bound"):
        estimator.fit_calibrate(X, np.ones(3000, dtype=int))
    return estimator, X


def test_record_states_sizes_bounds_and_the_composed_guarantee(fitted):
    estimator, X = fitted
    record = estimator.calibration_
    assert record.group_sizes is estimator.group_sizes
    assert record.privacy.epsilon == 2 * 0.5 + 2 * 1.0  # replace-one: a row may move
    exact = record.owner_diagnostics["group_sizes"]
    assert exact == [int(np.sum(~sign_group(X))), int(np.sum(sign_group(X))), 0]
    released = [r.n_samples for _, r in record.groups]
    offset = estimator.group_sizes.offset()
    assert released[2] == 0 and all(0 < m <= len(X) for m in released[:2])
    assert all(abs(m - g) <= 6 * offset for m, g in zip(released[:2], exact[:2], strict=True))
    bound = private_sizes_risk_bound(0.1, 1e-3, 1.0)
    assert record.group_risk_bounds == (bound, bound, 0.0) == (0.1009, 0.1009, 0.0)
    assert record.risk_upper_bound == bound
    assert estimator.groups_.tolist() == [False, True, "never"]
    assert estimator.group_thresholds_[2] == -np.inf  # every label, no row read


def test_card_records_the_size_release_and_verifies(fitted):
    estimator, _ = fitted
    contract = RiskContract(
        "fnr", 1.0, max_risk=0.101, max_epsilon_train=math.inf, max_epsilon_cal=3.0
    )
    card = RiskCard.from_estimator(estimator, contract)
    spec = card.configuration.group_sizes
    assert spec.name == "PrivateGroupSizes" and spec.params["epsilon"] == 0.5
    entries = card.calibrations
    assert [e.n_samples for e in entries] == [r.n_samples for _, r in estimator.calibration_.groups]
    assert [e.risk_bound for e in entries] == [0.1009, 0.1009, 0.0]
    text = card.to_json()
    assert "group_sizes" not in json.loads(text).get("owner_diagnostics", {})
    assert verify_card(text).status == "rejected"  # group "never" cannot reach alpha
    assert [c.name for c in card.clauses if not c.satisfied] == ["level_reachable", "informative"]
    data = json.loads(text)
    data["formal"]["calibrations"][0]["risk_bound"] = 0.1  # the public-size bound: false
    assert verify_card(data).status == "inconsistent"
    data = json.loads(text)
    data["formal"]["configuration"]["group_sizes"]["params"]["beta"] = 1e-6
    assert verify_card(data).status == "inconsistent"
    data = json.loads(text)
    data["formal"]["privacy"]["calibration"]["epsilon"] = 2.0  # the sizes left out
    assert verify_card(data).status == "inconsistent"


def test_public_size_cards_are_unchanged_by_the_new_field():
    X, y = _exact_rows([GROUP_A * 40, GROUP_B * 40])
    estimator = _estimator(SplitCRC(), "public", alpha=0.3).fit_calibrate(X, y)
    data = json.loads(estimator.card_.to_json())
    assert "group_sizes" not in data["formal"]["configuration"]
    result = verify_card(data)
    assert result.status == "unchecked" and not result.problems  # consistent, no contract


def test_ledger_is_charged_the_composed_guarantee(dp):
    X, y = _exact_rows([GROUP_A * 40, GROUP_B * 40])
    ledger = dp.accountant.BudgetAccountant(epsilon=4.0)
    sizes = PrivateGroupSizes(0.5, group_ids=[False, True])
    _estimator(ExponCRC(1.0), sizes, alpha=0.3, accountant=ledger, random_state=0).fit_calibrate(
        X, y
    )
    assert ledger.spent_budget == [(3.0, 0.0)]


@pytest.mark.parametrize(
    ("sizes", "match"),
    [
        (PrivateGroupSizes(0.5), "needs the public list of group ids"),
        (PrivateGroupSizes(-1.0, group_ids=[False, True]), "epsilon"),
        (PrivateGroupSizes(0.5, group_ids=[True]), r"not in .*group_ids: \[False\]"),
    ],
)
def test_bad_size_releases_fail_before_anything_is_released(sizes, match):
    X, y = _exact_rows([GROUP_A, GROUP_B])
    estimator = _estimator(ExponCRC(1.0), sizes, alpha=0.5, random_state=0)
    with pytest.raises(ValueError, match=match):
        estimator.fit_calibrate(X, y)
    assert not hasattr(estimator, "calibration_")


def test_a_loss_that_cannot_score_the_padding_row_is_refused_first():
    """A callable loss must score the padding row (the first label true, at probability
    0, for a single-label task): checked before any row is read, whatever the sizes
    turn out to be. This loss is valid on the data (label 1 only) but not on that row."""

    def label_zero_costs_two(y_true, y_set):
        return np.where(y_true[:, 0] & ~y_set[:, 0], 2.0, (y_true & ~y_set).any(axis=1) * 1.0)

    X, y = _exact_rows([GROUP_A, GROUP_B])
    estimator = _estimator(
        ExponCRC(1.0),
        PrivateGroupSizes(0.5, group_ids=[False, True]),
        alpha=0.5,
        loss=label_zero_costs_two,
        loss_bound=1.0,
    )
    with pytest.raises(ValueError, match="padded with rows whose first label is true"):
        estimator.fit_calibrate(X, y)
    assert not hasattr(estimator, "calibration_")
    estimator.set_params(group_sizes="public").fit_calibrate(X, y)  # fine without padding
