"""Contract cards of Mondrian calibrations (issue 16): one certificate per group.

Everything goes through the public API: ``est.card_``, ``ContractCard.from_estimator``,
the JSON and Markdown writers and ``verify_card`` (edits are made on the JSON, with the
documented digest recomputed, as an attacker would).
"""

import hashlib
import json
import warnings
from functools import lru_cache

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression, Ridge

from privconf_sklearn import PrivateConformalClassifier, PrivateConformalRegressor
from privconf_sklearn.cards import Contract, ContractCard, verify_card
from privconf_sklearn.mechanisms import DPAPS, PCOQS, ExponQ, SplitConformal
from privconf_sklearn.model_selection import CertificateAwareSearch
from privconf_sklearn.mondrian import PrivateGroupSizes

CONTRACT = Contract(0.85, max_epsilon_train=float("inf"), max_epsilon_cal=2.0, beta=1e-3)


@lru_cache(maxsize=1)
def _data():
    """Three classes, the last one rare (about 25 calibration rows)."""
    rng = np.random.default_rng(0)
    n = 8000
    y = rng.choice(3, size=n, p=[0.55, 0.445, 0.005])
    X = rng.normal(size=(n, 2)) + np.array([[0.0, 0.0], [1.5, 0.0], [0.0, 1.5]])[y]
    model = LogisticRegression().fit(X[:3000], y[:3000])
    return model, X[3000:], y[3000:]


def _fitted(mechanism=None, group_sizes="public", adjacency="replace-one", rows=slice(None)):
    model, X, y = _data()
    estimator = PrivateConformalClassifier(
        model,
        # The paper's (tight) utility: the rare class is too small for it at epsilon 1.
        mechanism=ExponQ(epsilon=1.0, scaling="tight") if mechanism is None else mechanism,
        alpha=0.1,
        mondrian="class",
        group_sizes=group_sizes,
        adjacency=adjacency,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the rare class is trivial in some tests
        return estimator.fit_calibrate(X[rows], y[rows])


def _reseal(data):
    payload = {key: data[key] for key in ("schema", "schema_version", "formal")}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    data["formal_sha256"] = hashlib.sha256(text.encode("ascii")).hexdigest()
    return json.dumps(data)


@pytest.mark.parametrize("adjacency", ["replace-one", "add/remove"])
def test_card_records_every_group_and_the_composed_guarantee(adjacency):
    estimator = _fitted(adjacency=adjacency)
    calibration = estimator.calibration_
    card = estimator.card_
    assert card.configuration.mondrian == "class"
    assert card.configuration.group_sizes == "public"
    assert card.configuration.n_samples == calibration.n_samples
    assert [e.group for e in card.calibrations] == list(estimator.classes_)
    for entry, group, threshold in zip(
        card.calibrations, calibration.groups, estimator.group_thresholds_, strict=True
    ):
        assert entry.n_samples == group.calibration.n_samples
        assert entry.certificate.lower_bound == group.coverage_lower_bound
        assert entry.certificate.confidence == group.lower_bound_confidence
        assert entry.certificate.level_reachable == group.calibration.feasible
        assert entry.release.threshold == group.calibration.threshold
        assert entry.release.threshold_score_units == threshold
        assert entry.release.informative == group.calibration.informative
    # Parallel composition over disjoint groups; a row moving between groups under
    # replace-one touches two releases (the user guide's table).
    assert card.calibration_privacy == calibration.privacy
    assert card.calibration_privacy.epsilon == {"replace-one": 2.0, "add/remove": 1.0}[adjacency]
    assert card.calibration_privacy.adjacency == adjacency
    with pytest.raises(AttributeError, match="per group"):
        card.certificate  # noqa: B018 - a Mondrian card has no single certificate
    text = card.to_json()
    assert ContractCard.from_json(text) == card
    assert verify_card(text).status == "unchecked"


def test_contract_must_hold_in_every_group_and_trivial_groups_are_flagged():
    mechanism = ExponQ(epsilon=0.2)
    estimator = _fitted(mechanism)
    rare = next(e for e in estimator.card_.calibrations if e.group == 2)
    # too few rows for ExponQ at epsilon 0.2, alpha 0.1
    assert rare.n_samples < mechanism.min_informative_samples(0.1)
    assert not rare.certificate.level_reachable and rare.certificate.reason
    assert not rare.release.informative and rare.release.threshold == 1.0
    card = ContractCard.from_estimator(estimator, CONTRACT)
    failed = {c.name: c for c in card.clauses if not c.satisfied}
    assert card.decision == "infeasible" and set(failed) == {"level_reachable", "informative"}
    assert "unreachable in groups 2" in failed["level_reachable"].requirement
    assert "uninformative in groups 2" in failed["informative"].requirement
    result = verify_card(card.to_json())
    assert result.status == "rejected" and result.uninformative_groups == (2,)
    assert "UNINFORMATIVE releases in groups 2" in result.report()
    markdown = card.to_markdown()
    assert "| group |" in markdown and "UNINFORMATIVE" in markdown

    # Without the rare class every group is informative and the contract is met.
    _, _, y = _data()
    common = _fitted(mechanism, rows=np.flatnonzero(y != 2))
    met = ContractCard.from_estimator(common, CONTRACT)
    assert [e.n_samples for e in met.calibrations][2] == 0  # never seen: no rows
    assert met.calibrations[2].certificate.reason.startswith("the group's calibration size is 0")
    assert met.decision == "infeasible"  # the unseen class gets the trivial set, flagged
    assert verify_card(met.to_json()).uninformative_groups == (2,)


def test_private_group_sizes_publish_only_the_released_sizes():
    # ExponQ at 0.2 cannot reach the level in the rare group (about 25 rows).
    estimator = _fitted(ExponQ(epsilon=0.2), group_sizes=PrivateGroupSizes(epsilon=1.0))
    calibration = estimator.calibration_
    released = calibration.details["group_calibration_sizes"]
    true_sizes = np.bincount(_data()[2], minlength=3).tolist()
    assert released != true_sizes
    card = ContractCard.from_estimator(estimator, CONTRACT, epsilon_train=0.0)
    assert [e.n_samples for e in card.calibrations] == list(released)
    assert card.configuration.group_sizes.name == "PrivateGroupSizes"
    assert card.configuration.group_sizes.params["epsilon"] == 1.0
    # ExponQ 0.2 + sizes 1, doubled under replace-one: 2.4 > max_epsilon_cal.
    assert card.calibration_privacy.epsilon == pytest.approx(2.4)
    failed = [c.name for c in card.clauses if not c.satisfied]
    assert failed == ["level_reachable", "epsilon_cal", "informative"]
    published = json.loads(card.to_json())
    assert "owner_diagnostics" not in published
    text = json.dumps(published)
    for size in true_sizes:
        assert f" {size}," not in text and f"[{size}," not in text
    assert verify_card(card.to_json()).status == "rejected"
    # A released size above the calibration size is impossible (m_h <= n).
    n = card.configuration.n_samples
    grown = _edit(card.to_json(), lambda f: f["calibrations"][0].update(n_samples=n + 1))
    assert any("exceeds the calibration size" in p for p in verify_card(grown).problems)
    # The owner asks for the true sizes explicitly.
    with pytest.warns(UserWarning, match="NOT covered"):
        owner = json.loads(card.to_json(include_owner_diagnostics=True))
    assert owner["owner_diagnostics"]["calibration"]["group_sizes"] == true_sizes


@pytest.mark.parametrize(
    "mechanism",
    [ExponQ(epsilon=1.0), DPAPS(epsilon=1.0, n_bins=20), PCOQS(rho=0.5), SplitConformal()],
    ids=lambda m: type(m).__name__,
)
@pytest.mark.parametrize("group_sizes", ["public", PrivateGroupSizes(epsilon=0.5)], ids=str)
def test_every_central_mechanism_verifies(mechanism, group_sizes):
    card = ContractCard.from_estimator(_fitted(mechanism, group_sizes), CONTRACT)
    result = verify_card(card.to_json())
    assert result.status in ("accepted", "rejected"), result.problems
    assert [c.satisfied for c in result.clauses] == [c.satisfied for c in card.clauses]


def _edit(text, change):
    data = json.loads(text)
    change(data["formal"])
    return _reseal(data)


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (
            lambda f: f["calibrations"][1]["certificate"].update(
                lower_bound=0.95, marginal_lower_bound=0.95
            ),
            "formal.calibrations[1].certificate.lower_bound",
        ),
        (
            lambda f: f["calibrations"][2]["certificate"].update(level_reachable=True, reason=""),
            "formal.calibrations[2].certificate.level_reachable",
        ),
        (lambda f: f["privacy"]["calibration"].update(epsilon=1.0), "privacy.calibration.epsilon"),
        (
            lambda f: f["configuration"]["mechanism"]["params"].update(epsilon=0.5),
            "formal.privacy.calibration.epsilon: recorded 0.4, recomputed 1.0",
        ),
    ],
    ids=["lower_bound", "reachable", "composed_epsilon", "mechanism_epsilon"],
)
def test_verifier_recomputes_each_groups_certificate_and_the_composition(change, path):
    text = _fitted(ExponQ(epsilon=0.2)).card_.to_json()  # the rare group is unreachable
    assert verify_card(text).status == "unchecked"
    result = verify_card(_edit(text, change))
    assert result.status == "inconsistent"
    assert any(path in problem for problem in result.problems), result.problems


def test_verifier_checks_group_sizes():
    text = _fitted().card_.to_json()
    moved = _edit(text, lambda f: f["calibrations"][0].update(n_samples=1))
    assert verify_card(moved).status == "inconsistent"  # public sizes sum to n
    dropped = _edit(text, lambda f: f["calibrations"].pop())
    assert verify_card(dropped).status == "inconsistent"
    duplicated = _edit(text, lambda f: f["calibrations"][1].update(group=0))
    assert verify_card(duplicated).status == "inconsistent"


def test_callable_groups_regression_card():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(6000, 2))
    y = X[:, 0] + rng.normal(size=6000) * (1 + (X[:, 1] > 0))
    model = Ridge().fit(X[:2000], y[:2000])

    def second_column_positive(Z):
        return (np.asarray(Z)[:, 1] > 0).astype(int)

    estimator = PrivateConformalRegressor(
        model,
        mechanism=ExponQ(epsilon=1.0),
        alpha=0.1,
        mondrian=second_column_positive,
        group_sizes=PrivateGroupSizes(epsilon=0.5, group_ids=[0, 1]),
        score_bounds=(0.0, 10.0),
        adjacency="add/remove",
        random_state=0,
    ).fit_calibrate(X[2000:], y[2000:])
    card = estimator.card_
    assert card.configuration.mondrian == "callable second_column_positive"
    assert [e.group for e in card.calibrations] == [0, 1]
    assert card.calibration_privacy.epsilon == pytest.approx(1.5)
    widths = [e.release.threshold_score_units for e in card.calibrations]
    assert widths == pytest.approx(list(estimator.group_thresholds_))
    assert verify_card(card.to_json()).status == "unchecked"
    assert "second_column_positive" in card.to_markdown()
    renamed = _edit(card.to_json(), lambda f: f["calibrations"][0].update(group=7))
    assert any("configuration.groups" in p for p in verify_card(renamed).problems)
    both = _edit(
        card.to_json(),
        lambda f: (f["calibrations"][0].update(group=7), f["configuration"].update(groups=[7, 1])),
    )
    assert any("group_ids" in p for p in verify_card(both).problems)


def test_coverage_clause_is_the_worst_groups():
    # P-COQS's bound grows with n: the rare class (33 rows) certifies far less.
    card = ContractCard.from_estimator(_fitted(PCOQS(rho=0.5)), CONTRACT)
    bounds = [e.certificate.marginal_lower_bound for e in card.calibrations]
    assert min(bounds[:2]) >= CONTRACT.target_coverage > bounds[2]
    coverage = card.clauses[0]
    assert not coverage.satisfied and coverage.value == bounds[2]
    assert coverage.margin == pytest.approx(bounds[2] - CONTRACT.target_coverage)
    assert coverage.requirement.endswith("in every group; fails in groups 2")
    result = verify_card(card.to_json())
    assert result.status == "rejected" and result.failed_clauses[0].name == "coverage"


def test_search_refuses_mondrian_templates_before_reading_data():
    model, X, y = _data()
    template = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=1.0), mondrian="class", group_sizes="public"
    )
    search = CertificateAwareSearch(
        template, contract=CONTRACT, param_grid={"alpha": [0.1], "calibration_size": [1000]}
    )
    with pytest.raises(ValueError, match="nor Mondrian calibration"):
        search.fit(X, y)
    assert not hasattr(search, "card_")
