"""Risk cards: built from the estimator, read back, verified, edited and caught.

The certificate a card states is recomputed here through the mechanism's public
``risk_certificate``, and every edit of the risk level or of the certified bound is
checked to make the verifier report the card inconsistent.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.multioutput import MultiOutputClassifier

from privconf_sklearn import PrivateRiskControlClassifier
from privconf_sklearn.cards import (
    ContractCard,
    OwnerDiagnosticsWarning,
    RiskCard,
    RiskContract,
    verify_card,
)
from privconf_sklearn.mechanisms import ExponCRC, SplitCRC, UninformativeCalibrationWarning

from ._multilabel import make_multilabel

INF = float("inf")


@pytest.fixture(scope="module")
def data():
    return make_multilabel(3000, seed=5)


@pytest.fixture(scope="module")
def model(data):
    X, Y = data
    return MultiOutputClassifier(LogisticRegression()).fit(X[:1000], Y[:1000])


def _fitted(model, data, mechanism, rows=slice(1000, None), **params):
    X, Y = data
    crc = PrivateRiskControlClassifier(model, mechanism=mechanism, random_state=0, **params)
    return crc.fit_calibrate(X[rows], Y[rows])


def _contract(**changes):
    values = {"loss": "fnr", "loss_bound": 1.0, "max_risk": 0.1}
    values.update(max_epsilon_train=INF, max_epsilon_cal=1.0)
    values.update(changes)
    return RiskContract(**values)


@pytest.fixture(scope="module")
def crc(model, data):
    return _fitted(model, data, ExponCRC(1.0), alpha=0.1)


def test_honest_card_states_the_risk_and_is_accepted(crc):
    card = RiskCard.from_estimator(crc, _contract())
    setup, (entry,) = card.configuration, card.calibrations
    assert (setup.loss, setup.loss_bound, setup.alpha, setup.n_samples) == ("fnr", 1.0, 0.1, 2000)
    assert setup.mechanism.name == "ExponCRC" and setup.thresholds[-1] == -INF
    certificate = crc.mechanism_.risk_certificate(
        2000, 0.1, len(setup.thresholds), resolution=entry.resolution
    )
    assert entry.risk_bound == certificate.upper_bound == crc.calibration_.risk_upper_bound
    assert entry.release.threshold == crc.threshold_ and entry.release.informative
    assert card.decision == "feasible"
    for form in (card, card.to_json(), json.loads(card.to_json()), card.to_dict()):
        assert verify_card(form).status == "accepted"
    assert RiskCard.from_json(card.to_json()) == card


def test_card_property_is_a_risk_card_without_contract(crc):
    card = crc.card_
    assert isinstance(card, RiskCard) and card.contract is None and card.decision == "unchecked"
    assert verify_card(card.to_json()).status == "unchecked"


def test_card_from_a_file(crc, tmp_path):
    path = tmp_path / "card.json"
    path.write_text(RiskCard.from_estimator(crc, _contract()).to_json(), encoding="utf-8")
    assert verify_card(str(path)).status == "accepted"


def test_edited_risk_level_is_caught(crc):
    """The level edited in the JSON, with and without a recomputed digest."""
    card = RiskCard.from_estimator(crc, _contract())
    data = json.loads(card.to_json())
    data["formal"]["configuration"]["alpha"] = 0.2
    result = verify_card(data)
    assert result.status == "inconsistent"
    assert any("formal_sha256" in problem for problem in result.problems)
    assert any("risk_bound" in problem for problem in result.problems)
    setup = dataclasses.replace(card.configuration, alpha=0.2)
    redigested = RiskCard.build(
        contract=card.contract,
        configuration=setup,
        training_privacy=card.training_privacy,
        calibration_privacy=card.calibration_privacy,
        calibrations=card.calibrations,
    )
    result = verify_card(redigested.to_json())
    assert result.status == "inconsistent"
    assert not any("formal_sha256" in problem for problem in result.problems)
    assert any("calibrations[0].risk_bound" in problem for problem in result.problems)


def test_edited_certified_risk_is_caught(crc):
    card = RiskCard.from_estimator(crc, _contract(max_risk=0.05))
    assert card.decision == "infeasible"
    entry = dataclasses.replace(card.calibrations[0], risk_bound=0.04)
    forged = RiskCard.build(
        contract=card.contract,
        configuration=card.configuration,
        training_privacy=card.training_privacy,
        calibration_privacy=card.calibration_privacy,
        calibrations=[entry],
    )
    assert forged.decision == "feasible"
    result = verify_card(forged.to_json())
    assert result.status == "inconsistent" and not result.failed_clauses[0].satisfied


def test_stricter_contract_is_rejected_with_its_margin(crc):
    card = RiskCard.from_estimator(crc, _contract(max_risk=0.05))
    result = verify_card(card.to_json())
    assert result.status == "rejected"
    (failed,) = result.failed_clauses
    assert failed.name == "risk"
    assert failed.margin == pytest.approx(0.05 - crc.calibration_.risk_upper_bound, abs=1e-15)


@pytest.mark.parametrize(
    ("changes", "clause"),
    [
        ({"loss": "callable cost"}, "loss"),
        ({"loss_bound": 2.0}, "loss"),
        ({"max_epsilon_cal": 0.5}, "epsilon_cal"),
        ({"max_epsilon_train": 3.0}, "epsilon_train"),
    ],
)
def test_each_requirement_is_checked(crc, changes, clause):
    result = verify_card(RiskCard.from_estimator(crc, _contract(**changes)).to_json())
    assert result.status == "rejected"
    assert [c.name for c in result.failed_clauses] == [clause]


def test_guarantee_is_compared_under_the_contracts_adjacency(crc, model, data):
    """ExponCRC is epsilon-DP under both relations: its card meets an add/remove contract
    with epsilon, not only a replace-one one. A Mondrian composition stated under
    replace-one (2 epsilon, a row may move between groups) does not give add/remove
    budgets (as for coverage cards)."""
    assert crc.calibration_.privacy.adjacencies == ("replace-one", "add/remove")
    for adjacency in ("replace-one", "add/remove"):
        result = verify_card(RiskCard.from_estimator(crc, _contract(adjacency=adjacency)))
        assert result.status == "accepted", (adjacency, result.report())
    grouped = _fitted(
        model, data, ExponCRC(1.0), alpha=0.1, mondrian=lambda X: X[:, 0] > 0, group_sizes="public"
    )
    contract = _contract(adjacency="add/remove", max_epsilon_cal=2.0)
    result = verify_card(RiskCard.from_estimator(grouped, contract))
    assert result.status == "rejected"
    assert [c.name for c in result.failed_clauses] == ["epsilon_cal", "delta_cal"]
    assert "replace-one neighbours only" in result.failed_clauses[0].requirement


def test_a_card_that_records_one_relation_of_a_two_relation_guarantee_still_verifies(crc):
    """Cards written before guarantees kept both relations recorded the estimator's one:
    the same guarantee, narrowed; the verifier accepts it, and refuses a false epsilon."""
    data = json.loads(RiskCard.from_estimator(crc, _contract()).to_json())
    data["formal"]["privacy"]["calibration"]["adjacency"] = "replace-one"
    card = RiskCard.from_dict({**data, "formal_sha256": ""})
    assert verify_card(card.to_json()).status == "accepted"
    data["formal"]["privacy"]["calibration"]["epsilon"] = 0.5
    card = RiskCard.from_dict({**data, "formal_sha256": ""})
    assert verify_card(card.to_json()).status == "inconsistent"


def test_non_private_release_fails_the_budget(model, data):
    crc = _fitted(model, data, SplitCRC(), alpha=0.1)
    result = verify_card(RiskCard.from_estimator(crc, _contract()).to_json())
    assert result.status == "rejected"
    assert [c.name for c in result.failed_clauses] == ["epsilon_cal"]
    assert math.isinf(result.failed_clauses[0].value)


def test_unreachable_level_is_flagged(model, data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeCalibrationWarning)
        crc = _fitted(model, data, ExponCRC(0.5), rows=slice(1000, 1020), alpha=0.1)
    card = RiskCard.from_estimator(crc, _contract())
    (entry,) = card.calibrations
    assert not entry.level_reachable and entry.risk_bound == 0.0 and entry.reason
    assert not entry.release.informative and entry.release.threshold == -INF
    assert card.calibration_privacy.epsilon == 0.0
    result = verify_card(card.to_json())
    assert result.status == "rejected" and result.informative is False
    assert [c.name for c in result.failed_clauses] == ["level_reachable", "informative"]


def test_mondrian_card_has_one_entry_per_group(model, data):
    crc = _fitted(
        model, data, ExponCRC(1.0), alpha=0.1, mondrian=lambda X: X[:, 0] > 0, group_sizes="public"
    )
    card = RiskCard.from_estimator(crc, _contract(max_epsilon_cal=2.0))
    assert card.configuration.groups == (False, True)
    assert [e.group for e in card.calibrations] == [False, True]
    assert sum(e.n_samples for e in card.calibrations) == 2000
    assert card.calibration_privacy.epsilon == 2.0  # a replaced row may move between groups
    assert card.risk_upper_bound == max(e.risk_bound for e in card.calibrations) <= 0.1
    assert verify_card(card.to_json()).status == "accepted"
    assert verify_card(card.with_contract(_contract()).to_json()).status == "rejected"


def test_owner_diagnostics_are_written_only_on_request(model, data):
    X, Y = data

    def cost(y_true, y_set):
        return (y_true & ~y_set).sum(axis=1) + 0.5 * (~y_set.any(axis=1))  # empty set costs

    crc = PrivateRiskControlClassifier(
        model, mechanism=ExponCRC(1.0), alpha=0.5, loss=cost, loss_bound=6.0, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        crc.fit_calibrate(X[1000:], Y[1000:])
    card = crc.card_
    assert card.configuration.loss == "callable " + cost.__qualname__
    assert card.owner_diagnostics and "owner_diagnostics" not in card.to_dict()
    with pytest.warns(OwnerDiagnosticsWarning):
        assert "owner_diagnostics" in card.to_dict(include_owner_diagnostics=True)


def test_contract_card_refuses_a_risk_estimator(crc):
    with pytest.raises(TypeError, match="RiskCard"):
        ContractCard.from_estimator(crc)


def test_malformed_risk_cards_are_inconsistent(crc):
    data = json.loads(RiskCard.from_estimator(crc, _contract()).to_json())
    data["formal"]["calibrations"][0]["release"]["index"] = 0
    assert verify_card(data).status == "inconsistent"
    data = json.loads(RiskCard.from_estimator(crc, _contract()).to_json())
    data["schema_version"] = 2
    assert verify_card(data).status == "inconsistent"


def test_bad_contract_is_refused_by_name():
    with pytest.raises(ValueError, match="max_risk"):
        _contract(max_risk=1.0)
    with pytest.raises(ValueError, match="loss_bound"):
        _contract(loss_bound=-1.0)
    assert np.isfinite(_contract().max_risk)


def test_markdown_and_command_line(crc, tmp_path, capsys):
    from privconf_sklearn.__main__ import main

    card = RiskCard.from_estimator(crc, _contract(max_risk=0.05))
    text = card.to_markdown()
    assert text.startswith("# Risk card — INFEASIBLE") and "`risk`" in text
    assert card.formal_sha256 in text
    path = tmp_path / "card.json"
    card.save(path)
    assert RiskCard.load(path) == card
    assert main(["card", "show", str(path)]) == 0
    assert capsys.readouterr().out.startswith("# Risk card — INFEASIBLE")
    assert main(["card", "verify", str(path)]) == 1
    assert "contract not met (risk)" in capsys.readouterr().out


# ------------------------------------------------------------------ signatures
def test_signed_risk_cards_verify_only_under_the_issuers_key(crc):
    """A risk card is signed as a contract card is: the signature covers the schema
    header, the formal layer and the diagnostics; an edit, even resealed, or another
    issuer's key is caught."""
    ed25519 = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    issuer, other = ed25519.Ed25519PrivateKey.generate(), ed25519.Ed25519PrivateKey.generate()
    card = RiskCard.from_estimator(crc, _contract())
    signed = card.sign(issuer)
    assert isinstance(signed, RiskCard) and signed.signature is not None
    assert signed.formal_sha256 == card.formal_sha256 and card.signature is None
    text = signed.to_json()
    assert RiskCard.from_json(text) == signed
    result = verify_card(text, public_key=issuer.public_key())
    assert result.status == "accepted", result.report()
    assert "Signed** (Ed25519)" in signed.to_markdown()
    assert "**Unsigned.**" in card.to_markdown()

    def problems(data, key=issuer):
        return verify_card(json.dumps(data), public_key=key.public_key()).problems

    assert any("not by the given key" in p for p in problems(json.loads(text), other))
    unsigned = verify_card(card.to_json(), public_key=issuer.public_key())
    assert unsigned.status == "inconsistent" and "not signed" in unsigned.report()
    # The diagnostics are signed: an edited mechanism detail breaks the signature.
    edited = json.loads(text)
    edited["diagnostics"]["mechanism_details"]["edited"] = True
    assert any(p.startswith("signature: the signature does not verify") for p in problems(edited))
    # A resealed edit of the formal layer keeps the digest consistent, not the signature.
    looser = dataclasses.replace(card.calibrations[0], risk_bound=0.01)
    resealed = json.loads(
        dataclasses.replace(card, calibrations=(looser,), formal_sha256="").to_json()
    )
    resealed["signature"] = json.loads(text)["signature"]
    assert any(p.startswith("signature:") for p in problems(resealed))


def test_unsigned_risk_cards_keep_the_first_schema(crc):
    """An unsigned risk card writes no "signature" key: readers of the first risk-card
    schema (no signatures) still read it; it reads back unsigned."""
    data = json.loads(RiskCard.from_estimator(crc, _contract()).to_json())
    assert "signature" not in data
    card = RiskCard.from_dict(data)
    assert card.signature is None and verify_card(data).status == "accepted"


# ------------------------------------------------------------------ evaluation
@pytest.fixture(scope="module")
def half(model, data):
    """Calibrated on rows 1000..1999; rows 2000.. are held out for evaluation."""
    return _fitted(model, data, ExponCRC(1.0), rows=slice(1000, 2000), alpha=0.1)


def _held_out_fnr(crc, data):
    X, Y = data
    sets, truth = crc.predict_set(X[2000:]), Y[2000:] == 1
    return float(np.mean(1 - (sets & truth).sum(axis=1) / truth.sum(axis=1))), sets


def test_evaluate_measures_the_risk_of_the_released_sets(half, data):
    """Public test data: the card publishes the held-out FNR and mean set size; signing
    afterwards covers them, and an edited risk breaks the signature."""
    X, Y = data
    card = RiskCard.from_estimator(half, _contract())
    assert card.evaluate(X[2000:], Y[2000:], public=True) is card
    fnr, sets = _held_out_fnr(half, data)
    found = card.diagnostics
    assert found.n_test == 1000 and found.mean_set_size == sets.sum(axis=1).mean()
    assert found.empirical_risk == pytest.approx(fnr, rel=1e-12, abs=0)  # 5 labels: exact
    assert not card.owner_diagnostics.get("test")
    text = card.to_json()
    assert json.loads(text)["diagnostics"]["empirical_risk"] == found.empirical_risk
    assert RiskCard.from_json(text) == card and verify_card(text).status == "accepted"
    page = card.to_markdown()
    assert "| n_test | empirical_risk | mean_set_size |" in page
    assert f"| 1000 | {found.empirical_risk:.6g} |" in page
    ed25519 = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    issuer = ed25519.Ed25519PrivateKey.generate()
    signed = json.loads(card.sign(issuer).to_json())
    assert verify_card(signed, public_key=issuer.public_key()).status == "accepted"
    signed["diagnostics"]["empirical_risk"] = 0.01
    assert verify_card(signed, public_key=issuer.public_key()).status == "inconsistent"


def test_evaluate_keeps_private_test_data_to_the_owner(half, data):
    X, Y = data
    card = half.card_.evaluate(X[2000:], Y[2000:])
    fnr, _ = _held_out_fnr(half, data)
    assert card.owner_diagnostics["test"]["empirical_risk"] == pytest.approx(fnr, rel=1e-12)
    published = json.loads(card.to_json())["diagnostics"]
    assert "empirical_risk" not in published and published["n_test"] is None
    with pytest.warns(OwnerDiagnosticsWarning):
        owner = json.loads(card.to_json(include_owner_diagnostics=True))["owner_diagnostics"]
    assert owner["test"]["n_test"] == 1000


def test_unevaluated_cards_write_no_risk_field(crc, data):
    """The new diagnostic is written only when measured: unevaluated risk cards and every
    coverage card keep the JSON of the first schema; an unknown key is still refused."""
    data_ = json.loads(RiskCard.from_estimator(crc, _contract()).to_json())
    assert "empirical_risk" not in data_["diagnostics"]
    data_["diagnostics"]["empirical_risk"] = 0.05
    assert RiskCard.from_dict(data_).diagnostics.empirical_risk == 0.05
    data_["diagnostics"]["risk"] = 0.05
    assert verify_card(data_).status == "inconsistent"


def test_evaluate_a_card_read_back_needs_its_own_estimator(half, crc, model, data):
    X, Y = data
    card = RiskCard.from_json(RiskCard.from_estimator(half, _contract()).to_json())
    with pytest.raises(ValueError, match="no estimator attached"):
        card.evaluate(X[2000:], Y[2000:])
    with pytest.raises(ValueError, match="not the calibration this card records"):
        card.evaluate(X[2000:], Y[2000:], estimator=crc)
    with pytest.raises(TypeError, match="PrivateRiskControlClassifier"):
        card.evaluate(X[2000:], Y[2000:], estimator=model)
    card.evaluate(X[2000:], Y[2000:], estimator=half)
    assert card.owner_diagnostics["test"]["n_test"] == 1000
    signed = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    card = card.sign(signed.Ed25519PrivateKey.generate())
    with pytest.raises(ValueError, match="evaluate the card before signing"):
        card.evaluate(X[2000:], Y[2000:], estimator=half)


def test_evaluate_refuses_bad_test_data(half, data):
    X, Y = data
    card = half.card_
    with pytest.raises(ValueError, match="X has 1000 rows but y has 999"):
        card.evaluate(X[2000:], Y[2001:])
    with pytest.raises(TypeError, match="2-d indicator"):
        card.evaluate(X[2000:], np.argmax(Y[2000:], axis=1))
    with pytest.raises(ValueError, match="at least one row"):
        card.evaluate(X[:0], Y[:0])
    with pytest.raises(ValueError, match="public"):
        card.evaluate(X[2000:], Y[2000:], public="yes")
    assert not card.owner_diagnostics.get("test")
    labels = np.argmax(Y, axis=1)  # one label per row: the FNR is the miscoverage
    single = PrivateRiskControlClassifier(
        LogisticRegression().fit(X[:1000], labels[:1000]), mechanism=SplitCRC(), alpha=0.1
    ).fit_calibrate(X[1000:2000], labels[1000:2000])
    with pytest.raises(ValueError, match="one label per row"):
        single.card_.evaluate(X[2000:], Y[2000:])
    card = single.card_.evaluate(X[2000:], labels[2000:], public=True)
    sets = single.predict_set(X[2000:])
    missed = 1 - sets[np.arange(1000), np.searchsorted(single.classes_, labels[2000:])].mean()
    assert card.diagnostics.empirical_risk == pytest.approx(missed, rel=1e-12)


def test_evaluate_uses_the_callable_loss_and_its_bound(model, data):
    """A user loss with B = 6: the published risk is the exact mean of its values; per
    Mondrian group the sets are those of the group's threshold."""
    X, Y = data

    def cost(y_true, y_set):
        return (y_true & ~y_set).sum(axis=1) + 0.5 * (~y_set.any(axis=1))

    crc = PrivateRiskControlClassifier(
        model, mechanism=SplitCRC(), alpha=0.5, loss=cost, loss_bound=6.0,
        mondrian=lambda X: X[:, 0] > 0, group_sizes="public", random_state=0,
    )  # fmt: skip
    crc.fit_calibrate(X[1000:2000], Y[1000:2000])
    card = crc.card_.evaluate(X[2000:], Y[2000:], public=True)
    exact = cost(Y[2000:] == 1, crc.predict_set(X[2000:])).mean()
    assert card.diagnostics.empirical_risk == exact > 6.0 / 1000  # not vacuous
