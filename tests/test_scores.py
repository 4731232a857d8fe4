"""Conformity scores: sets are exactly {y : score(x, y) <= threshold}.

For LAC, APS (plain and randomised) and RAPS: the sets equal the scores of every label
compared with the threshold, bit for bit, including ties, the randomised variants and
thresholds one ulp either side of a score; the scores equal a plain numpy formula of the
papers; rows processed in blocks give the same results as rows processed alone.
"""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import InvalidParameterError

from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn.mechanisms import ExponQ, SplitConformal
from privconf_sklearn.scores import APS, LAC, RAPS
from privconf_sklearn.scores.classification import _lac_cutoff  # exactness of a helper


def _all_scores(score, proba, random_state=None):
    n, k = proba.shape
    return np.column_stack(
        [score.conformity_scores(proba, np.full(n, j), random_state=random_state) for j in range(k)]
    )


@st.composite
def probability_rows(draw, max_rows=8):
    k = draw(st.integers(1, 7))
    n = draw(st.integers(1, max_rows))
    raw = draw(arrays(np.float64, (n, k), elements=st.floats(0, 10, allow_subnormal=False)))
    raw[:, 0] += 1e-3
    if draw(st.booleans()):
        raw = np.round(raw)  # ties
        raw[:, 0] += 1.0
    return raw / raw.sum(axis=1, keepdims=True)


scores_strategy = st.one_of(
    st.just(LAC()),
    st.builds(APS, randomized=st.booleans()),
    st.builds(
        RAPS,
        k_reg=st.integers(0, 8),
        lambda_=st.sampled_from([0.0, 1e-3, 0.01, 0.1, 0.2, 0.5, 1.7, 1e3]),
        randomized=st.booleans(),
    ),
)


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(probability_rows(), st.floats(0, 3), scores_strategy)
def test_sets_equal_scores_below_threshold(proba, threshold, score):
    scores = _all_scores(score, proba, random_state=3)
    values = np.unique(scores)
    around = np.r_[np.nextafter(values, -np.inf), values, np.nextafter(values, np.inf)]
    for t in (threshold, -0.5, *around):
        sets = score.predict_set(proba, t, random_state=3)
        assert np.array_equal(sets, scores <= t), (t, scores)


def plain_formula(score, proba, random_state=None):
    """Scores of every label, written as in the papers (one label at a time)."""
    n, k = proba.shape
    u = check_random_state(random_state).uniform(size=n)
    result = np.empty((n, k))
    for i in range(n):
        p = proba[i]
        for y in range(k):
            above = p[p > p[y]].sum()
            group = p[p == p[y]].sum()
            if isinstance(score, LAC):
                result[i, y] = 1.0 - p[y]
                continue
            result[i, y] = above + (u[i] * group if score.randomized else group)
            if isinstance(score, RAPS):
                rank = np.count_nonzero(p >= p[y])
                result[i, y] += score.lambda_ * max(0, rank - score.k_reg)
    return result


SCORES = [
    LAC(),
    APS(),
    APS(randomized=True),
    RAPS(),
    RAPS(k_reg=2, lambda_=0.1),
    RAPS(k_reg=0, lambda_=0.5, randomized=True),
    RAPS(k_reg=3, lambda_=0.01, randomized=True),
]


@pytest.mark.parametrize("score", SCORES, ids=repr)
def test_scores_equal_the_plain_formula(score):
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.full(6, 0.5), size=400)
    proba[:100] = np.round(proba[:100] * 4)  # ties
    proba[:100, 0] += 1
    proba[:100] /= proba[:100].sum(axis=1, keepdims=True)
    scores = _all_scores(score, proba, random_state=5)
    formula = plain_formula(score, proba, random_state=5)
    np.testing.assert_allclose(scores, np.clip(formula, 0, None), rtol=0, atol=1e-12)
    # Away from the formula's values, sets are the formula's sets.
    for t in np.quantile(formula, [0.1, 0.3, 0.5, 0.7, 0.9]):
        clear = np.abs(formula - t).min(axis=1) > 1e-9
        sets = score.predict_set(proba, t, random_state=5)
        assert np.array_equal(sets[clear], (formula <= t)[clear])


@pytest.mark.parametrize("score", SCORES, ids=repr)
def test_blocks_do_not_change_results(score):
    """Many rows (several blocks) give row by row what a few rows at a time give."""
    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.full(3, 0.3), size=70_001)
    proba[::7] = np.round(proba[::7] * 3) + np.array([1, 0, 0])
    proba[::7] /= proba[::7].sum(axis=1, keepdims=True)
    labels = rng.integers(0, 3, size=proba.shape[0])
    whole = score.conformity_scores(proba, labels, random_state=2)
    threshold = float(np.quantile(whole, 0.8))
    sets = score.predict_set(proba, threshold, random_state=2)
    assert np.array_equal(sets[np.arange(proba.shape[0]), labels], whole <= threshold)
    if not getattr(score, "randomized", False):  # compare with small pieces
        parts = [slice(0, 1), slice(1, 999), slice(999, 40_000), slice(40_000, None)]
        pieces = np.concatenate([score.conformity_scores(proba[s], labels[s]) for s in parts])
        assert np.array_equal(pieces, whole)
        pieces = np.vstack([score.predict_set(proba[s], threshold) for s in parts])
        assert np.array_equal(pieces, sets)


@settings(max_examples=500, deadline=None)
@given(st.floats(0, 1, exclude_max=True), st.floats(0, 1))
def test_lac_cutoff_is_exact(threshold, p):
    cutoff = _lac_cutoff(threshold)
    assert (p >= cutoff) == (1.0 - p <= threshold)


def test_aps_scores_in_unit_interval_and_last_label_scores_one():
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(7), size=2000)
    scores = _all_scores(APS(), proba)
    assert ((scores >= 0) & (scores <= 1)).all()
    assert (scores[np.arange(2000), proba.argmin(axis=1)] == 1.0).all()
    assert APS().predict_set(proba, 1.0).all()
    assert LAC().predict_set(proba, 1.0).all()
    assert not LAC().predict_set(proba, -0.1).any()


def test_aps_ties_do_not_depend_on_class_order():
    proba = np.array([[0.4, 0.3, 0.3]])
    scores = _all_scores(APS(), proba)
    assert scores.tolist() == [[0.4, 1.0, 1.0]]
    assert APS().predict_set(proba, 0.9).tolist() == [[True, False, False]]
    raps = RAPS(k_reg=1, lambda_=0.5)
    assert _all_scores(raps, proba).tolist() == [[0.4, 2.0, 2.0]]
    permuted = proba[:, [2, 0, 1]]
    assert _all_scores(raps, permuted).tolist() == [[2.0, 0.4, 2.0]]


class FixedUniforms(np.random.RandomState):
    """A random state whose uniforms are given (the randomised scores' only draw)."""

    def __init__(self, values):
        super().__init__(0)
        self.values = np.asarray(values, dtype=float)

    def uniform(self, low=0.0, high=1.0, size=None):
        return self.values[: int(np.prod(size))].reshape(size)


@pytest.mark.parametrize("score", [APS(True), RAPS(randomized=True)], ids=repr)
def test_rows_summing_above_one_still_score_in_range(score):
    """Valid rows may sum to 1 + 1e-9: a group's mass can exceed 1, scores can't leave the range."""
    proba = np.array([[1 + 1e-9, 0.0, 0.0], [0.5, 0.5 + 1e-9, 0.0], [0.2, 0.3, 0.5 + 1e-9]])
    u = [0.0, 1e-12, 5e-324]
    scores = _all_scores(score, proba, random_state=FixedUniforms(u))
    low, high = score.score_range(3) if isinstance(score, RAPS) else (0.0, 1.0)
    assert scores.min() == low == 0.0 and scores.max() <= high
    for t in (-1e-300, 0.0, 5e-324, 1e-9):
        sets = score.predict_set(proba, t, random_state=FixedUniforms(u))
        assert np.array_equal(sets, scores <= t)


def test_randomised_aps_is_no_larger_than_aps():
    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.ones(5), size=500)
    plain = _all_scores(APS(), proba)
    randomised = _all_scores(APS(randomized=True), proba, random_state=0)
    assert (randomised <= plain + 1e-15).all()


@pytest.mark.parametrize("score", [APS(randomized=True), RAPS(randomized=True)], ids=repr)
def test_randomised_scores_draw_from_a_generator_as_from_its_bits(score):
    proba = np.random.default_rng(3).dirichlet(np.ones(4), size=50)
    y = np.arange(50) % 4
    # A Generator is used through its bit generator: the uniforms a RandomState on the
    # same bits would draw, and the Generator advances.
    rng, bits = np.random.default_rng(5), np.random.PCG64(5)
    assert np.array_equal(
        score.conformity_scores(proba, y, random_state=rng),
        score.conformity_scores(proba, y, random_state=np.random.RandomState(bits)),
    )
    assert np.array_equal(
        score.predict_set(proba, 0.6, random_state=rng),
        score.predict_set(proba, 0.6, random_state=np.random.RandomState(bits)),
    )
    assert rng.random() == np.random.Generator(bits).random()


def test_raps_with_no_penalty_is_aps_and_its_sets_are_inside_aps_sets():
    rng = np.random.default_rng(2)
    proba = rng.dirichlet(np.full(10, 0.5), size=1000)
    for randomized in (False, True):
        aps = _all_scores(APS(randomized=randomized), proba, random_state=4)
        raps = _all_scores(RAPS(k_reg=1, lambda_=0.0, randomized=randomized), proba, 4)
        assert np.array_equal(aps, raps)
    # The penalty is >= 0: at any threshold, a RAPS set is inside the APS set.
    for t in (0.3, 0.9, 1.0, 1.2):
        raps_sets = RAPS(k_reg=1, lambda_=0.2).predict_set(proba, t)
        aps_sets = APS().predict_set(proba, t)
        assert not (raps_sets & ~aps_sets).any()
        assert raps_sets.sum() < aps_sets.sum() or t < 0.5  # top labels are not penalised


@pytest.mark.parametrize("k_reg", [0, 1, 4, 10, 11, 10**30])
@pytest.mark.parametrize("lambda_", [0.0, 0.01, 0.3, 7.0])
def test_raps_range_is_attained_by_the_least_likely_label(k_reg, lambda_):
    rng = np.random.default_rng(3)
    proba = rng.dirichlet(np.ones(10), size=300)
    score = RAPS(k_reg=k_reg, lambda_=lambda_)
    low, high = score.score_range(10)
    assert low == 0.0 and high == 1.0 + lambda_ * max(0, 10 - k_reg)
    scores = _all_scores(score, proba)
    assert (scores >= low).all() and (scores <= high).all()
    assert (scores[np.arange(300), proba.argmin(axis=1)] == high).all()
    assert score.predict_set(proba, high).all()
    assert not score.predict_set(proba, np.nextafter(high, 0)).all(axis=1).any()


def test_raps_natural_bounds_come_from_the_fitted_estimator():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = rng.integers(0, 4, size=300)
    model = LogisticRegression().fit(X, y)
    score = RAPS(k_reg=1, lambda_=0.25)
    with pytest.raises(NotFittedError, match="number of classes"):
        _ = score.natural_bounds
    score.check_estimator(model)
    assert score.n_classes_ == 4 and score.natural_bounds == (0.0, 1.75)
    assert LAC().natural_bounds == APS().natural_bounds == (0.0, 1.0)


RAPS_ERROR = "The '{}' parameter of RAPS must be {}. Got {!r} instead."
BOOLEAN = "an instance of 'bool' or an instance of 'numpy.bool'"


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"randomized": "yes"}, InvalidParameterError, BOOLEAN),
        ({"randomized": 1}, InvalidParameterError, BOOLEAN),
        ({"k_reg": 1.5}, InvalidParameterError, "an int in the range [0, inf)"),
        ({"k_reg": True}, InvalidParameterError, "an int in the range [0, inf)"),
        ({"k_reg": "2"}, InvalidParameterError, "an int in the range [0, inf)"),
        ({"k_reg": -1}, InvalidParameterError, "an int in the range [0, inf)"),
        ({"lambda_": "0.1"}, InvalidParameterError, "a float in the range [0.0, inf)"),
        ({"lambda_": -0.01}, InvalidParameterError, "a float in the range [0.0, inf)"),
        ({"lambda_": float("nan")}, InvalidParameterError, "a float in the range [0.0, inf)"),
        ({"lambda_": float("inf")}, InvalidParameterError, "a float in the range [0.0, inf)"),
        ({"lambda_": 1e308}, ValueError, "too large for 3 classes"),
    ],
)
def test_bad_raps_parameters(params, error, match):
    proba = np.array([[0.5, 0.3, 0.2]])
    if error is InvalidParameterError:
        ((name, value),) = params.items()
        match = re.escape(RAPS_ERROR.format(name, match, value))
    with pytest.raises(error, match=match):
        RAPS(**params).conformity_scores(proba, np.array([0]))
    with pytest.raises(error, match=match):
        RAPS(**params).predict_set(proba, 0.5)


def test_bad_aps_parameter():
    with pytest.raises(
        InvalidParameterError, match=f"The 'randomized' parameter of APS must be {BOOLEAN}"
    ):
        APS(randomized="yes").conformity_scores(np.array([[1.0, 0.0]]), np.array([0]))


# ------------------------------------------------------ through the estimator
@pytest.fixture(scope="module")
def digits_model():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    X, y = X[order] / 16.0, y[order]
    model = LogisticRegression(max_iter=2000).fit(X[:800], y[:800])
    return model, X[800:1400], y[800:1400], X[1400:], y[1400:]


@pytest.mark.parametrize("alias", ["lac", "aps", "aps_randomized", "raps"])
@pytest.mark.parametrize("mechanism", [SplitConformal(), ExponQ(epsilon=1.0)], ids=repr)
def test_aliases_sets_are_score_below_threshold(digits_model, alias, mechanism):
    model, X_cal, y_cal, X_test, _ = digits_model
    pcc = PrivateConformalClassifier(
        model, mechanism=mechanism, conformity_score=alias, random_state=0
    ).fit_calibrate(X_cal, y_cal)
    expected = {"lac": LAC(), "aps": APS(), "aps_randomized": APS(True), "raps": RAPS()}[alias]
    assert repr(pcc.score_) == repr(expected)
    if alias == "raps":
        assert pcc.score_bounds_ == RAPS().score_range(10) == (0.0, 1.09)
    else:
        assert pcc.score_bounds_ == (0.0, 1.0)
    proba = model.predict_proba(X_test)
    scores = _all_scores(pcc.score_, proba, random_state=0)
    assert np.array_equal(pcc.predict_set(X_test), scores <= pcc.threshold_)
    assert pcc.threshold_ <= pcc.score_bounds_[1]
