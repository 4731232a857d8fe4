"""Risk control and risk cards: what a review of the private-size and evaluation
changes found, each guarded through the public API.

Public API only. Every test is deterministic (fixed seeds, fixed data).
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin

from privconf_sklearn import PrivateRiskControlClassifier
from privconf_sklearn.cards import RiskCard, verify_card
from privconf_sklearn.mechanisms import ExponCRC
from privconf_sklearn.mondrian import PrivateGroupSizes
from privconf_sklearn.risk_control import private_sizes_risk_bound

from ._multilabel import SecondColumnProbability


class FirstColumnsProbability(ClassifierMixin, BaseEstimator):
    """A 'fitted' 3-label multilabel model: P(label k | x) is feature k."""

    def fit(self, X, y):
        self.classes_ = np.arange(3)
        return self

    def predict_proba(self, X):
        return np.clip(np.asarray(X, dtype=np.float64)[:, :3], 0.0, 1.0)

    def predict(self, X):
        return self.predict_proba(X) > 0.5


def sign_group(X):
    return np.where(np.asarray(X)[:, 0] > 0, "a", "b")


def one_group(X):
    return np.full(len(X), "g")


def _binary_data(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(size=n), rng.uniform(size=n)])
    y = (rng.uniform(size=n) < X[:, 1]).astype(int)
    return X, y


def _private_sizes_card():
    X, y = _binary_data()
    estimator = PrivateRiskControlClassifier(
        SecondColumnProbability().fit(X, y),
        mechanism=ExponCRC(epsilon=1.0),
        alpha=0.2,
        mondrian=sign_group,
        group_sizes=PrivateGroupSizes(0.5, group_ids=["a", "b"]),
        random_state=0,
    ).fit_calibrate(X, y)
    return RiskCard.from_estimator(estimator)


def test_evaluating_the_original_after_signing_leaves_the_signed_card_intact():
    """A signed copy has its own diagnostic layer and owner diagnostics: evaluating the
    unsigned original afterwards (allowed) leaves the signed card, and its signature,
    as signed."""
    ed25519 = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    X, y = _binary_data()
    estimator = PrivateRiskControlClassifier(
        SecondColumnProbability().fit(X, y),
        mechanism=ExponCRC(epsilon=1.0),
        alpha=0.2,
        random_state=0,
    ).fit_calibrate(X[:1000], y[:1000])
    key = ed25519.Ed25519PrivateKey.generate()
    card = RiskCard.from_estimator(estimator)
    signed = card.sign(key)
    assert verify_card(signed, public_key=key.public_key()).authenticated

    card.evaluate(X[1000:], y[1000:], public=True)  # the original, not the signed copy
    assert signed.diagnostics.empirical_risk is None
    assert verify_card(signed, public_key=key.public_key()).authenticated

    other = RiskCard.from_estimator(estimator)
    other_signed = other.sign(key)
    other.evaluate(X[1000:], y[1000:])  # owner-side
    assert "test" not in other_signed.owner_diagnostics


def _pair_breaks_loss(y_true, y_set):
    """The FNR, except that a row whose true labels are exactly {0, 1} always costs 1."""
    missed = (y_true & ~y_set).sum(axis=1) / np.maximum(y_true.sum(axis=1), 1)
    pair = y_true[:, 0] & y_true[:, 1] & ~y_true[:, 2]
    return np.where(pair, 1.0, missed)


def test_private_sizes_refuse_the_card_when_a_calibration_row_breaks_the_loss():
    """One calibration row has a positive loss at the set of every label. With public
    or private sizes, whether or not that row is among the ``m_g`` rows read (seeds 1
    and 3 leave it out): a LossAssumptionWarning and no card."""
    rng = np.random.default_rng(0)
    n = 200
    X = rng.uniform(size=(n, 3))
    Y = np.zeros((n, 3), dtype=int)
    Y[np.arange(n), rng.integers(0, 3, n)] = 1
    Y[0] = [1, 1, 0]  # the one row breaking the assumption
    model = FirstColumnsProbability().fit(X, Y)
    for seed in range(4):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimator = PrivateRiskControlClassifier(
                model,
                mechanism=ExponCRC(epsilon=1.0),
                alpha=0.3,
                loss=_pair_breaks_loss,
                loss_bound=1.0,
                mondrian=one_group,
                group_sizes=PrivateGroupSizes(0.05, group_ids=["g"]),
                random_state=seed,
            ).fit_calibrate(X, Y)
        with pytest.raises(ValueError, match="set of every label"):
            RiskCard.from_estimator(estimator)


def _cost_weighted_miss(y_true, y_set):
    """Single-label task: the cost of the true label if the set misses it (B = 1)."""
    return (y_true & ~y_set) @ np.array([1.0, 0.5])


def test_private_sizes_accept_a_valid_single_label_cost_weighted_miss():
    """A valid single-label loss in [0, 1] (0 for the set of every label) is accepted
    with private sizes as with public ones: single-label padding rows have one true
    label (every label true, where this loss is 1.5 > B, refused it)."""
    X, y = _binary_data()
    model = SecondColumnProbability().fit(X, y)
    for sizes in ("public", PrivateGroupSizes(0.5, group_ids=["a", "b"])):
        estimator = PrivateRiskControlClassifier(
            model,
            mechanism=ExponCRC(epsilon=1.0),
            alpha=0.2,
            loss=_cost_weighted_miss,
            loss_bound=1.0,
            mondrian=sign_group,
            group_sizes=sizes,
            random_state=0,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert estimator.fit_calibrate(X, y).calibration_.feasible


@pytest.mark.parametrize(
    "args",
    [
        ("0.1", "0.001", "1"),  # strings silently parsed
        (True, 0.5, 1.0),  # a bool as alpha
        (0.1, 5.0, 1.0),  # beta outside (0, 1): a bound above B
        (0.1, -1.0, 1.0),  # a negative bound
        (float("nan"), 0.1, 1.0),
    ],
)
def test_private_sizes_risk_bound_validates_its_arguments(args):
    with pytest.raises((TypeError, ValueError)):
        private_sizes_risk_bound(*args)


def test_a_card_whose_size_release_declares_other_groups_is_not_accepted():
    """``group_sizes.params.group_ids`` must be the card's ``groups``: a card declaring
    other ids (or none) describes no run, and is refused even with its digest
    recomputed."""
    base = _private_sizes_card().to_dict()
    for group_ids in (["x"], None):
        data = copy.deepcopy(base)
        data["formal"]["configuration"]["group_sizes"]["params"]["group_ids"] = group_ids
        try:
            card = RiskCard.from_dict(data)
        except ValueError:
            continue  # refused when read: fine
        data["formal_sha256"] = card.compute_digest()
        verification = verify_card(RiskCard.from_dict(data))
        assert verification.status == "inconsistent", group_ids


def test_mean_loss_names_y_when_its_columns_do_not_match_the_model():
    """A multilabel ``y`` with the wrong number of columns: the error names ``y``."""
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(1500, 3))
    Y = (rng.uniform(size=(1500, 3)) < X).astype(int)
    estimator = PrivateRiskControlClassifier(
        FirstColumnsProbability().fit(X, Y),
        mechanism=ExponCRC(epsilon=1.0),
        alpha=0.2,
        random_state=0,
    ).fit_calibrate(X[:1000], Y[:1000])
    with pytest.raises(ValueError, match=r"\by\b"):
        estimator.mean_loss(X[1000:], Y[1000:, :2])


def test_a_model_with_other_labels_than_y_is_refused_before_any_spend(dp):
    """The model's label count is checked from its classes_ before the budget is
    reserved (it used to fail after, leaving the spend of a failed fit on the ledger)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.multioutput import MultiOutputClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    Y = (X[:, :3] + rng.normal(size=(600, 3)) > 0).astype(int)
    model = MultiOutputClassifier(LogisticRegression()).fit(X[:200], Y[:200, :2])
    ledger = dp.accountant.BudgetAccountant(epsilon=5.0)
    crc = PrivateRiskControlClassifier(model, mechanism=ExponCRC(1.0), accountant=ledger)
    with pytest.raises(ValueError, match=r"has 2 labels \(classes_\) but y has 3"):
        crc.fit_calibrate(X[200:], Y[200:])
    assert ledger.spent_budget == [] and not hasattr(crc, "calibration_")
