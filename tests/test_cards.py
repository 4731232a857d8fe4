"""Contract cards (the contract-cards paper, Sec. 3-4, Table 1): Eq. (3), layers, builders.

The verifier's robustness is in test_verifier.py, the command line in test_cli.py.
"""

import hashlib
import json
import math
import warnings
from dataclasses import replace
from functools import lru_cache

import numpy as np
import pytest
from diffprivlib.models import GaussianNB, LinearRegression
from diffprivlib.models import StandardScaler as DPStandardScaler
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.dummy import DummyRegressor
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from privconf_sklearn import PrivateConformalClassifier, PrivateConformalRegressor
from privconf_sklearn.cards import (
    CLAUSES,
    CardFormatError,
    Contract,
    ContractCard,
    OwnerDiagnosticsWarning,
    verify_card,
)
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.mechanisms import (
    DPAPS,
    PCOQS,
    Calibration,
    CoverageCertificate,
    ExponQ,
    FedCP2QQ,
    QuantileMechanism,
    SplitConformal,
)
from privconf_sklearn.metrics import interval_coverage, mean_set_size, set_coverage
from privconf_sklearn.privacy import PrivacyGuarantee

BOUNDS = (-10.0, 10.0)
#: Owner-only quantities (computed from calibration data without noise) that must never
#: appear in a published card.
OWNER_KEYS = (
    "grid_threshold",
    "certificate_width",
    "observed_inflation",
    "n_scores_above_bounds",
    "n_scores_below_bounds",
)


@lru_cache(maxsize=1)
def _data():
    X, y = make_two_gaussians(9000, random_state=0)
    return X[:3000], y[:3000], X[3000:7000], y[3000:7000], X[7000:], y[7000:]


@lru_cache(maxsize=1)
def _model():
    X_train, y_train, *_ = _data()
    return GaussianNB(epsilon=2.0, bounds=BOUNDS, random_state=0).fit(X_train, y_train)


def _calibrated(mechanism, n=2000, alpha=0.1, score="lac", model=None):
    _, _, X_cal, y_cal, _, _ = _data()
    estimator = PrivateConformalClassifier(
        _model() if model is None else model,
        mechanism=mechanism,
        alpha=alpha,
        conformity_score=score,
        random_state=0,
    )
    return estimator.fit_calibrate(X_cal[:n], y_cal[:n])


def _regression_data(seed=1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(3000, 2))
    return X, X @ [1.0, 2.0] + rng.normal(size=3000)


def _monotone_exponq(epsilon):
    """ExponQ's add/remove-only variant, whatever its parameter is called."""
    params = ExponQ(epsilon=epsilon).get_params()
    flag = {"monotone": True} if "monotone" in params else {"scaling": "monotone"}
    return ExponQ(epsilon=epsilon, **flag)


class AddRemoveOnly(QuantileMechanism):
    """A stand-in mechanism whose guarantee holds under add/remove adjacency only."""

    def __init__(self, epsilon):
        self.epsilon = epsilon

    def _privacy_guarantee(self, params):
        return PrivacyGuarantee.pure(self.epsilon, adjacency="add/remove", description="test")

    def _coverage_certificate(self, params, n_samples, alpha):
        return CoverageCertificate(1.0 - alpha)

    def _calibrate(self, params, scores, alpha, groups, noise):  # pragma: no cover
        raise NotImplementedError


class ReplaceOneOnly(AddRemoveOnly):
    """A stand-in mechanism whose guarantee holds under replace-one adjacency only."""

    def privacy_guarantee(self):
        return PrivacyGuarantee.pure(self.epsilon, adjacency="replace-one", description="test")


DEMO_CONTRACT = Contract(0.9, max_epsilon_train=2.0, max_epsilon_cal=1.0, beta=1e-3)


# ------------------------------------------------------------- Observation 4.1
def test_paper_example_card_is_feasible():
    """The paper's Sec. 7 example: gamma = 0.75, eps_cal = 8, n = 4000 gives L = 0.749."""
    contract = Contract(0.70, max_epsilon_train=4.0, max_epsilon_cal=8.0, beta=1e-3)
    card = ContractCard.for_configuration(
        DPAPS(epsilon=8.0, n_bins=20, beta=1e-3), 4000, 0.25, contract=contract, epsilon_train=4.0
    )
    assert round(card.certificate.lower_bound, 3) == 0.749
    assert card.decision == "feasible" and card.release is None
    assert verify_card(card.to_json()).status == "accepted"


MECHANISMS = [
    lambda e: ExponQ(epsilon=e),
    lambda e: DPAPS(epsilon=e, n_bins=10, beta=1e-3),
    lambda e: DPAPS(epsilon=e, n_bins=10, beta=0.02),
    lambda e: PCOQS(rho=e * e / 2),
    lambda e: PCOQS(epsilon=e, delta=1e-6, beta=1e-3),
    lambda e: SplitConformal(),
]


@settings(max_examples=150, deadline=None)
@given(
    mechanism=st.sampled_from(MECHANISMS),
    epsilon=st.sampled_from([0.5, 1.0, 4.0]),
    n=st.sampled_from([30, 200, 3000]),
    alpha=st.sampled_from([0.05, 0.1, 0.2]),
    target=st.sampled_from([0.75, 0.8, 0.9, 0.95]),
    max_train=st.sampled_from([1.0, 2.0, math.inf]),
    max_cal=st.sampled_from([0.5, 1.0, 10.0, math.inf]),
    beta=st.sampled_from([0.0, 1e-3, 0.05]),
    delta=st.sampled_from([0.0, 1e-5]),
    epsilon_train=st.sampled_from([1.0, 2.0, math.inf]),
)
def test_verifier_accepts_exactly_when_the_configuration_meets_the_contract(
    mechanism, epsilon, n, alpha, target, max_train, max_cal, beta, delta, epsilon_train
):
    """Observation 4.1, with the truth computed from the mechanism, not from the card."""
    mechanism = mechanism(epsilon)
    contract = Contract(target, max_train, max_cal, beta, delta=delta)
    card = ContractCard.for_configuration(
        mechanism, n, alpha, contract=contract, epsilon_train=epsilon_train
    )
    certificate = mechanism.coverage_certificate(n, alpha)
    privacy = mechanism.privacy_guarantee().under("replace-one")
    marginal = certificate.lower_bound - (1.0 - certificate.confidence)
    truth = (
        certificate.feasible
        and marginal >= target
        and certificate.confidence >= 1.0 - beta
        and epsilon_train <= max_train
        and privacy.epsilon <= max_cal
        and privacy.delta <= delta
    )
    result = verify_card(card.to_json())
    assert result.status == ("accepted" if truth else "rejected")
    assert result.accepted == truth == (card.decision == "feasible")
    failed = {c.name for c in result.failed_clauses}
    assert ("epsilon_cal" in failed) == (privacy.epsilon > max_cal)
    assert ("coverage" in failed) == (marginal < target)
    for clause in result.clauses:
        if clause.margin is not None:
            assert (clause.margin >= 0) == clause.satisfied


def test_clauses_are_named_in_order_with_signed_margins():
    card = ContractCard.from_estimator(_calibrated(ExponQ(epsilon=1.0)), DEMO_CONTRACT)
    assert tuple(c.name for c in card.clauses) == CLAUSES
    assert card.decision == "feasible"
    tight = card.with_contract(
        Contract(0.95, max_epsilon_train=1.0, max_epsilon_cal=0.5, beta=1e-3)
    )
    margins = {c.name: c.margin for c in tight.clauses if not c.satisfied}
    assert margins == {
        "coverage": pytest.approx(0.9 - 0.95),
        "epsilon_train": -1.0,
        "epsilon_cal": -0.5,
    }
    result = verify_card(tight.to_json())
    assert result.status == "rejected" and result.exit_code == 1
    assert "epsilon_cal" in result.report() and "-0.5" in result.report()


# ------------------------------------------------------------- JSON and layers
@lru_cache(maxsize=1)
def _cards():
    """Cards of every privacy notion, bound kind and outcome (read-only in tests)."""
    _, _, X_cal, y_cal, X_test, y_test = _data()
    cards = {
        "exponq": ContractCard.from_estimator(_calibrated(ExponQ(epsilon=1.0)), DEMO_CONTRACT),
        "dpaps": ContractCard.from_estimator(
            _calibrated(DPAPS(epsilon=1.0, n_bins=20), score="aps"), DEMO_CONTRACT
        ),
        "pcoqs_zcdp_approximate": ContractCard.from_estimator(
            _calibrated(PCOQS(rho=0.5, beta=0.01)), DEMO_CONTRACT
        ),
        "split_no_privacy": ContractCard.from_estimator(_calibrated(SplitConformal())),
    }
    # Under add/remove a record is at one agent: eps_cal = epsilon (2 epsilon under
    # replace-one, where a record may move between agents).
    federated = PrivateConformalClassifier(
        _model(), mechanism=FedCP2QQ(epsilon=2.0), alpha=0.1, random_state=0, adjacency="add/remove"
    ).fit_calibrate(X_cal, y_cal, groups=np.arange(len(y_cal)) % 8)
    cards["fedcp2qq_local"] = ContractCard.from_estimator(
        federated,
        Contract(
            0.9, max_epsilon_train=2.0, max_epsilon_cal=2.0, beta=1e-3, adjacency="add/remove"
        ),
    )
    with pytest.warns(UserWarning):
        cards["unreachable"] = ContractCard.from_estimator(
            _calibrated(ExponQ(epsilon=0.1), n=30), DEMO_CONTRACT
        )
    X, y = _regression_data()
    model = LinearRegression(epsilon=1.5, bounds_X=(-1, 1), bounds_y=(-6, 6), random_state=0)
    regressor = PrivateConformalRegressor(
        model.fit(X[:1000], y[:1000]),
        mechanism=DPAPS(epsilon=4.0, n_bins=20),
        score_bounds=(0.0, 2.5),
        random_state=0,
    )
    with pytest.warns(UserWarning, match="clipped"):
        regressor.fit_calibrate(X[1000:2000], y[1000:2000])
    cards["regression_clipped"] = regressor.card_
    for name, card in cards.items():
        if name == "regression_clipped":
            card.evaluate(X[2000:], y[2000:], public=True)
        else:
            card.evaluate(X_test, y_test, public=True)
    return cards


def test_json_round_trip_is_exact_and_strict_json():
    def refuse(token):
        raise AssertionError(f"bare {token} in card JSON")

    for name, card in _cards().items():
        text = card.to_json()
        json.loads(text, parse_constant=refuse)
        again = ContractCard.from_json(text)
        assert again == card, name
        assert again.to_json() == text, name
        assert again.formal_sha256 == card.compute_digest(), name
        assert verify_card(text).status in ("accepted", "rejected", "unchecked"), name


def _keys(node):
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _keys(value)
    elif isinstance(node, list):
        for value in node:
            yield from _keys(value)


def test_cards_are_publishable_by_default():
    """JSON, Markdown and save() hold no owner diagnostics unless asked for (issue 14)."""
    cards = _cards()
    dpaps, regression = cards["dpaps"], cards["regression_clipped"]
    owner = dpaps.owner_diagnostics["calibration"]
    assert 0.0 <= owner["observed_inflation"] <= owner["certificate_width"]
    assert regression.owner_diagnostics["calibration"]["n_scores_above_bounds"] > 0
    for name, card in cards.items():
        published = json.loads(card.to_json())
        assert "owner_diagnostics" not in published, name
        assert not set(OWNER_KEYS) & set(_keys(published)), name
        markdown = card.to_markdown()
        assert not [key for key in OWNER_KEYS if key in markdown], name
    with pytest.warns(OwnerDiagnosticsWarning, match="NOT covered"):
        text = dpaps.to_json(include_owner_diagnostics=True)
    assert (
        json.loads(text)["owner_diagnostics"]["calibration"]["grid_threshold"]
        == (owner["grid_threshold"])
    )
    assert ContractCard.from_json(text).owner_diagnostics == dpaps.owner_diagnostics
    with pytest.warns(OwnerDiagnosticsWarning):
        assert "certificate_width" in dpaps.to_markdown(include_owner_diagnostics=True)


def test_save_is_publishable_by_default(tmp_path):
    card = _cards()["dpaps"]
    card.save(tmp_path / "card.json")
    assert "grid_threshold" not in (tmp_path / "card.json").read_text()
    with pytest.warns(OwnerDiagnosticsWarning):
        card.save(tmp_path / "owner.json", include_owner_diagnostics=True)
    assert "grid_threshold" in (tmp_path / "owner.json").read_text()


def test_test_set_diagnostics_are_owner_data_unless_declared_public():
    *_, X_test, y_test = _data()
    estimator = _calibrated(ExponQ(epsilon=1.0))
    sets = estimator.predict_set(X_test)
    card = estimator.card_.evaluate(X_test, y_test)
    assert card.diagnostics.empirical_coverage is None
    test = card.owner_diagnostics["test"]
    assert test["empirical_coverage"] == set_coverage(y_test, sets, estimator.classes_)
    assert json.loads(card.to_json())["diagnostics"]["empirical_coverage"] is None
    public = estimator.card_.evaluate(X_test, y_test, public=True)
    assert public.diagnostics.empirical_coverage == test["empirical_coverage"]
    assert public.diagnostics.mean_set_size == mean_set_size(sets)
    assert public.diagnostics.accuracy == float(np.mean(estimator.predict(X_test) == y_test))
    assert "test" not in public.owner_diagnostics
    assert json.loads(public.to_json())["diagnostics"]["n_test"] == len(y_test)


def test_formal_and_diagnostic_layers_per_notion():
    cards = _cards()
    pcoqs = cards["pcoqs_zcdp_approximate"]
    assert pcoqs.calibration_privacy.notion == "zcdp"
    assert pcoqs.certificate.confidence == pytest.approx(0.99)
    assert pcoqs.certificate.marginal_lower_bound == pytest.approx(
        pcoqs.certificate.lower_bound - 0.01
    )
    failed = {c.name for c in pcoqs.clauses if not c.satisfied}
    assert {"lower_bound_confidence", "epsilon_cal", "delta_cal"} <= failed
    split = cards["split_no_privacy"]
    assert split.decision == "unchecked" and split.clauses == ()
    assert math.isinf(split.calibration_privacy.epsilon)
    assert math.isinf(split.with_contract(DEMO_CONTRACT).clauses[5].value)
    local = cards["fedcp2qq_local"]
    assert local.calibration_privacy.notion == "local"
    assert local.configuration.agent_sizes == (500,) * 8
    assert dict((c.name, c.value) for c in local.clauses)["epsilon_cal"] == 2.0
    assert local.decision == "feasible" and verify_card(local.to_json()).accepted
    unreachable = cards["unreachable"]
    assert unreachable.decision == "infeasible"
    assert unreachable.calibration_privacy.epsilon == 0.0
    failed = [c.name for c in unreachable.clauses if not c.satisfied]
    assert failed == ["level_reachable", "informative"]
    assert not unreachable.release.informative and unreachable.release.reason
    assert verify_card(unreachable).status == "rejected"


# ------------------------------------------------------- honest decisions
def _trivial_feasible_card():
    """A release at the top of the range although the level is reachable (noise)."""
    mechanism = ExponQ(epsilon=1.0)
    planned = mechanism.coverage_certificate(3000, 0.1)
    calibration = Calibration(
        mechanism="ExponQ",
        threshold=1.0,
        n_samples=3000,
        alpha=0.1,
        privacy=mechanism.privacy_guarantee(),
        coverage_lower_bound=planned.lower_bound,
        reason="the sampled bin was the top one",
    )
    return ContractCard.from_calibration(
        calibration, mechanism, contract=DEMO_CONTRACT, epsilon_train=2.0
    )


def test_contracts_require_an_informative_release_by_default():
    """Issue 23 item 5: an all-label release does not meet a default contract."""
    card = _trivial_feasible_card()
    assert DEMO_CONTRACT.require_informative
    assert not card.release.informative
    assert card.release.reason == "the sampled bin was the top one"
    assert card.decision == "infeasible"
    failed = [c for c in card.clauses if not c.satisfied]
    assert [c.name for c in failed] == ["informative"]  # Eq. (3) itself holds
    assert "every set holds every label" in failed[0].requirement
    markdown = card.to_markdown()
    assert markdown.startswith("# Contract card — INFEASIBLE — UNINFORMATIVE")
    assert "Failed clauses: `informative`" in markdown
    assert "the release must be informative" in markdown
    result = verify_card(card.to_json())
    assert result.status == "rejected" and result.exit_code == 1
    assert result.informative is False
    assert "contract not met (informative)" in result.report()
    assert "[FAIL] informative" in result.report()


def test_a_contract_may_accept_an_uninformative_release_but_never_silently():
    contract = replace(DEMO_CONTRACT, require_informative=False)
    card = _trivial_feasible_card().with_contract(contract)
    assert card.decision == "feasible"  # Eq. (3) as the paper defines it
    clause = dict((c.name, c) for c in card.clauses)["informative"]
    assert clause.satisfied and "not required" in clause.requirement
    assert "UNINFORMATIVE" in clause.requirement
    markdown = card.to_markdown()
    assert markdown.startswith("# Contract card — FEASIBLE — UNINFORMATIVE")
    assert "the release may be trivial" in markdown
    result = verify_card(card.to_json())
    assert result.status == "accepted" and result.informative is False
    assert "UNINFORMATIVE" in result.report()
    # A plan has no release yet: the clause is checked once calibrated.
    planned = ContractCard.for_configuration(
        ExponQ(epsilon=1.0), 3000, 0.1, contract=DEMO_CONTRACT, epsilon_train=2.0
    )
    clause = dict((c.name, c) for c in planned.clauses)["informative"]
    assert clause.satisfied and "checked once calibrated" in clause.requirement
    informative = _cards()["exponq"]
    assert informative.release.informative
    assert verify_card(informative).informative is True
    assert "UNINFORMATIVE" not in informative.to_markdown()


def _far_off_regressor(mechanism):
    """A model whose predictions are far off the public range: every score is clipped."""
    X, y = _regression_data()
    model = DummyRegressor(strategy="constant", constant=1000.0).fit(X[:10], y[:10])
    estimator = PrivateConformalRegressor(
        model, mechanism=mechanism, score_bounds=(0.0, 8.0), random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return estimator.fit_calibrate(X[1000:2000], y[1000:2000])


def test_regression_release_at_the_upper_bound_is_not_feasible():
    """Issue 12 item 4: clipped scores and a threshold at the upper bound."""
    estimator = _far_off_regressor(SplitConformal())
    contract = Contract(0.9, math.inf, math.inf, beta=0.0)
    card = ContractCard.from_estimator(estimator, contract, epsilon_train=0.0)
    assert card.release.threshold == 1.0 and not card.release.coverage_holds
    assert "upper score bound" in card.release.reason
    assert card.decision == "infeasible"
    failed = {c.name: c for c in card.clauses if not c.satisfied}
    assert set(failed) == {"coverage", "informative"} and failed["coverage"].value == 0.0
    assert "coverage guarantee does not hold" in card.to_markdown()
    result = verify_card(card.to_json())
    assert result.status == "rejected"
    assert [c.name for c in result.failed_clauses] == ["coverage", "informative"]
    assert "n_scores_above_bounds" not in card.to_json()


def test_regression_release_below_the_bound_keeps_its_coverage():
    card = _cards()["regression_clipped"]
    assert card.release.threshold < 1.0 and card.release.coverage_holds
    assert card.release.score_bounds == (0.0, 2.5) and card.release.score_bounds_source == "public"
    # The threshold in score units is a public function of the threshold and the bounds.
    data = json.loads(card.to_json())
    release = data["formal"]["calibrations"][0]["release"]
    assert 0.0 < release["threshold_score_units"] < 2.5
    release["threshold_score_units"] *= 0.5  # a narrower-looking interval, resealed
    payload = {key: data[key] for key in ("schema", "schema_version", "formal")}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    data["formal_sha256"] = hashlib.sha256(text.encode("ascii")).hexdigest()
    result = verify_card(data)
    assert result.status == "inconsistent"
    assert "threshold_score_units: recorded" in result.problems[0]


def test_data_derived_score_bounds_are_recorded_and_break_the_calibration_clause():
    X, y = _regression_data(0)
    model = LinearRegression(epsilon=1.0, bounds_X=(-1, 1), bounds_y=(-6, 6), random_state=0)
    estimator = PrivateConformalRegressor(
        model.fit(X[:1000], y[:1000]),
        mechanism=ExponQ(epsilon=1.0),
        score_bounds=None,
        random_state=0,
    )
    with pytest.warns(Warning, match="(?i)privacy|bounds"):
        estimator.fit_calibrate(X[1000:2000], y[1000:2000])
    card = ContractCard.from_estimator(
        estimator, Contract(0.9, max_epsilon_train=1.0, max_epsilon_cal=1.0, beta=0.0)
    )
    release = card.release
    assert release.score_bounds_source == "calibration data"
    assert release.score_bounds is None and release.threshold_score_units is None
    owner = card.owner_diagnostics["calibration"]
    assert tuple(owner["score_bounds"]) == estimator.score_bounds_
    assert not card.calibration_privacy.holds
    clause = dict((c.name, c) for c in card.clauses)["epsilon_cal"]
    assert not clause.satisfied and clause.margin == -math.inf
    assert verify_card(card.to_json()).status == "rejected"
    assert str(estimator.score_bounds_[1]) not in card.to_json()


# ------------------------------------------------------- privacy budget and adjacency
def test_privacy_budget_is_visible_in_every_card():
    for name, card in _cards().items():
        privacy = json.loads(card.to_json())["formal"]["privacy"]
        assert set(privacy) == {"training", "calibration"}, name
        assert {"epsilon", "delta", "rho", "adjacency"} <= set(privacy["calibration"]), name
        head = "\n".join(card.to_markdown().splitlines()[:6])
        assert "**Privacy budget:** calibration epsilon = " in head, name
        assert f"{card.calibration_privacy.adjacency} adjacency" in head, name
        assert "training epsilon = " in head, name


def test_calibration_budget_is_stated_under_the_users_adjacency():
    mechanism = AddRemoveOnly(1.0)
    registry = {"AddRemoveOnly": AddRemoveOnly}
    contract = Contract(0.85, max_epsilon_train=1.0, max_epsilon_cal=1.5, beta=0.0)
    assert contract.adjacency == "replace-one"
    card = ContractCard.for_configuration(mechanism, 100, 0.1, contract=contract, epsilon_train=1.0)
    assert card.calibration_privacy.epsilon == 2.0  # group privacy: replace = remove + add
    assert card.calibration_privacy.adjacency == "replace-one"
    assert "replace-one adjacency" in card.to_markdown()
    result = verify_card(card.to_json(), mechanisms=registry)
    assert result.status == "rejected"
    assert [c.name for c in result.failed_clauses] == ["epsilon_cal"]
    # Issue 24: the same guarantee stated under add/remove (epsilon 1) does not meet a
    # contract stated under replace-one: the clause restates it (2 > 1.5).
    stated = ContractCard.for_configuration(
        mechanism, 100, 0.1, contract=contract, epsilon_train=1.0, adjacency="add/remove"
    )
    assert stated.calibration_privacy.epsilon == 1.0
    clause = dict((c.name, c) for c in stated.clauses)["epsilon_cal"]
    assert not clause.satisfied and clause.value == 2.0
    assert clause.requirement == "eps_cal (under replace-one adjacency) <= 1.5"
    assert verify_card(stated.to_json(), mechanisms=registry).status == "rejected"
    # A contract stated under add/remove is met by it.
    add_remove = replace(contract, adjacency="add/remove")
    met = stated.with_contract(add_remove)
    assert dict((c.name, c.value) for c in met.clauses)["epsilon_cal"] == 1.0
    assert verify_card(met.to_json(), mechanisms=registry).status == "accepted"
    # Replace-one does not imply add/remove: such a guarantee counts as infinite there.
    replace_only = ContractCard.for_configuration(
        ReplaceOneOnly(0.5), 100, 0.1, contract=add_remove, epsilon_train=1.0
    )
    clause = dict((c.name, c) for c in replace_only.clauses)["epsilon_cal"]
    assert not clause.satisfied and math.isinf(clause.value)
    assert "stated for replace-one neighbours only" in clause.requirement
    result = verify_card(replace_only.to_json(), mechanisms={"ReplaceOneOnly": ReplaceOneOnly})
    assert result.status == "rejected"
    monotone = ContractCard.for_configuration(_monotone_exponq(1.0), 5000, 0.1)
    assert monotone.calibration_privacy.epsilon == 2.0
    assert verify_card(monotone.to_json()).status == "unchecked"


# ----------------------------------------------------------- card_ on estimators
def test_card_attribute_reads_epsilon_train_from_diffprivlib():
    _, _, _, _, X_test, y_test = _data()
    estimator = _calibrated(ExponQ(epsilon=1.0))
    card = estimator.card_
    assert card.decision == "unchecked" and card.contract is None
    assert card.training_privacy.epsilon == 2.0
    assert "GaussianNB.epsilon" in card.training_privacy.source
    # diffprivlib keeps no trace of bounds it computed from the data: the card says so.
    assert "data-independent bounds" in card.training_privacy.source
    assert card.configuration.task == "classification"
    assert card.configuration.mechanism.params["epsilon"] == 1.0
    assert card.release.threshold == estimator.calibration_.threshold
    assert card.calibration_privacy == estimator.calibration_.privacy
    assert card.evaluate(X_test, y_test, public=True) is card
    loaded = ContractCard.from_json(card.to_json())
    with pytest.raises(ValueError, match="estimator="):
        loaded.evaluate(X_test, y_test)
    with pytest.raises(ValueError, match="not the calibration"):
        loaded.evaluate(X_test, y_test, estimator=_calibrated(ExponQ(epsilon=2.0)))
    assert loaded.evaluate(X_test, y_test, estimator=estimator, public=True) is loaded
    assert loaded.diagnostics == card.diagnostics


def test_epsilon_train_from_pipelines_and_user():
    X_train, y_train, *_ = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pipeline = make_pipeline(
            DPStandardScaler(epsilon=0.5, bounds=BOUNDS, random_state=0),
            GaussianNB(epsilon=1.5, bounds=(-5.0, 5.0), random_state=0),
        ).fit(X_train, y_train)
    card = ContractCard.from_estimator(_calibrated(ExponQ(epsilon=1.0), model=pipeline))
    assert card.training_privacy.epsilon == 2.0
    assert card.configuration.estimator.startswith("Pipeline(")
    plain = LogisticRegression().fit(X_train, y_train)
    estimator = _calibrated(ExponQ(epsilon=1.0), model=plain)
    assert math.isinf(estimator.card_.training_privacy.epsilon)
    stated = ContractCard.from_estimator(estimator, DEMO_CONTRACT, epsilon_train=0.0)
    assert stated.training_privacy.epsilon == 0.0 and stated.decision == "feasible"
    with pytest.raises(ValueError, match="under-state"):
        ContractCard.from_estimator(_calibrated(ExponQ(epsilon=1.0)), epsilon_train=1.0)
    with pytest.raises(ValueError, match="epsilon_train"):
        ContractCard.from_estimator(estimator, epsilon_train=-1.0)
    with pytest.raises(TypeError, match="epsilon_train"):
        ContractCard.from_estimator(estimator, epsilon_train="1")


def test_card_attribute_on_regressor():
    X, y = _regression_data()
    model = LinearRegression(epsilon=1.5, bounds_X=(-1, 1), bounds_y=(-6, 6), random_state=0)
    model.fit(X[:1000], y[:1000])
    estimator = PrivateConformalRegressor(
        model, mechanism=DPAPS(epsilon=4.0, n_bins=20), score_bounds=(0.0, 8.0), random_state=0
    ).fit_calibrate(X[1000:2000], y[1000:2000])
    card = estimator.card_.evaluate(X[2000:], y[2000:], public=True)
    assert card.configuration.task == "regression"
    assert card.training_privacy.epsilon == 1.5
    assert card.release.score_bounds == (0.0, 8.0)
    assert card.release.threshold_score_units == estimator.threshold_
    intervals = estimator.predict_set(X[2000:])
    assert card.diagnostics.mean_width == pytest.approx(np.mean(intervals[:, 1] - intervals[:, 0]))
    assert card.diagnostics.mean_set_size is None
    assert card.diagnostics.empirical_coverage == interval_coverage(y[2000:], intervals)
    assert ContractCard.from_json(card.to_json()) == card
    assert verify_card(card.to_json()).status == "unchecked"


# ------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("n_samples", "error"),
    [
        (0, ValueError),
        (-5, ValueError),
        (10**400, ValueError),
        (2**53 + 1, ValueError),
        (2.5, TypeError),
        (True, TypeError),
        ("10", TypeError),
        (None, TypeError),
    ],
)
def test_for_configuration_rejects_bad_sizes(n_samples, error):
    with pytest.raises(error, match="n_samples"):
        ContractCard.for_configuration(ExponQ(epsilon=1.0), n_samples, 0.1)


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"alpha": 0.0}, ValueError, "alpha"),
        ({"alpha": 1.0}, ValueError, "alpha"),
        ({"alpha": float("nan")}, ValueError, "alpha"),
        ({"alpha": "0.1"}, TypeError, "alpha"),
        ({"mechanism": "ExponQ"}, TypeError, "mechanism"),
        ({"contract": (0.9, 1, 1, 0)}, TypeError, "contract"),
        ({"adjacency": "neighbours"}, ValueError, "adjacency"),
        ({"agent_sizes": [10, 0]}, ValueError, "agent_sizes"),
        ({"agent_sizes": 100}, TypeError, "agent_sizes"),
        ({"agent_sizes": [50, 50]}, ValueError, "agent_sizes is for federated mechanisms"),
        ({"epsilon_train": -1.0}, ValueError, "epsilon_train"),
        ({"epsilon_train": float("nan")}, ValueError, "epsilon_train"),
        ({"delta_train": 2.0}, ValueError, "delta_train"),
    ],
)
def test_for_configuration_rejects_bad_arguments(kwargs, error, name):
    arguments = {"mechanism": ExponQ(epsilon=1.0), "n_samples": 100, "alpha": 0.1, **kwargs}
    with pytest.raises(error, match=name):
        ContractCard.for_configuration(**arguments)


MADE_AND_RECORDED = {
    "ExponQ epsilon": (ExponQ(epsilon=5.0), ExponQ(epsilon=1.0)),
    "ExponQ epsilon, reversed": (ExponQ(epsilon=1.0), ExponQ(epsilon=5.0)),
    "P-COQS rho": (PCOQS(rho=5.0), PCOQS(rho=0.01)),
    "DP-APS beta": (DPAPS(epsilon=1.0, beta=1e-2), DPAPS(epsilon=1.0, beta=1e-6)),
}


@pytest.mark.parametrize("name", MADE_AND_RECORDED)
def test_from_calibration_refuses_a_mechanism_that_did_not_make_the_calibration(name):
    """The card would state the recorded mechanism's epsilon or certificate: a lie."""
    made, recorded = MADE_AND_RECORDED[name]
    scores = np.random.default_rng(0).uniform(size=3000)
    calibration = made.calibrate(scores, 0.1, random_state=0)
    with pytest.raises(ValueError, match="not the one that made the calibration"):
        ContractCard.from_calibration(calibration, recorded, epsilon_train=2.0)
    card = ContractCard.from_calibration(calibration, made, epsilon_train=2.0)
    assert verify_card(card.to_json()).status == "unchecked"  # consistent, no contract


def test_other_entry_points_reject_bad_input():
    estimator = _calibrated(ExponQ(epsilon=1.0))
    calibration, mechanism = estimator.calibration_, estimator.mechanism_
    with pytest.raises(TypeError, match="calibration"):
        ContractCard.from_calibration(calibration.to_dict(), mechanism)
    with pytest.raises(ValueError, match="calibration was made by ExponQ"):
        ContractCard.from_calibration(calibration, DPAPS(epsilon=1.0))
    with pytest.raises(TypeError, match="estimator"):
        ContractCard.from_estimator(LogisticRegression())
    with pytest.raises(TypeError, match="contract"):
        ContractCard.from_estimator(estimator, contract=(0.9, 1, 1, 0))
    card = estimator.card_
    with pytest.raises(TypeError, match="public"):
        card.evaluate(*_data()[4:], public="yes")
    with pytest.raises(TypeError, match="include_owner_diagnostics"):
        card.to_json(include_owner_diagnostics=1)
    with pytest.raises(TypeError, match="mechanisms"):
        verify_card(card, mechanisms=[ExponQ])
    with pytest.raises(TypeError, match="QuantileMechanism"):
        verify_card(card, mechanisms={"X": LogisticRegression})


def test_bad_records_and_contracts_are_refused():
    with pytest.raises(ValueError, match="target_coverage"):
        Contract(1.0, 1.0, 1.0, 1e-3)
    with pytest.raises(ValueError, match="max_epsilon_cal"):
        Contract(0.9, 1.0, -1.0, 1e-3)
    with pytest.raises(ValueError, match="beta"):
        Contract(0.9, 1.0, 1.0, float("nan"))
    with pytest.raises(TypeError, match="beta"):
        Contract(0.9, 1.0, 1.0, "0.1")
    card = _cards()["exponq"]
    with pytest.raises(ValueError, match="epsilon"):
        type(card.training_privacy)(-5.0, 0.0, "made up")
    with pytest.raises(ValueError, match="threshold"):
        type(card.release)(**{**card.release.__dict__, "threshold": 7.0})
    with pytest.raises(CardFormatError, match="schema"):
        ContractCard.from_dict(
            {"schema": "other", "schema_version": 2, "formal": {}, "formal_sha256": ""}
        )
    with pytest.raises(ValueError, match="adjacency"):
        Contract(0.9, 1.0, 1.0, 1e-3, adjacency="neighbours")
    for flag in ("yes", 1, None):
        with pytest.raises(TypeError, match="require_informative"):
            Contract(0.9, 1.0, 1.0, 1e-3, require_informative=flag)


# -------------------------------------------------------------- Markdown
def test_markdown_is_the_template_filled_in():
    cards = _cards()
    text = cards["exponq"].to_markdown()
    assert text.startswith("# Contract card — FEASIBLE\n")
    sections = [
        "## Formal layer",
        "### Contract",
        "### Configuration",
        "### Privacy",
        "### Certificate",
        "### Feasibility, Eq. (3)",
        "### Release",
        "Formal-layer SHA-256",
        "## Diagnostic layer",
    ]
    positions = [text.index(section) for section in sections]
    assert positions == sorted(positions)
    assert cards["exponq"].formal_sha256 in text
    text = cards["unreachable"].to_markdown()
    assert text.startswith("# Contract card — INFEASIBLE — UNINFORMATIVE")
    assert "Failed clauses: `level_reachable`" in text
    assert "| adjacency | require_informative |" in text
    assert "Budgets are stated under replace-one adjacency" in text
    with pytest.warns(OwnerDiagnosticsWarning):
        owner = cards["dpaps"].to_markdown(include_owner_diagnostics=True)
    assert "## Owner diagnostics — NOT covered by the privacy guarantee, UNSIGNED" in owner
    assert "No contract recorded" in cards["split_no_privacy"].to_markdown()
    assert "$" not in "".join(card.to_markdown() for card in cards.values())


def test_card_records_the_fitted_calibration_not_parameters_changed_since():
    """set_params after fitting must not leak into the card: it records the alpha the
    release was calibrated at (and so verifies), whatever ``alpha`` says now."""
    X, y = make_two_gaussians(n_samples=3000, random_state=0)
    model = LogisticRegression().fit(X[:1000], y[:1000])
    estimator = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=1.0), alpha=0.1, random_state=0
    ).fit_calibrate(X[1000:], y[1000:])
    estimator.set_params(alpha=0.3)
    card = estimator.card_
    assert card.configuration.alpha == 0.1
    assert card.configuration.nominal_coverage == pytest.approx(0.9)
    assert verify_card(card.to_json()).status == "unchecked"  # no contract: consistent


def test_search_screens_under_the_contracts_adjacency():
    """Each configuration's guarantee is restated under the contract's adjacency before
    the screening: a monotone ExponQ stated under add/remove costs 2 epsilon here."""
    from privconf_sklearn.model_selection import CertificateAwareSearch

    _, _, X_cal, y_cal, *_ = _data()
    template = PrivateConformalClassifier(
        _model(), mechanism=_monotone_exponq(1.0), adjacency="add/remove", random_state=0
    )
    grid = {"alpha": [0.1], "calibration_size": [2000]}
    contract = Contract(0.85, max_epsilon_train=2.0, max_epsilon_cal=1.5, beta=0.0)
    search = CertificateAwareSearch(template, contract=contract, param_grid=grid)
    (candidate,) = search.screen()
    assert candidate.calibration.epsilon == 1.0  # as the estimator states it
    assert candidate.status == "infeasible" and candidate.note == "fails epsilon_cal"
    card = search.fit(X_cal, y_cal).card_
    assert card.decision == "infeasible"
    assert dict((c.name, c.value) for c in card.clauses)["epsilon_cal"] == 2.0
    assert verify_card(card.to_json()).status == "rejected"
    met = CertificateAwareSearch(
        template, contract=replace(contract, adjacency="add/remove"), param_grid=grid
    )
    assert met.screen()[0].status == "skipped"
    # A calibrated search: its composed spend is restated too (2, within a budget of 2).
    wider = CertificateAwareSearch(
        template, contract=replace(contract, max_epsilon_cal=2.0), param_grid=grid
    ).fit(X_cal, y_cal)
    assert wider.card_.selection.spent_epsilon_cal == 1.0  # under the estimator's add/remove
    assert dict((c.name, c.value) for c in wider.card_.clauses)["epsilon_cal"] == 2.0
    assert verify_card(wider.card_.to_json()).status == "accepted"


@pytest.mark.parametrize(
    ("estimator_adjacency", "contract_adjacency"),
    [("replace-one", "add/remove"), ("add/remove", "replace-one")],
)
def test_a_guarantee_under_both_relations_meets_a_contract_under_either(
    estimator_adjacency, contract_adjacency
):
    """ExponQ is epsilon-DP under both relations: whichever one the estimator states, its
    card meets a contract under the other with epsilon (it used to read inf or 2 epsilon,
    the guarantee having been narrowed to the estimator's relation)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 2))
    y = (X[:, 0] + rng.normal(size=600) > 0).astype(int)
    estimator = PrivateConformalClassifier(
        LogisticRegression().fit(X[:200], y[:200]),
        mechanism=ExponQ(epsilon=1.0),
        alpha=0.1,
        adjacency=estimator_adjacency,
        random_state=0,
    ).fit_calibrate(X[200:], y[200:])
    assert estimator.calibration_.privacy.adjacencies == ("replace-one", "add/remove")
    contract = Contract(
        target_coverage=0.5,
        max_epsilon_train=math.inf,
        max_epsilon_cal=1.0,
        beta=1e-3,
        adjacency=contract_adjacency,
        require_informative=False,
    )
    card = ContractCard.from_estimator(estimator, contract, epsilon_train=0.0)
    clause = next(c for c in card.clauses if c.name == "epsilon_cal")
    assert clause.value == 1.0 and clause.satisfied
    assert verify_card(card.to_json()).status == "accepted"
