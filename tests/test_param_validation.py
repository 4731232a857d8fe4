"""One parameter validation, scikit-learn's: its constraints, its error, its messages.

Runs on every scikit-learn version CI tests (1.6 to the newest): the package's loop
(:func:`privconf_sklearn._param_validation.validate_params`) gives, for scikit-learn's
own constraints, exactly scikit-learn's error; its :class:`Interval` differs from
scikit-learn's only in refusing bools (and non-float64 reals); every public call
validates its object's parameters once.
"""

import ast
import inspect
import math
import re
import sys
from fractions import Fraction
from numbers import Integral, Real
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import BaseEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.utils import _param_validation as sklearn_validation
from sklearn.utils._param_validation import (
    HasMethods,
    Hidden,
    InvalidParameterError,
    Options,
    StrOptions,
    validate_parameter_constraints,
)

import privconf_sklearn
import privconf_sklearn._param_validation as validation
from privconf_sklearn import PrivateConformalClassifier, PrivateConformalRegressor
from privconf_sklearn._param_validation import Bounds, Interval, check_alpha, validate_params
from privconf_sklearn.cards import Contract
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.mechanisms import (
    DPAPS,
    PCOQS,
    ExponCRC,
    ExponQ,
    FedCP2QQ,
    FedCPQQ,
    LossCurve,
    ScoreArray,
    SplitConformal,
    SplitCRC,
)
from privconf_sklearn.model_selection import CertificateAwareSearch
from privconf_sklearn.mondrian import PrivateGroupSizes
from privconf_sklearn.scores import APS, CQR, LAC, RAPS, AbsoluteResidual, NormalizedResidual

PACKAGE = Path(privconf_sklearn.__file__).parent


# ------------------------------------------------------- scikit-learn's contract
SKLEARN_CASES = [
    ([StrOptions({"auto"}), sklearn_validation.Interval(Integral, 2, 10, closed="both")], 11),
    ([StrOptions({"auto"}), sklearn_validation.Interval(Integral, 2, 10, closed="both")], "x"),
    ([sklearn_validation.Interval(Real, 0, 1, closed="neither")], 1.5),
    ([sklearn_validation.Interval(Real, 0, None, closed="neither")], float("inf")),
    ([sklearn_validation.Interval(Real, 0, None, closed="both")], float("nan")),
    ([None, dict], [1]),
    (["boolean"], "yes"),
    ([callable, None], 3),
    ([HasMethods(["check", "spend"]), None], object()),
    ([Options(int, {1, 2})], 3),
    ([StrOptions({"public"}), Hidden(StrOptions({"internal"}))], "other"),
    ([np.random.RandomState, None], 1.5),
]


@pytest.mark.parametrize(("constraints", "value"), SKLEARN_CASES)
def test_errors_are_scikit_learns_own(constraints, value):
    """Same class and message as scikit-learn's ``validate_parameter_constraints``."""
    with pytest.raises(InvalidParameterError) as theirs:
        validate_parameter_constraints({"p": constraints}, {"p": value}, caller_name="Owner")
    with pytest.raises(InvalidParameterError) as ours:
        validate_params({"p": constraints}, {"p": value}, "Owner")
    assert type(ours.value) is sklearn_validation.InvalidParameterError
    assert isinstance(ours.value, ValueError) and isinstance(ours.value, TypeError)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(("constraints", "value"), SKLEARN_CASES)
def test_accepts_what_scikit_learn_accepts(constraints, value):
    """Every constraint above takes the values scikit-learn's loop takes."""
    for accepted in (5, "auto", 0.5, 1e300, 0.0, None, {}, True, len, Options, 1):
        try:
            validate_parameter_constraints({"p": constraints}, {"p": accepted}, "Owner")
        except InvalidParameterError:
            with pytest.raises(InvalidParameterError):
                validate_params({"p": constraints}, {"p": accepted}, "Owner")
        else:
            validate_params({"p": constraints}, {"p": accepted}, "Owner")


@pytest.mark.parametrize("kind", [Real, Integral])
@pytest.mark.parametrize("value", [True, False, np.True_, np.False_])
def test_interval_refuses_bools_unlike_scikit_learn(kind, value):
    """The one deviation in meaning: scikit-learn's Interval takes True as 1."""
    theirs = sklearn_validation.Interval(kind, 0, 1, closed="both")
    ours = Interval(kind, 0, 1, closed="both")
    assert theirs.is_satisfied_by(value) == isinstance(value, bool)
    assert not ours.is_satisfied_by(value)
    assert str(ours) == str(theirs)


@pytest.mark.parametrize(
    "value", [0, 1, 10**300, -5, 0.5, np.float32(0.25), np.int64(3), np.inf, -np.inf, np.nan]
)
@pytest.mark.parametrize(
    "interval",
    [
        (Real, 0, 1, "neither"),
        (Real, 0, None, "neither"),
        (Real, 0, None, "both"),
        (Real, None, None, "both"),
        (Integral, 0, None, "left"),
        (Integral, 1, 10, "both"),
    ],
)
def test_interval_agrees_with_scikit_learn_on_numbers(interval, value):
    """For every non-bool float64 number, the same verdict as scikit-learn's Interval."""
    kind, left, right, closed = interval
    theirs = sklearn_validation.Interval(kind, left, right, closed=closed)
    ours = Interval(kind, left, right, closed=closed)
    assert ours.is_satisfied_by(value) == theirs.is_satisfied_by(value)


def test_interval_over_the_reals_refuses_numbers_beyond_float64():
    """scikit-learn's Interval(Real, 0, None) takes 10**400, which overflows later (and
    raises TypeError on a Fraction); this one compares reals as float64 numbers."""
    assert sklearn_validation.Interval(Real, 0, None, closed="neither").is_satisfied_by(10**400)
    for value in (10**400, Fraction(10**400)):
        assert not Interval(Real, 0, None, closed="neither").is_satisfied_by(value)
    assert Interval(Real, 0, 1, closed="neither").is_satisfied_by(Fraction(1, 3))
    assert Interval(Integral, 0, None, closed="left").is_satisfied_by(10**400)


def test_values_come_back_in_canonical_form():
    checked = validate_params(
        {
            "real": [Interval(Real, 0, None, closed="neither")],
            "integer": [Interval(Integral, 1, None, closed="left")],
            "flag": ["boolean"],
            "option": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
            "bounds": [Bounds()],
            "free": "no_validation",
        },
        {
            "real": np.float32(0.5),
            "integer": np.int64(3),
            "flag": np.True_,
            "option": "auto",
            "bounds": np.array([0, 2]),
            "free": np.float32(1.0),
            "undeclared": 7,
        },
        "Owner",
    )
    assert checked == {"real": 0.5, "integer": 3, "flag": True, "option": "auto", "bounds": (0, 2)}
    assert [type(v) for v in checked.values()] == [float, int, bool, str, tuple]
    assert [type(v) for v in checked["bounds"]] == [float, float]


@pytest.mark.parametrize(
    "value", [(0, 1, 2), (1, 1), (2, 1), (0, np.inf), (np.nan, 1), (True, 2), ("0", 1), 1.0]
)
def test_bounds_are_a_finite_increasing_pair(value):
    with pytest.raises(InvalidParameterError, match="a pair \\(low, high\\) of finite real"):
        validate_params({"score_bounds": [Bounds()]}, {"score_bounds": value}, "Owner")
    assert validate_params({"b": [Bounds()]}, {"b": [-1, 10**3]}, "Owner") == {"b": (-1.0, 1e3)}
    with pytest.raises(InvalidParameterError, match=re.escape("0.0 <= low < high <= 1.0")):
        validate_params({"b": [Bounds(0.0, 1.0)]}, {"b": (0.5, 1.5)}, "Owner")


def test_huge_values_do_not_make_huge_messages():
    for value in (10**5000, "x" * 10**6, list(range(10**5))):
        with pytest.raises(InvalidParameterError) as info:
            check_alpha(value, "ExponQ.calibrate")
        assert len(str(info.value)) < 250


def test_check_alpha_names_the_caller():
    with pytest.raises(InvalidParameterError) as info:
        ExponQ(1.0).calibrate(np.linspace(0, 1, 10), True)
    assert str(info.value) == (
        "The 'alpha' parameter of ExponQ.calibrate must be a float in the range (0.0, 1.0). "
        "Got True instead."
    )
    assert check_alpha(np.float32(0.25), "f") == 0.25 and type(check_alpha(1 / 4, "f")) is float


# ------------------------------------------------------------ the declarations
def _constrained_classes():
    return [
        PrivateConformalClassifier,
        PrivateConformalRegressor,
        ExponQ,
        DPAPS,
        PCOQS,
        SplitConformal,
        FedCPQQ,
        FedCP2QQ,
        LAC,
        APS,
        RAPS,
        AbsoluteResidual,
        CQR,
        NormalizedResidual,
        PrivateGroupSizes,
        CertificateAwareSearch,
    ]


@pytest.mark.parametrize("cls", _constrained_classes(), ids=lambda cls: cls.__name__)
def test_every_parameter_is_declared(cls):
    """Each constructor parameter has constraints (or says ``"no_validation"``)."""
    assert issubclass(cls, BaseEstimator)
    assert set(cls._get_param_names()) == set(cls._parameter_constraints)


def test_no_module_uses_scikit_learns_interval_directly():
    """The package's Interval refuses bools; scikit-learn's would let ``True`` be 1."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_param_validation.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sklearn"):
                if any(alias.name in ("Interval", "validate_params") for alias in node.names):
                    offenders.append(str(path.relative_to(PACKAGE)))
    assert offenders == []


# -------------------------------------------------------- once per public call
@pytest.fixture
def validations(monkeypatch):
    """Counts validations per caller name (every module's reference is patched)."""
    counts: dict[str, int] = {}
    original = validation.validate_params

    def counting(constraints, params, caller_name):
        counts[caller_name] = counts.get(caller_name, 0) + 1
        return original(constraints, params, caller_name)

    for name, module in list(sys.modules.items()):
        if name.startswith("privconf_sklearn") and module is not None:
            if getattr(module, "validate_params", None) is original:
                monkeypatch.setattr(module, "validate_params", counting)
    return counts


MECHANISMS = [
    ExponQ(1.0),
    DPAPS(1.0),
    PCOQS(rho=0.5),
    SplitConformal(),
    FedCPQQ(n_agents=4),
    FedCP2QQ(2.0, n_agents=4),
]


def _public_calls(mechanism):
    scores = np.random.default_rng(0).uniform(size=4000)
    groups = np.arange(4000) % 4 if mechanism.requires_groups else None
    statistics = ScoreArray(scores, groups=groups)
    calls = {
        "privacy_guarantee": lambda: mechanism.privacy_guarantee(),
        "coverage_certificate": lambda: mechanism.coverage_certificate(4000, 0.1),
        "min_informative_samples": lambda: mechanism.min_informative_samples(0.1),
        "calibrate": lambda: mechanism.calibrate(scores, 0.1, groups=groups, random_state=0),
        "calibrate_from_statistics": lambda: mechanism.calibrate_from_statistics(
            statistics, 0.1, random_state=0
        ),
    }
    names = (
        "threshold_distribution",
        "resolve_parameters",
        "resolve_n_bins",
        "plan",
        "resolve_plan",
    )
    for name in names:
        method = getattr(mechanism, name, None)
        if method is not None and not (name == "resolve_plan" and isinstance(mechanism, PCOQS)):
            arguments = {
                "threshold_distribution": (scores, 0.1),
                "resolve_parameters": (4000, 0.1),
                "resolve_n_bins": (4000, 0.1),
                "plan": ([1000] * 4, 0.1),
                "resolve_plan": (4000, 0.1),
            }[name]
            calls[name] = lambda method=method, arguments=arguments: method(*arguments)
    return calls


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: type(m).__name__)
def test_each_public_method_validates_the_parameters_once(mechanism, validations):
    """Helpers (feasibility bisections, certificates, release details) get the validated
    values: one validation of the mechanism's parameters per public call."""
    name = type(mechanism).__name__
    for method, call in _public_calls(mechanism).items():
        validations.clear()
        call()
        assert validations.get(name) == 1, (method, validations)
        others = {caller.split(".")[0].split(" ")[0] for caller in validations}
        assert others <= {name, *_PRIMITIVES}, (method, validations)


#: Privacy primitives: public classes that check their arguments when built.
_PRIMITIVES = {"ExponentialMechanism", "LaplaceVectorMechanism", "GaussianQueryComposer"}


@pytest.mark.parametrize("mechanism", MECHANISMS[:4], ids=lambda m: type(m).__name__)
def test_a_fit_validates_the_estimator_once(mechanism, validations):
    """One validation of the estimator's parameters per fit; the mechanism's parameters once
    per public call the fit makes on it: its privacy guarantee when the run starts, its
    coverage certificate when the run reserves the budget (before any data is read),
    then the release."""
    X, y = make_two_gaussians(3000, random_state=0)
    model = LogisticRegression().fit(X[:1000], y[:1000])

    class Ledger:
        def check(self, epsilon, delta):
            pass

        def spend(self, epsilon, delta):
            pass

    estimator = PrivateConformalClassifier(
        model, mechanism=mechanism, accountant=Ledger(), random_state=0
    )
    validations.clear()
    estimator.fit_calibrate(X[1000:], y[1000:])
    name = type(mechanism).__name__
    assert validations["PrivateConformalClassifier"] == 1
    assert validations[name] == 3 and validations[f"{name}.calibrate"] == 1
    expected = {"PrivateConformalClassifier", name, f"{name}.calibrate"}
    expected |= {f"{name}.coverage_certificate"}
    assert set(validations) <= expected | _PRIMITIVES


def test_scikit_learn_error_class_is_the_only_parameter_error():
    """No module defines its own parameter error: every constraint error is
    scikit-learn's InvalidParameterError (defined nowhere in the package)."""
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
        assert "InvalidParameterError" not in names, path
    assert validation.InvalidParameterError is sklearn_validation.InvalidParameterError
    assert inspect.getmodule(validation.Interval) is validation
    assert math.isinf(validation.Bounds().highest)


def test_scikit_learns_own_parameter_check_passes():
    """scikit-learn's ``check_param_validation`` (the check its own estimators pass): every
    parameter constrained, and ``fit`` rejects a value of a wrong type, or of a right type
    but a wrong value, with ``InvalidParameterError`` naming the parameter."""
    from sklearn.utils.estimator_checks import check_param_validation

    X = np.random.RandomState(0).uniform(size=(20, 5))
    model = LogisticRegression().fit(X, np.arange(20) % 2)

    class Ledger:
        def check(self, epsilon, delta):
            pass

        def spend(self, epsilon, delta):
            pass

    estimator = PrivateConformalClassifier(model, mechanism=ExponQ(1.0), accountant=Ledger())
    check_param_validation("PrivateConformalClassifier", estimator)
    contract = Contract(0.5, max_epsilon_train=math.inf, max_epsilon_cal=1.0, beta=0.0)
    search = CertificateAwareSearch(
        estimator, contract=contract, param_grid={"calibration_size": [10]}
    )
    check_param_validation("CertificateAwareSearch", search)


@pytest.mark.parametrize("mechanism", [ExponCRC(1.0), SplitCRC()], ids=lambda m: type(m).__name__)
def test_each_risk_control_method_validates_the_parameters_once(mechanism, validations):
    """The risk-control mechanisms follow the same rule: one validation per public call."""
    losses = np.clip(np.linspace(1, 0, 21)[None, :] - np.linspace(0, 0.5, 300)[:, None], 0, 1)
    curve = LossCurve.from_losses(losses)
    calls = {
        "privacy_guarantee": mechanism.privacy_guarantee,
        "risk_certificate": lambda: mechanism.risk_certificate(300, 0.3, 21),
        "min_informative_samples": lambda: mechanism.min_informative_samples(0.3, 21),
        "calibrate": lambda: mechanism.calibrate(losses, 0.3, random_state=0),
        "calibrate_curve": lambda: mechanism.calibrate_curve(curve, 0.3, random_state=0),
        "release_distribution": lambda: mechanism.release_distribution(curve, 0.3),
        "forecast": lambda: mechanism.forecast(300, 0.3, 21),
    }
    name = type(mechanism).__name__
    for method, call in calls.items():
        validations.clear()
        call()
        assert validations.get(name) == 1, (method, validations)


def test_a_risk_control_fit_validates_the_estimator_once(validations):
    """One validation of the estimator per fit; the mechanism's once for the budget check
    before any data is read and once for the release."""
    from sklearn.multioutput import MultiOutputClassifier

    from privconf_sklearn import PrivateRiskControlClassifier

    from ._multilabel import make_multilabel

    X, Y = make_multilabel(1500)
    model = MultiOutputClassifier(LogisticRegression()).fit(X[:500], Y[:500])

    class Ledger:
        def check(self, epsilon, delta):
            pass

        def spend(self, epsilon, delta):
            pass

    estimator = PrivateRiskControlClassifier(
        model, mechanism=ExponCRC(1.0), accountant=Ledger(), random_state=0
    )
    validations.clear()
    estimator.fit_calibrate(X[500:], Y[500:])
    assert validations["PrivateRiskControlClassifier"] == 1
    assert validations["ExponCRC"] == 2
