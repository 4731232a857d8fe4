"""scikit-learn searches lead to the conformal scorers.

- The estimators' ``score`` is the wrapped model's accuracy / R^2 (the risk control's
  too). A search that ranks
  by it (``scoring=None``) warns, once per search, at the user's ``fit`` line, with a
  :class:`~privconf_sklearn.metrics.DefaultScoreWarning`; a direct ``score`` call, a
  search with ``scoring=`` a scorer or a scikit-learn scoring name do not warn.
- ``informative_rate`` and ``informative_rate_scorer`` count exactly the rows whose
  prediction is not the trivial one (full set; interval from a threshold at the upper
  score bound), for marginal and Mondrian calibration.
- A search over a risk control ranks by ``neg_mean_loss_scorer`` (the held-out mean loss
  of its sets) and ``neg_mean_set_size_scorer``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.multioutput import MultiOutputClassifier

from privconf_sklearn import (
    PrivateConformalClassifier,
    PrivateConformalRegressor,
    PrivateRiskControlClassifier,
)
from privconf_sklearn.mechanisms import ExponCRC, ExponQ, SplitConformal, SplitCRC
from privconf_sklearn.metrics import (
    DefaultScoreWarning,
    informative_rate,
    informative_rate_scorer,
    neg_mean_loss_scorer,
    neg_mean_set_size_scorer,
    set_coverage_scorer,
)

from ._multilabel import make_multilabel


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 3))
    y = (X[:, 0] + rng.normal(size=1500) > 0).astype(int)
    model = LogisticRegression().fit(X[:500], y[:500])
    return model, X[500:], y[500:]


def _classifier(model, alpha=0.1):
    return PrivateConformalClassifier(model, mechanism=SplitConformal(), alpha=alpha)


def test_default_score_warns_once_per_search_at_the_fit_line(data):
    model, X, y = data
    search = GridSearchCV(_classifier(model), {"alpha": [0.05, 0.1, 0.2]}, cv=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search.fit(X, y)
    found = [w for w in caught if issubclass(w.category, DefaultScoreWarning)]
    assert len(found) == 1, [str(w.message) for w in caught]
    assert found[0].filename == __file__
    message = str(found[0].message)
    assert "accuracy" in message and "set_coverage_scorer" in message
    assert "informative_rate_scorer" in message and "scoring=" in message


def test_default_score_of_a_regressor_warns_in_cross_validation(data):
    _, X, y = data
    target = X[:, 0] + 0.1 * y
    model = LinearRegression().fit(X[:300], target[:300])
    estimator = PrivateConformalRegressor(
        model, mechanism=SplitConformal(), alpha=0.1, score_bounds=(0.0, 10.0)
    )
    with pytest.warns(DefaultScoreWarning, match="R\\^2") as caught:
        cross_val_score(estimator, X[300:], target[300:], cv=2)
    assert [w.filename for w in caught if w.category is DefaultScoreWarning] == [__file__]


def test_direct_score_and_explicit_scoring_do_not_warn(data):
    model, X, y = data
    estimator = _classifier(model).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert estimator.score(X, y) == model.score(X, y)
        for scoring in ("accuracy", set_coverage_scorer, neg_mean_set_size_scorer):
            GridSearchCV(_classifier(model), {"alpha": [0.1, 0.2]}, cv=2, scoring=scoring).fit(X, y)


def test_informative_rate_counts_sets_that_leave_a_label_out():
    sets = np.array([[True, False, True], [True, True, True], [False, False, False]])
    assert informative_rate(sets) == pytest.approx(2 / 3)
    assert informative_rate(np.ones((4, 2), dtype=bool)) == 0.0
    with pytest.raises(TypeError, match="boolean"):
        informative_rate(np.array([[1, 0]]))


def test_informative_rate_scorer_on_classifier_sets(data):
    model, X, y = data
    estimator = _classifier(model).fit(X[:500], y[:500])
    sets = estimator.predict_set(X[500:])
    expected = np.mean(sets.sum(axis=1) < sets.shape[1])
    assert 0.0 < expected < 1.0  # both kinds of rows occur
    assert informative_rate_scorer(estimator, X[500:], y[500:]) == expected
    with pytest.warns(UserWarning, match="top of the range|infeasible|at least"):
        trivial = PrivateConformalClassifier(
            model, mechanism=ExponQ(epsilon=0.1), alpha=0.1
        ).fit_calibrate(X[:20], y[:20])
    assert not trivial.calibration_.informative
    assert informative_rate_scorer(trivial, X[500:], y[500:]) == 0.0


def _first_feature_sign(X):
    return np.where(np.asarray(X)[:, 0] > 0, "positive", "negative")


def test_informative_rate_scorer_on_intervals(data):
    _, X, _ = data
    target = X[:, 1] + 0.1 * np.random.default_rng(1).normal(size=X.shape[0])
    model = LinearRegression().fit(X[:300], target[:300])
    marginal = PrivateConformalRegressor(
        model, mechanism=SplitConformal(), alpha=0.1, score_bounds=(0.0, 5.0)
    ).fit_calibrate(X[300:700], target[300:700])
    assert informative_rate_scorer(marginal, X[700:], target[700:]) == 1.0
    # Mondrian: the positive group has 400 calibration rows, the negative one 15, too few
    # for ExponQ at epsilon 1: its intervals are bound-wide; the scorer counts the rows.
    rows = np.flatnonzero(X[300:, 0] > 0)[:400] + 300
    rows = np.concatenate([rows, np.flatnonzero(X[300:, 0] <= 0)[:15] + 300])
    with pytest.warns(UserWarning):
        grouped = PrivateConformalRegressor(
            model,
            mechanism=ExponQ(epsilon=1.0),
            alpha=0.1,
            score_bounds=(0.0, 5.0),
            mondrian=_first_feature_sign,
            group_sizes="public",
            random_state=0,
        ).fit_calibrate(X[rows], target[rows])
    informative = {g.group: g.informative for g in grouped.calibration_.groups}
    assert informative == {"negative": False, "positive": True}
    test = X[700:]
    expected = np.mean(test[:, 0] > 0)
    assert informative_rate_scorer(grouped, test, target[700:]) == expected


# ---------------------------------------------------------------- risk control
@pytest.fixture(scope="module")
def multilabel():
    X, Y = make_multilabel(2500, seed=3)
    model = MultiOutputClassifier(LogisticRegression()).fit(X[:1000], Y[:1000])
    return model, X[1000:], Y[1000:]


def _risk_control(model, mechanism=None, **params):
    mechanism = SplitCRC() if mechanism is None else mechanism
    return PrivateRiskControlClassifier(model, mechanism=mechanism, random_state=0, **params)


def test_default_score_of_a_risk_control_warns_in_a_search(multilabel):
    """The risk control's score is the model's subset accuracy, which alpha does not
    change: a search over alpha by it is all ties, and warns."""
    model, X, Y = multilabel
    search = GridSearchCV(_risk_control(model), {"alpha": [0.05, 0.1, 0.2]}, cv=2)
    with pytest.warns(DefaultScoreWarning, match="neg_mean_loss_scorer") as caught:
        search.fit(X, Y)
    assert [w.filename for w in caught if w.category is DefaultScoreWarning] == [__file__]
    assert len(set(search.cv_results_["mean_test_score"])) == 1  # the ties it warns about
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _risk_control(model).fit(X, Y).score(X, Y) == model.score(X, Y)


def test_risk_scorers_rank_a_search_over_alpha(multilabel):
    """Each fold's mean loss is the FNR of its sets, computed by hand; a larger alpha
    gives smaller sets and a larger loss, so the two scorers rank alpha in opposite
    orders."""
    model, X, Y = multilabel
    scoring = {"loss": neg_mean_loss_scorer, "size": neg_mean_set_size_scorer}
    search = GridSearchCV(
        _risk_control(model), {"alpha": [0.05, 0.2]}, cv=2, scoring=scoring, refit="size"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", DefaultScoreWarning)
        search.fit(X, Y)
    loss, size = search.cv_results_["mean_test_loss"], search.cv_results_["mean_test_size"]
    assert loss[0] > loss[1] and size[0] < size[1]  # -loss and -size
    assert search.best_params_ == {"alpha": 0.2}
    best = search.best_estimator_
    truth, sets = Y == 1, best.predict_set(X)
    fnr = np.mean(1 - (truth & sets).sum(axis=1) / truth.sum(axis=1))
    assert neg_mean_loss_scorer(best, X, Y) == -fnr == -best.mean_loss(X, Y)


def test_mean_loss_of_a_callable_loss_is_exact_and_checked(multilabel):
    model, X, Y = multilabel

    def cost(y_true, y_set):
        return 2.0 * (y_true & ~y_set).sum(axis=1)

    crc = _risk_control(model, ExponCRC(1.0), alpha=1.0, loss=cost, loss_bound=10.0)
    crc.fit_calibrate(X[:1000], Y[:1000])
    sets = crc.predict_set(X[1000:])
    assert crc.mean_loss(X[1000:], Y[1000:]) == cost(Y[1000:] == 1, sets).mean() > 0
    crc.score_.set_params(loss_bound=1.0)  # losses of 2 and 4 now leave [0, B]
    with pytest.raises(ValueError, match=r"lie in \[0, loss_bound\] = \[0, 1.0\]"):
        crc.mean_loss(X[1000:], Y[1000:])


def test_mean_loss_refuses_what_it_cannot_score(multilabel):
    model, X, Y = multilabel
    crc = _risk_control(model).fit_calibrate(X[:1000], Y[:1000])
    with pytest.raises(ValueError, match="X has 500 rows but y has 499"):
        crc.mean_loss(X[1000:], Y[1001:])
    with pytest.raises(ValueError, match="at least one row"):
        crc.mean_loss(X[:0], Y[:0])
    with pytest.raises(TypeError, match="2-d indicator"):
        crc.mean_loss(X[1000:], Y[1000:, 0])
    with pytest.raises(ValueError, match="indicator matrix of 0 and 1"):
        crc.mean_loss(X[1000:], 2 * Y[1000:])
    with pytest.raises(ValueError, match="2-d bool matrix"):
        crc.score_.mean_loss(Y[1000:], crc.predict_set(X[1000:]))  # 0/1 ints, not bools


@pytest.mark.parametrize(
    ("scorer", "needs"),
    [
        (set_coverage_scorer, "predict_set"),
        (neg_mean_set_size_scorer, "predict_set"),
        (neg_mean_loss_scorer, "mean_loss"),
    ],
)
def test_a_scorer_on_the_wrong_kind_of_estimator_names_what_it_needs(data, scorer, needs):
    model, X, y = data
    with pytest.raises(TypeError, match=f"LogisticRegression has no {needs}"):
        scorer(model, X, y)
