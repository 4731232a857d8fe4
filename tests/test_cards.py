"""Contract cards (paper 003 Sec. 3-4, Table 1): Eq. (3), JSON, Markdown, verifier, CLI."""

import json
import math
import subprocess
import sys
import warnings
from functools import lru_cache

import numpy as np
import pytest
from diffprivlib.models import GaussianNB, LinearRegression
from diffprivlib.models import StandardScaler as DPStandardScaler
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

from privconf_sklearn import PrivateConformalClassifier, PrivateConformalRegressor
from privconf_sklearn.__main__ import main
from privconf_sklearn.cards import (
    CLAUSES,
    CardFormatError,
    CertificateAwareSearch,
    Contract,
    ContractCard,
    verify_card,
)
from privconf_sklearn.cards._serial import loads, sha256_of
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.mechanisms import DPAPS, PCOQS, ExponQ, SplitConformal
from privconf_sklearn.mechanisms.fedcp import FedCP2QQ
from privconf_sklearn.metrics import mean_set_size, set_coverage

BOUNDS = (-10.0, 10.0)


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


DEMO_CONTRACT = Contract(0.9, max_epsilon_train=2.0, max_epsilon_cal=1.0, beta=1e-3)


@lru_cache(maxsize=1)
def _search_card_json():
    """A card with every formal section filled: contract, release and a selection."""
    _, _, X_cal, y_cal, X_test, y_test = _data()
    search = CertificateAwareSearch(
        PrivateConformalClassifier(
            _model(), mechanism=DPAPS(beta=1e-3), conformity_score="aps", random_state=0
        ),
        contract=Contract(0.7, max_epsilon_train=2.0, max_epsilon_cal=4.0, beta=1e-3),
        param_grid={
            "alpha": [0.35, 0.25],
            "mechanism__epsilon": [2.0, 4.0],
            "calibration_size": [1000, 3500],
        },
        random_state=0,
    ).fit(X_cal, y_cal, X_eval=X_test, y_eval=y_test)
    statuses = {c.status for c in search.card_.selection.candidates}
    assert statuses == {"infeasible", "dominated", "skipped", "chosen"}
    assert search.card_.decision == "feasible"
    return search.card_.to_json()


def _leaves(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _leaves(value, (*path, i))
    else:
        yield path


def _formal_paths():
    return [path for path in _leaves(loads(_search_card_json())["formal"])]


def _tampered_value(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return 0.5 if not math.isfinite(value) else 1.5 * value + 0.25
    if isinstance(value, str):
        return value + "x"
    return 0.5  # None


def _tamper(text, path, *, reseal):
    data = loads(text)
    node = data["formal"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = _tampered_value(node[path[-1]])
    if reseal:
        data["formal_sha256"] = sha256_of(
            {
                "schema": data["schema"],
                "schema_version": data["schema_version"],
                "formal": data["formal"],
            }
        )
    return data


def _path_id(path):
    return ".".join(str(p) for p in path)


# ------------------------------------------------------------- Observation 4.1
def test_paper_example_card_is_feasible():
    """Paper 003 Sec. 7 example: gamma = 0.75, eps_cal = 8, n = 4000 gives L = 0.749."""
    contract = Contract(0.70, max_epsilon_train=4.0, max_epsilon_cal=8.0, beta=1e-3)
    card = ContractCard.for_configuration(
        DPAPS(epsilon=8.0, beta=1e-3), 4000, 0.25, contract=contract, epsilon_train=4.0
    )
    assert round(card.certificate.lower_bound, 3) == 0.749
    assert card.decision == "feasible"
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
    privacy = mechanism.privacy_guarantee()
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


# ------------------------------------------------------------------- tampering
@pytest.mark.parametrize("path", _formal_paths(), ids=_path_id)
def test_tampering_with_any_formal_field_is_detected(path):
    """Observation 4.1's premise: a card whose formal fields were edited is not accepted."""
    result = verify_card(_tamper(_search_card_json(), path, reseal=False))
    assert result.status == "inconsistent"
    assert not result.accepted and result.exit_code == 2


#: Fields a resealed edit can change without contradicting a recomputation: the
#: released outputs (data-dependent), and the stated model, training privacy and notes
#: of grid configurations (an edit is caught only when it changes a configuration's
#: feasibility or dominance; the chosen one is cross-checked with the card's own
#: fields). The digest is their only protection.
DIGEST_ONLY = (
    ("release",),
    ("selection", "candidates", "*", "note"),
    ("selection", "candidates", "*", "training"),
    ("selection", "candidates", "*", "configuration", "task"),
    ("selection", "candidates", "*", "configuration", "estimator"),
    ("selection", "candidates", "*", "configuration", "conformity_score"),
)


def _digest_only(path):
    for pattern in DIGEST_ONLY:
        if len(path) >= len(pattern) and all(
            p == "*" or p == q for p, q in zip(pattern, path, strict=False)
        ):
            return True
    return False


@pytest.mark.parametrize("path", [p for p in _formal_paths() if not _digest_only(p)], ids=_path_id)
def test_resealed_tampering_is_caught_by_recomputation(path):
    """Even with a recomputed digest, editing a field Eq. (3) depends on is detected."""
    result = verify_card(_tamper(_search_card_json(), path, reseal=True))
    assert result.status == "inconsistent", result.report()


def test_structural_edits_are_detected():
    text = _search_card_json()
    assert verify_card(text).status == "accepted"
    data = loads(text)
    data["formal"]["clauses"].pop()
    assert verify_card(data).status == "inconsistent"
    data = loads(text)
    data["formal"]["selection"]["candidates"].pop(0)
    assert verify_card(data).status == "inconsistent"
    data = loads(text)
    data["formal"]["unexpected"] = 1
    assert verify_card(data).status == "inconsistent"
    data = loads(text)
    data["schema_version"] = 2
    assert verify_card(data).status == "inconsistent"
    assert verify_card("{not json").status == "inconsistent"


def test_diagnostics_are_outside_the_digest():
    data = loads(_search_card_json())
    data["diagnostics"]["empirical_coverage"] = 0.123
    assert verify_card(data).status == "accepted"


# ------------------------------------------------------------- JSON and layers
@lru_cache(maxsize=1)
def _cards():
    """Cards of every privacy notion, bound kind and outcome (read-only in tests)."""
    *_, X_test, y_test = _data()
    cards = {
        "exponq": ContractCard.from_estimator(_calibrated(ExponQ(epsilon=1.0)), DEMO_CONTRACT),
        "dpaps": ContractCard.from_estimator(
            _calibrated(DPAPS(epsilon=1.0), score="aps"), DEMO_CONTRACT
        ),
        "pcoqs_zcdp_approximate": ContractCard.from_estimator(
            _calibrated(PCOQS(rho=0.5, beta=0.01)), DEMO_CONTRACT
        ),
        "split_no_privacy": ContractCard.from_estimator(_calibrated(SplitConformal())),
        "search": ContractCard.from_json(_search_card_json()),
    }
    _, _, X_cal, y_cal, _, _ = _data()
    federated = PrivateConformalClassifier(
        _model(), mechanism=FedCP2QQ(epsilon=2.0), alpha=0.1, random_state=0
    ).fit_calibrate(X_cal, y_cal, groups=np.arange(len(y_cal)) % 8)
    cards["fedcp2qq_local"] = ContractCard.from_estimator(
        federated, Contract(0.9, max_epsilon_train=2.0, max_epsilon_cal=2.0, beta=1e-3)
    )
    with pytest.warns(UserWarning):
        cards["unreachable"] = ContractCard.from_estimator(
            _calibrated(ExponQ(epsilon=0.1), n=30), DEMO_CONTRACT
        )
    for card in cards.values():
        if card._estimator is not None:
            card.evaluate(X_test, y_test)
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
    assert [c.name for c in unreachable.clauses if not c.satisfied] == ["level_reachable"]
    assert verify_card(unreachable).status == "rejected"
    dpaps = cards["dpaps"]
    assert dpaps.diagnostics.certificate_width is not None
    assert dpaps.diagnostics.diagnostics_are_private is False
    assert dpaps.diagnostics.observed_inflation <= dpaps.diagnostics.certificate_width
    redacted = dpaps.redacted()
    assert redacted.diagnostics.certificate_width is None and redacted.diagnostics.redacted
    assert redacted.formal_sha256 == dpaps.formal_sha256
    assert verify_card(redacted.to_json()).status == verify_card(dpaps).status
    assert "redacted" in redacted.to_markdown()


def test_broken_privacy_guarantee_fails_the_calibration_clause():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(3000, 2))
    y = X @ [1.0, 2.0] + rng.normal(size=3000)
    model = LinearRegression(epsilon=1.0, bounds_X=(-1, 1), bounds_y=(-6, 6), random_state=0)
    model.fit(X[:1000], y[:1000])
    estimator = PrivateConformalRegressor(
        model, mechanism=ExponQ(epsilon=1.0), score_bounds=None, random_state=0
    )
    with pytest.warns(Warning, match="(?i)privacy|bounds"):
        estimator.fit_calibrate(X[1000:2000], y[1000:2000])
    card = ContractCard.from_estimator(
        estimator, Contract(0.9, max_epsilon_train=1.0, max_epsilon_cal=1.0, beta=0.0)
    )
    assert not card.calibration_privacy.holds
    clause = dict((c.name, c) for c in card.clauses)["epsilon_cal"]
    assert not clause.satisfied and clause.margin == -math.inf
    assert verify_card(card.to_json()).status == "rejected"


# ----------------------------------------------------------- card_ on estimators
def test_card_attribute_reads_epsilon_train_from_diffprivlib():
    _, _, _, _, X_test, y_test = _data()
    estimator = _calibrated(ExponQ(epsilon=1.0))
    card = estimator.card_
    assert card.decision == "unchecked" and card.contract is None
    assert card.training_privacy.epsilon == 2.0
    assert "GaussianNB.epsilon" in card.training_privacy.source
    assert card.configuration.task == "classification"
    assert card.configuration.mechanism.params["epsilon"] == 1.0
    assert card.release.threshold == estimator.calibration_.threshold
    assert card.evaluate(X_test, y_test) is card
    sets = estimator.predict_set(X_test)
    assert card.diagnostics.empirical_coverage == set_coverage(y_test, sets, estimator.classes_)
    assert card.diagnostics.mean_set_size == mean_set_size(sets)
    assert card.diagnostics.accuracy == float(np.mean(estimator.predict(X_test) == y_test))
    loaded = ContractCard.from_json(card.to_json())
    with pytest.raises(ValueError, match="estimator="):
        loaded.evaluate(X_test, y_test)
    with pytest.raises(ValueError, match="not the calibration"):
        loaded.evaluate(X_test, y_test, estimator=_calibrated(ExponQ(epsilon=2.0)))


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


def test_card_attribute_on_regressor():
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(3000, 2))
    y = X @ [1.0, 2.0] + rng.normal(size=3000)
    model = LinearRegression(epsilon=1.5, bounds_X=(-1, 1), bounds_y=(-6, 6), random_state=0)
    model.fit(X[:1000], y[:1000])
    estimator = PrivateConformalRegressor(
        model, mechanism=DPAPS(epsilon=4.0), score_bounds=(0.0, 8.0), random_state=0
    ).fit_calibrate(X[1000:2000], y[1000:2000])
    card = estimator.card_.evaluate(X[2000:], y[2000:])
    assert card.configuration.task == "regression"
    assert card.training_privacy.epsilon == 1.5
    assert card.release.score_bounds == (0.0, 8.0)
    intervals = estimator.predict_set(X[2000:])
    assert card.diagnostics.mean_width == pytest.approx(np.mean(intervals[:, 1] - intervals[:, 0]))
    assert card.diagnostics.mean_set_size is None and card.diagnostics.empirical_coverage > 0.8
    assert ContractCard.from_json(card.to_json()) == card
    assert verify_card(card.to_json()).status == "unchecked"


def test_bad_contracts_are_refused():
    with pytest.raises(ValueError, match="target_coverage"):
        Contract(1.0, 1.0, 1.0, 1e-3)
    with pytest.raises(ValueError, match="max_epsilon_cal"):
        Contract(0.9, 1.0, -1.0, 1e-3)
    with pytest.raises(ValueError, match="beta"):
        Contract(0.9, 1.0, 1.0, float("nan"))
    with pytest.raises(TypeError, match="Contract"):
        ContractCard.from_estimator(_calibrated(ExponQ(epsilon=1.0)), contract=(0.9, 1, 1, 0))
    with pytest.raises(CardFormatError, match="schema"):
        ContractCard.from_dict({"schema": "other"})


# -------------------------------------------------------------- Markdown and CLI
def test_markdown_rendering():
    cards = _cards()
    text = cards["exponq"].to_markdown()
    assert text.startswith("# Contract card — FEASIBLE")
    for needle in ("## Formal layer", "Eq. (3)", "epsilon_cal", "SHA-256", "empirical coverage"):
        assert needle in text
    text = cards["unreachable"].to_markdown()
    assert "INFEASIBLE" in text and "Failed clauses: `level_reachable`" in text
    text = cards["search"].to_markdown()
    assert "Selection summary" in text and "| 8 | " in text
    assert "publish them only in a trusted audit setting" in text


def test_cli_show_and_verify(tmp_path, capsys):
    cards = _cards()
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    cards["exponq"].save(good)
    cards["unreachable"].save(bad)
    assert main(["card", "show", str(good)]) == 0
    assert "# Contract card — FEASIBLE" in capsys.readouterr().out
    assert main(["card", "show", str(good), "--format", "json"]) == 0
    assert ContractCard.from_json(capsys.readouterr().out) == cards["exponq"]
    assert main(["card", "verify", str(good)]) == 0
    assert "ACCEPTED" in capsys.readouterr().out
    assert main(["card", "verify", str(bad)]) == 1
    assert "FAIL] level_reachable" in capsys.readouterr().out
    edited = tmp_path / "edited.json"
    edited.write_text(good.read_text().replace('"target_coverage": 0.9', '"target_coverage": 0.8'))
    assert main(["card", "verify", str(edited)]) == 2
    assert "edited" in capsys.readouterr().out
    assert main(["card", "show", str(edited)]) == 0
    assert "does not match" in capsys.readouterr().err
    assert main(["card", "verify", str(tmp_path / "missing.json")]) == 2
    result = subprocess.run(
        [sys.executable, "-m", "privconf_sklearn", "card", "verify", str(bad)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "REJECTED" in result.stdout
