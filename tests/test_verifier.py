"""The card verifier never crashes and never accepts what it can recompute (issue 14).

Edits are made on the JSON, as an attacker would; "resealed" edits recompute the
digest as documented (SHA-256 of the key-sorted, compact, ASCII JSON of ``schema``,
``schema_version`` and ``formal``), so only the recomputation can catch them.
"""

import hashlib
import json
import math
import warnings
from dataclasses import replace
from functools import lru_cache

import pytest
from diffprivlib.models import GaussianNB, LinearRegression
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.dummy import DummyRegressor

from privconf_sklearn import PrivateConformalClassifier, PrivateConformalRegressor
from privconf_sklearn.cards import CardFormatError, Contract, ContractCard, verify_card
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.mechanisms import DPAPS, ExponQ, SplitConformal
from privconf_sklearn.model_selection import CertificateAwareSearch
from privconf_sklearn.mondrian import PrivateGroupSizes, mondrian_privacy

CONTRACT = Contract(0.7, max_epsilon_train=2.0, max_epsilon_cal=4.0, beta=1e-3)


@lru_cache(maxsize=1)
def _search_card_json():
    """A card with every formal section filled: contract, release and a selection."""
    X, y = make_two_gaussians(9000, random_state=0)
    model = GaussianNB(epsilon=2.0, bounds=(-10.0, 10.0), random_state=0).fit(X[:3000], y[:3000])
    search = CertificateAwareSearch(
        PrivateConformalClassifier(
            model,
            # The paper's vector release: its offset grows with the grid size, so a grid
            # edit changes feasibility (the sparse-vector offset grows with log B only).
            mechanism=DPAPS(epsilon=2.0, n_bins=20, beta=1e-3, release="vector"),
            conformity_score="lac",  # APS's top bin would make the release trivial
            random_state=0,
        ),
        contract=CONTRACT,
        param_grid={
            "alpha": [0.35, 0.25],
            "mechanism__epsilon": [2.0, 4.0],
            "calibration_size": [1000, 3500],
        },
        random_state=0,
    ).fit(X[3000:7000], y[3000:7000], X_eval=X[7000:], y_eval=y[7000:])
    statuses = {c.status for c in search.card_.selection.candidates}
    assert statuses == {"infeasible", "dominated", "skipped", "chosen"}
    assert search.card_.decision == "feasible"
    return search.card_.to_json()


@lru_cache(maxsize=1)
def _simple_card_json():
    """A for_configuration card: inf training epsilon (no model), encoded as $float."""
    return ContractCard.for_configuration(ExponQ(epsilon=1.0), 3000, 0.1).to_json()


def _reseal(data):
    """Recompute the digest as documented: anyone can, so it proves nothing."""
    payload = {key: data[key] for key in ("schema", "schema_version", "formal")}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    data["formal_sha256"] = hashlib.sha256(text.encode("ascii")).hexdigest()
    return data


def _edited(text, path, value, *, reseal=True):
    data = json.loads(text)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return _reseal(data) if reseal else data


def _leaves(node, path=()):
    if isinstance(node, dict) and set(node) != {"$float"}:
        for key, value in node.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _leaves(value, (*path, i))
    else:
        yield path


def _formal_paths():
    return [("formal", *path) for path in _leaves(json.loads(_search_card_json())["formal"])]


def _tampered(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return 0.75 * value + 0.01  # no fixed point among the values on the card
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, dict):  # {"$float": "inf"}
        return 0.5
    return 0.5  # None


def _path_id(path):
    return ".".join(str(p) for p in path[1:])


def _value(text, path):
    node = json.loads(text)
    for key in path:
        node = node[key]
    return node


# ------------------------------------------------------------------- tampering
@pytest.mark.parametrize("path", _formal_paths(), ids=_path_id)
def test_tampering_with_any_formal_field_is_detected(path):
    text = _search_card_json()
    result = verify_card(_edited(text, path, _tampered(_value(text, path)), reseal=False))
    assert result.status == "inconsistent" and result.exit_code == 2


#: Fields a resealed edit can change without contradicting a recomputation: the
#: released outputs (data-dependent, within their public ranges), and the stated model,
#: training privacy and notes of grid configurations (an edit is caught only when it
#: changes a configuration's feasibility or dominance; the chosen one is cross-checked
#: with the card's own fields). The digest, or a signature, is their only protection.
DIGEST_ONLY = (
    ("calibrations", 0, "release"),
    ("selection", "candidates", "*", "note"),
    ("selection", "candidates", "*", "training"),
    ("selection", "candidates", "*", "configuration", "task"),
    ("selection", "candidates", "*", "configuration", "estimator"),
    ("selection", "candidates", "*", "configuration", "conformity_score"),
)


def _digest_only(path):
    path = path[1:]
    return any(
        len(path) >= len(pattern)
        and all(p == "*" or p == q for p, q in zip(pattern, path, strict=False))
        for pattern in DIGEST_ONLY
    )


@pytest.mark.parametrize("path", [p for p in _formal_paths() if not _digest_only(p)], ids=_path_id)
def test_resealed_tampering_is_caught_by_recomputation(path):
    text = _search_card_json()
    value = _value(text, path)
    # DP-APS's certificate k/(n+1) - beta does not depend on the grid size unless the
    # grid makes the level unreachable (k + lambda(B) > n), so a grid edit is only
    # recomputable when it changes feasibility: 20 -> 2000 bins does at these sizes.
    tampered = 100 * value if path[-1] == "n_bins" else _tampered(value)
    result = verify_card(_edited(text, path, tampered))
    assert result.status == "inconsistent", result.report()


def test_untouched_and_structurally_edited_cards():
    text = _search_card_json()
    assert verify_card(text).status == "accepted"
    data = json.loads(text)
    data["formal"]["clauses"].pop()
    assert verify_card(_reseal(data)).status == "inconsistent"
    data = json.loads(text)
    data["formal"]["selection"]["candidates"].pop(0)
    assert verify_card(_reseal(data)).status == "inconsistent"
    data = json.loads(text)
    data["formal"]["unexpected"] = 1
    assert verify_card(_reseal(data)).status == "inconsistent"
    data = json.loads(text)
    data["schema_version"] = 1
    assert verify_card(data).status == "inconsistent"
    data = json.loads(text)
    data["formal"]["calibrations"].append(data["formal"]["calibrations"][0])
    assert verify_card(_reseal(data)).status == "inconsistent"


def test_diagnostics_are_outside_the_digest():
    """Not evidence: an unsigned card's diagnostics are outside the digest (the Markdown
    says so); a signature covers them (test_signature_covers_the_diagnostics)."""
    data = json.loads(_search_card_json())
    data["diagnostics"]["empirical_coverage"] = 0.123
    assert verify_card(data).status == "accepted"
    assert "(not formal evidence; UNSIGNED, outside the digest)" in (
        ContractCard.from_dict(data).to_markdown()
    )


def test_documented_input_json_loads_with_float_encoding():
    """``verify_card(json.loads(text))`` with ``{'$float': 'inf'}`` values (issue 14)."""
    text = _simple_card_json()
    data = json.loads(text)
    assert data["formal"]["privacy"]["training"]["epsilon"] == {"$float": "inf"}
    assert verify_card(data).status == "unchecked"
    data["formal"]["privacy"]["training"]["epsilon"] = math.inf  # a Python inf is accepted
    assert verify_card(data).status == "unchecked"
    assert verify_card(json.loads(_search_card_json())).status == "accepted"


# ------------------------------------------------------ crafted inputs never crash
def _deep(depth):
    return "[" * depth + "]" * depth


CRAFTED_TEXT = {  # built when a test asks: one of them is 16 MiB
    "depth 1e5": lambda: _deep(100_000),
    "depth 1e5 inside a card": lambda: _simple_card_json().replace(
        '"decision": "unchecked"', f'"decision": {_deep(10**5)}'
    ),
    "5,000-digit integer": lambda: _simple_card_json().replace(
        '"n_samples": 3000', '"n_samples": ' + "9" * 5000
    ),
    "1e400": lambda: _simple_card_json().replace('"alpha": 0.1', '"alpha": 1e400'),
    "bare NaN": lambda: _simple_card_json().replace('"alpha": 0.1', '"alpha": NaN'),
    "bare Infinity": lambda: _simple_card_json().replace('"alpha": 0.1', '"alpha": Infinity'),
    "duplicate keys": lambda: _simple_card_json().replace(
        '"alpha": 0.1', '"alpha": 0.1, "alpha": 0.1'
    ),
    "$float nan": lambda: _simple_card_json().replace('"alpha": 0.1', '"alpha": {"$float": "nan"}'),
    "$float with more keys": lambda: _simple_card_json().replace(
        '"alpha": 0.1', '"alpha": {"$float": "inf", "x": 1}'
    ),
    "$float array": lambda: _simple_card_json().replace('"alpha": 0.1', '"alpha": {"$float": []}'),
    "$float object": lambda: _simple_card_json().replace(
        '"alpha": 0.1', '"alpha": {"$float": {"a": 1}}'
    ),
    "not JSON": lambda: "{not json",
    "empty": lambda: "",
    "array": lambda: "[1, 2]",
    "null": lambda: "null",
    "too long": lambda: "{" + " " * (16 * 2**20) + "}",
    "invalid UTF-8": lambda: b'{"schema": "\xff"}',
}


@pytest.mark.parametrize("name", CRAFTED_TEXT)
def test_crafted_text_is_inconsistent_not_a_crash(name):
    text = CRAFTED_TEXT[name]()
    assert text != _simple_card_json()
    result = verify_card(text)
    assert result.status == "inconsistent" and result.exit_code == 2
    assert result.problems


def test_long_integers_are_refused_while_parsing():
    """Integer parsing is bounded (no quadratic work, no ValueError from int())."""
    text = _simple_card_json().replace('"n_samples": 3000', '"n_samples": 1' + "0" * 30)
    result = verify_card(text)
    assert result.status == "inconsistent" and "31 digits" in result.problems[0]


def _huge_nesting(depth):
    node = []
    for _ in range(depth):
        node = [node]
    return node


#: Resealed edits (path in the JSON, new value): each is a lie a dishonest writer
#: could tell, or input that crashed the verifier on the previous version.
RESEALED_LIES = {
    "n_samples = 0": (("formal", "configuration", "n_samples"), 0),
    "n_samples = -5": (("formal", "configuration", "n_samples"), -5),
    "n_samples = 10**400": (("formal", "configuration", "n_samples"), 10**400),
    "n_samples = 2.5": (("formal", "configuration", "n_samples"), 2.5),
    "n_samples = true": (("formal", "configuration", "n_samples"), True),
    "alpha = 0": (("formal", "configuration", "alpha"), 0),
    "alpha = 1": (("formal", "configuration", "alpha"), 1.0),
    "alpha = 10**400": (("formal", "configuration", "alpha"), 10**400),
    "alpha = NaN": (("formal", "configuration", "alpha"), math.nan),
    "training delta = 2": (("formal", "privacy", "training", "delta"), 2.0),
    "calibration epsilon = -1": (("formal", "privacy", "calibration", "epsilon"), -1.0),
    "release threshold = 7": (("formal", "calibrations", 0, "release", "threshold"), 7.0),
    "release threshold in score units": (
        ("formal", "calibrations", 0, "release", "threshold_score_units"),
        0.0123,
    ),
    "release threshold = NaN": (("formal", "calibrations", 0, "release", "threshold"), math.nan),
    "release threshold = -inf": (
        ("formal", "calibrations", 0, "release", "threshold"),
        {"$float": "-inf"},
    ),
    "release informative flipped": (
        ("formal", "calibrations", 0, "release", "informative"),
        "flip",
    ),
    "mechanism epsilon = 1e308": (
        ("formal", "configuration", "mechanism", "params", "epsilon"),
        1e308,
    ),
    "mechanism epsilon = 10**400": (
        ("formal", "configuration", "mechanism", "params", "epsilon"),
        10**400,
    ),
    "mechanism n_bins = 10**9": (
        ("formal", "configuration", "mechanism", "params", "n_bins"),
        10**9,
    ),
    "unknown mechanism parameter": (
        ("formal", "configuration", "mechanism", "params", "unknown"),
        1,
    ),
    "unknown mechanism": (("formal", "configuration", "mechanism", "name"), "os.system"),
    "nested params 1e5 deep": (
        ("formal", "configuration", "mechanism", "params", "epsilon"),
        _huge_nesting(10**5),
    ),
    "huge agent list": (("formal", "configuration", "agent_sizes"), [1] * 200_000),
    "selection of strings": (("formal", "selection"), "everything"),
    "clauses not a list": (("formal", "clauses"), {"a": 1}),
}


@pytest.mark.parametrize("name", RESEALED_LIES)
def test_resealed_lies_are_inconsistent_not_accepted_nor_a_crash(name):
    path, value = RESEALED_LIES[name]
    text = _search_card_json()
    if name == "nested params 1e5 deep":
        data = json.loads(text)
        data["formal"]["configuration"]["mechanism"]["params"]["epsilon"] = value
        data["formal_sha256"] = "0" * 64  # too deep to reseal through json.dumps
    else:
        data = _edited(text, path, not _value(text, path) if value == "flip" else value)
    result = verify_card(data)
    assert result.status == "inconsistent" and result.exit_code == 2, result.report()
    if isinstance(value, float | int) and name != "nested params 1e5 deep":
        assert verify_card(json.dumps(data)).status == "inconsistent"


@lru_cache(maxsize=1)
def _calibration_card_json():
    """An informative, feasible card of a bare ExponQ calibration."""
    import numpy as np

    mechanism = ExponQ(epsilon=1.0)
    calibration = mechanism.calibrate(np.linspace(0, 1, 3000), 0.1, random_state=0)
    contract = Contract(0.85, max_epsilon_train=2.0, max_epsilon_cal=1.0, beta=0.0)
    card = ContractCard.from_calibration(
        calibration, mechanism, contract=contract, epsilon_train=1.0
    )
    assert card.decision == "feasible" and card.release.informative
    return card.to_json()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("training epsilon", -5.0),
        ("training delta", -1.0),
        ("threshold", 7.0),
        ("threshold", {"$float": "nan"}),
        ("threshold", {"$float": "inf"}),
    ],
)
def test_resealed_lies_that_keep_eq3_consistent_are_not_accepted(field, value):
    """The issue-14 attack: edit a field, fix the clauses it feeds, recompute the digest."""
    text = _calibration_card_json()
    assert verify_card(text).status == "accepted"
    data = json.loads(text)
    if field == "threshold":
        data["formal"]["calibrations"][0]["release"]["threshold"] = value
    else:
        name = field.split()[1]
        data["formal"]["privacy"]["training"][name] = value
        for clause in data["formal"]["clauses"]:
            if clause["name"] == f"{name}_train":
                bound = clause["bound"]
                clause.update(value=value, margin=bound - value, satisfied=value <= bound)
    result = verify_card(_reseal(data))
    assert result.status == "inconsistent", result.report()
    assert field.split()[-1] in " ".join(result.problems)


def _regression_card(score_bounds, mechanism, model=None):
    import numpy as np

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(2000, 2))
    y = X @ [1.0, 2.0] + rng.normal(size=2000)
    if model is None:
        model = LinearRegression(epsilon=1.0, bounds_X=(-1, 1), bounds_y=(-6, 6), random_state=0)
    model.fit(X[:1000], y[:1000])
    estimator = PrivateConformalRegressor(
        model, mechanism=mechanism, score_bounds=score_bounds, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.fit_calibrate(X[1000:], y[1000:])
    contract = Contract(0.85, math.inf, 1.0, beta=0.0)
    return ContractCard.from_estimator(estimator, contract, epsilon_train=1.0)


def test_data_derived_bounds_cannot_be_flipped_back_to_holding():
    """Issue 14: the formal layer records where the score bounds came from."""
    mechanism = ExponQ(epsilon=1.0)
    card = _regression_card(None, mechanism)
    assert card.release.score_bounds_source == "calibration data"
    assert not card.calibration_privacy.holds and card.release.informative
    text = card.to_json()
    assert verify_card(text).status == "rejected"
    # The attacker's edit: the guarantee as the mechanism states it, clauses to match.
    data = json.loads(text)
    honest = mechanism.privacy_guarantee().under("replace-one")
    data["formal"]["privacy"]["calibration"].update(holds=True, description=honest.description)
    for clause in data["formal"]["clauses"]:
        if clause["name"] == "epsilon_cal":
            clause.update(value=1.0, margin=0.0, satisfied=True)
        if clause["name"] == "delta_cal":
            clause.update(value=0.0, margin=0.0, satisfied=True)
    assert all(clause["satisfied"] for clause in data["formal"]["clauses"])
    data["formal"]["decision"] = "feasible"
    result = verify_card(_reseal(data))
    assert result.status == "inconsistent"
    assert "calibration data" in " ".join(result.problems)


def test_regression_coverage_at_the_upper_bound_cannot_be_claimed():
    far_off = DummyRegressor(strategy="constant", constant=1000.0)
    card = _regression_card((0.0, 8.0), SplitConformal(), model=far_off)
    assert card.release.threshold == 1.0 and not card.release.coverage_holds
    text = card.to_json()
    assert verify_card(text).status == "rejected"
    claimed = _edited(text, ("formal", "calibrations", 0, "release", "coverage_holds"), True)
    assert verify_card(claimed).status == "inconsistent"


def test_unreachable_level_with_an_informative_release_is_inconsistent():
    mechanism = ExponQ(epsilon=0.1)
    X, y = make_two_gaussians(200, random_state=0)
    model = GaussianNB(epsilon=2.0, bounds=(-10.0, 10.0), random_state=0).fit(X[:100], y[:100])
    with pytest.warns(UserWarning):
        estimator = PrivateConformalClassifier(model, mechanism=mechanism, random_state=0)
        estimator.fit_calibrate(X[100:130], y[100:130])
    text = estimator.card_.to_json()
    release = ("formal", "calibrations", 0, "release")
    data = _edited(text, (*release, "threshold"), 0.5)
    data["formal"]["calibrations"][0]["release"]["informative"] = True
    data["formal"]["calibrations"][0]["release"]["threshold_score_units"] = 0.5
    result = verify_card(_reseal(data))
    assert result.status == "inconsistent"
    assert "unreachable" in " ".join(result.problems)


def test_paths_that_cannot_be_read_are_inconsistent(tmp_path):
    assert verify_card(tmp_path / "missing.json").status == "inconsistent"
    assert verify_card(str(tmp_path)).status == "inconsistent"
    assert verify_card("not/a/card.json").status == "inconsistent"
    assert verify_card(b"\x00\x01").status == "inconsistent"
    assert verify_card(12).status == "inconsistent"
    assert verify_card(None).status == "inconsistent"


# ------------------------------------------------------------------- signatures
def test_signed_cards_verify_only_under_the_issuers_key():
    ed25519 = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    issuer, other = ed25519.Ed25519PrivateKey.generate(), ed25519.Ed25519PrivateKey.generate()
    card = ContractCard.from_json(_search_card_json())
    signed = card.sign(issuer)
    assert signed.formal_sha256 == card.formal_sha256 and signed.signature is not None
    text = signed.to_json()
    result = verify_card(text, public_key=issuer.public_key())
    assert result.status == "accepted" and result.authenticated
    assert "signature: valid" in result.report()
    pem = issuer.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    raw = issuer.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    assert verify_card(text, public_key=pem).authenticated
    assert verify_card(text, public_key=raw).authenticated
    assert not verify_card(text).authenticated  # no key given: integrity only
    wrong = verify_card(text, public_key=other.public_key())
    assert wrong.status == "inconsistent" and "not by the given key" in wrong.report()
    unsigned = verify_card(card.to_json(), public_key=issuer.public_key())
    assert unsigned.status == "inconsistent" and "not signed" in unsigned.report()
    # A resealed edit keeps the digest consistent but breaks the signature.
    lie = _edited(text, ("formal", "selection", "candidates", 0, "note"), "audited")
    assert verify_card(lie).status == "accepted"
    assert verify_card(lie, public_key=issuer.public_key()).status == "inconsistent"
    # The signature is re-keyed by an attacker: the auditor's key exposes it.
    forged = card.with_contract(card.contract).sign(other)
    assert verify_card(forged.to_json(), public_key=issuer.public_key()).status == "inconsistent"
    with pytest.raises(TypeError, match="private_key"):
        card.sign("secret")
    with pytest.raises(TypeError, match="public_key"):
        verify_card(text, public_key=12)
    with pytest.raises(ValueError, match="public_key"):
        verify_card(text, public_key=b"-----BEGIN PUBLIC KEY-----\nxx\n-----END PUBLIC KEY-----")
    assert card.with_contract(card.contract).signature is None


# ------------------------------------------------------------------- fuzzing
_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5)
    | st.sampled_from([{"$float": "inf"}, {"$float": "-inf"}, {"$float": "nan"}]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=8,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(index=st.integers(min_value=0), value=_JSON_VALUES, reseal=st.booleans())
def test_fuzzed_cards_never_crash_the_verifier(index, value, reseal):
    text = _search_card_json()
    paths = _formal_paths()
    path = paths[index % len(paths)]
    result = verify_card(_edited(text, path, value, reseal=reseal))
    assert result.status in ("accepted", "rejected", "unchecked", "inconsistent")
    if not reseal and _value(text, path) != value:
        assert result.status == "inconsistent"


# ------------------------------------ issue 24: cards bind everything they state
CONTRACT_5 = Contract(0.85, max_epsilon_train=math.inf, max_epsilon_cal=5.0, beta=1e-3)


@lru_cache(maxsize=2)
def _mondrian_card(group_sizes):
    """Mondrian by class, ExponQ(2) with the paper's utility (tight scaling): class 0
    informative, classes 1 and 2 (about 12 calibration rows each) trivial; private sizes
    cost 2 (0.5 + 2) = 5 under replace-one."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]])
    y_train = np.repeat([0, 1, 2], 300)
    y_cal = rng.choice(3, size=4000, p=[0.994, 0.003, 0.003])
    X_train = centres[y_train] + rng.normal(size=(900, 2))
    X_cal = centres[y_cal] + rng.normal(size=(4000, 2))
    model = LogisticRegression().fit(X_train, y_train)
    sizes = PrivateGroupSizes(epsilon=0.5) if group_sizes == "private" else "public"
    estimator = PrivateConformalClassifier(
        model,
        mechanism=ExponQ(epsilon=2.0, scaling="tight"),
        alpha=0.1,
        mondrian="class",
        group_sizes=sizes,
        random_state=0,
    )
    with pytest.warns(UserWarning):  # classes 1 and 2 get the trivial release
        estimator.fit_calibrate(X_cal, y_cal)
    return ContractCard.from_estimator(estimator, CONTRACT_5)


def _without_groups(card, keep):
    """The attacker's edit: drop the other groups' entries, recompute what depends on
    them (the composed guarantee, Eq. (3), the decision) and reseal; the public list
    of groups (the classifier's classes) stays as published."""
    entries = [entry for entry in card.calibrations if entry.group in keep]
    sizes = PrivateGroupSizes(**card.configuration.group_sizes.params)
    privacy = mondrian_privacy(
        ExponQ(epsilon=2.0), sizes, "replace-one", n_groups_read=len(keep), n_groups=len(keep)
    )
    lie = ContractCard.build(
        contract=card.contract,
        configuration=replace(card.configuration, groups=tuple(keep)),
        training_privacy=card.training_privacy,
        calibration_privacy=privacy,
        calibrations=entries,
    )
    assert (lie.calibration_privacy.epsilon, lie.decision) == (2.0, "feasible")
    data = json.loads(lie.to_json())
    data["formal"]["configuration"] = json.loads(card.to_json())["formal"]["configuration"]
    return _reseal(data), lie


def test_resealed_mondrian_card_without_its_trivial_groups_is_inconsistent():
    """Issue 24: two trivial groups deleted, epsilon 5 -> 2, decision flipped to feasible."""
    card = _mondrian_card("private")
    assert card.configuration.groups == (0, 1, 2)  # the classifier's classes_
    assert card.calibration_privacy.epsilon == 5.0 and card.decision == "infeasible"
    assert verify_card(card.to_json()).status == "rejected"
    edited, lie = _without_groups(card, [0])
    result = verify_card(edited)
    assert result.status == "inconsistent", result.report()
    assert "one calibration entry per group of configuration.groups" in result.problems[0]
    # Rewriting the public list itself states another model (a one-class classifier):
    # an auditor who knows the model's classes sees it, and the signature rules it out.
    ed25519 = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    issuer = ed25519.Ed25519PrivateKey.generate()
    signed = json.loads(card.sign(issuer).to_json())
    rewritten = json.loads(lie.to_json())
    rewritten["signature"] = signed["signature"]
    result = verify_card(rewritten, public_key=issuer.public_key())
    assert result.status == "inconsistent" and "signature" in result.problems[0]


@pytest.mark.parametrize("sizes", ["public", "private"])
@pytest.mark.parametrize("group", [7, "junk", {"$repr": "object()"}, 0.0, True])
def test_resealed_relabelled_or_junk_group_ids_are_inconsistent(group, sizes):
    text = _mondrian_card(sizes).to_json()
    assert verify_card(text).status == "rejected"
    data = json.loads(text)
    data["formal"]["calibrations"][0]["group"] = group  # the informative group: no clause names it
    result = verify_card(_reseal(data))
    assert result.status == "inconsistent", result.report()


def test_resealed_restatement_under_another_adjacency_is_inconsistent():
    """Issue 24: a monotone ExponQ card rejected at max_epsilon_cal 1.5 (2 epsilon under
    replace-one) restated as add/remove with epsilon 1, clauses and decision to match."""
    import numpy as np

    mechanism = ExponQ(epsilon=1.0, scaling="monotone")
    calibration = mechanism.calibrate(np.linspace(0, 1, 3000), 0.1, random_state=0)
    contract = Contract(0.85, max_epsilon_train=2.0, max_epsilon_cal=1.5, beta=0.0)
    card = ContractCard.from_calibration(
        calibration, mechanism, contract=contract, epsilon_train=1.0
    )
    assert card.calibration_privacy.epsilon == 2.0 and card.decision == "infeasible"
    assert verify_card(card.to_json()).status == "rejected"
    data = json.loads(card.to_json())
    stated = mechanism.privacy_guarantee()  # epsilon 1 under add/remove
    data["formal"]["privacy"]["calibration"].update(
        epsilon=stated.epsilon, adjacency=stated.adjacency, description=stated.description
    )
    for clause in data["formal"]["clauses"]:
        if clause["name"] == "epsilon_cal":
            clause.update(value=1.0, margin=0.5, satisfied=True)
    assert all(clause["satisfied"] for clause in data["formal"]["clauses"])
    data["formal"]["decision"] = "feasible"
    result = verify_card(_reseal(data))
    assert result.status == "inconsistent", result.report()
    assert "formal.decision: recorded 'feasible', recomputed 'infeasible'." in result.problems


def test_signature_covers_the_diagnostics():
    """Issue 24: a signed card edited to empirical coverage 0.999 no longer verifies."""
    ed25519 = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    issuer = ed25519.Ed25519PrivateKey.generate()
    signed = ContractCard.from_json(_search_card_json()).sign(issuer)
    text = signed.to_json()
    assert verify_card(text, public_key=issuer.public_key()).authenticated
    for name, value in [("empirical_coverage", 0.999), ("mean_set_size", 1.0)]:
        data = json.loads(text)
        data["diagnostics"][name] = value
        result = verify_card(data, public_key=issuer.public_key())
        assert result.status == "inconsistent", name
        assert "signature" in " ".join(result.problems), name
    data = json.loads(text)
    data["diagnostics"]["mechanism_details"]["note"] = "audited"
    assert verify_card(data, public_key=issuer.public_key()).status == "inconsistent"
    # Without the key the signature is not checked, and the report says so.
    unchecked = verify_card(data)
    assert unchecked.status == "accepted" and unchecked.signed and not unchecked.authenticated
    assert "signature: present, NOT checked" in unchecked.report()
    assert "signature: none" in verify_card(_search_card_json()).report()
    # The diagnostics are signed as they stand: evaluate first, then sign.
    with pytest.raises(ValueError, match="evaluate the card before signing"):
        signed.evaluate([[0.0, 0.0]], [0])


def _zero_epsilon(text):
    """The attacker's edit: calibration epsilon 0 (as if no data were read), resealed."""
    data = json.loads(text)
    data["formal"]["privacy"]["calibration"]["epsilon"] = 0.0
    for clause in data["formal"]["clauses"]:
        if clause["name"] == "epsilon_cal":
            clause.update(value=0.0, margin=clause["bound"])
    return _reseal(data)


def test_resealed_zero_epsilon_of_a_release_that_read_data_is_inconsistent():
    """Issue 24: zero loss is believed only for a release that read no data (level
    unreachable); kills the mutant that drops ``released and not reachable``."""
    text = _calibration_card_json()  # an informative ExponQ(1) release
    result = verify_card(_zero_epsilon(text))
    assert result.status == "inconsistent", result.report()
    assert "formal.privacy.calibration.epsilon: recorded 0.0, recomputed 1.0." in result.problems
    planned = ContractCard.for_configuration(
        ExponQ(epsilon=1.0), 3000, 0.1, contract=CONTRACT, epsilon_train=1.0
    )
    assert verify_card(_zero_epsilon(planned.to_json())).status == "inconsistent"


def test_cards_of_the_previous_format_are_refused_with_the_reason(tmp_path):
    from pathlib import Path

    old = Path(__file__).parent / "data" / "contract_card_v3.json"
    assert json.loads(old.read_text())["schema_version"] == 3
    result = verify_card(old)
    assert result.status == "inconsistent" and result.exit_code == 2
    (problem,) = result.problems
    assert "schema_version 3: this card was written by an earlier privconf_sklearn" in problem
    assert "adjacency" in problem and "Re-issue it" in problem
    with pytest.raises(CardFormatError, match="schema_version 3"):
        ContractCard.load(old)


def test_unreadable_input_is_reported_briefly_and_by_its_cause():
    """A long string that is not a card (read as a path) is not echoed back whole, and a
    bare NaN is named as such (not as an infinity)."""
    result = verify_card("x" * 100_000)
    assert result.status == "inconsistent" and len(result.problems[0]) < 400
    nan = verify_card(_simple_card_json().replace('"alpha": 0.1', '"alpha": NaN'))
    assert "bare NaN is not JSON, and no card field is NaN" in nan.problems[0]
