"""The records a contract card is made of (the contract-cards paper's Table 1).

Every record checks its fields against a constraints table when it is built, so a card
built in memory or read from JSON never holds a negative budget, a threshold outside
[0, 1] or a NaN; :func:`record_from_dict` reports such errors as
:class:`CardFormatError` with the JSON path.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from .._validation import Boolean, Constraint, InstanceOf, Interval, NoneValue, Options
from .._validation import validate_params as _validate_params
from ..privacy import PrivacyGuarantee
from ._codec import CardFormatError, plain_value

__all__ = [
    "Candidate",
    "Certificate",
    "ComponentSpec",
    "Configuration",
    "Diagnostics",
    "Release",
    "Selection",
    "Signature",
    "TrainingPrivacy",
]

#: Largest calibration size a card records: 2**53, so every size is an exact float64.
MAX_SAMPLES = 2**53
#: Most agents (federated) or configurations (search) a card records.
MAX_ITEMS = 100_000


class Check(Constraint):
    """A constraint from a description, a type test, a value test and a conversion."""

    def __init__(self, description: str, of_type, value=None, convert=None):
        self.description, self.of_type = description, of_type
        self.value, self.conversion = value, convert

    def accepts_type(self, value) -> bool:
        """The type test."""
        return bool(self.of_type(value))

    def accepts_value(self, value) -> bool:
        """The value test (none: any value)."""
        return self.value is None or bool(self.value(value))

    def convert(self, value):
        """The conversion (none: unchanged)."""
        return value if self.conversion is None else self.conversion(value)

    def describe(self) -> str:
        """The description."""
        return self.description


def _is_real(value) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


def tuple_of(*options: Constraint, max_length: int = MAX_ITEMS, length: int | None = None):
    """A list, tuple or array of at most ``max_length`` items, each meeting an option."""

    def item(value):
        return next((o for o in options if o.accepts_type(value) and o.accepts_value(value)), None)

    def accepted(values) -> bool:
        size_ok = len(values) <= max_length and length in (None, len(values))
        return size_ok and all(item(value) is not None for value in values)

    each = " or ".join(option.describe() for option in options)
    return Check(
        f"a sequence of {length or f'at most {max_length}'} items, each {each}",
        lambda values: isinstance(values, list | tuple | np.ndarray),
        accepted,
        lambda values: tuple(item(value).convert(value) for value in values),
    )


INF = Check("inf", _is_real, lambda value: value == math.inf, float)
TEXT = [InstanceOf(str, "string")]
FLAG = [Boolean()]
UNIT = [Interval("real", 0, 1)]
OPEN_UNIT = [Interval("real", 0, 1, closed="neither")]
BUDGET = [Interval("real", 0, None), INF]  # a privacy loss: >= 0, inf allowed
SIGNED = [Interval("real"), INF, Check("-inf", _is_real, lambda value: value == -math.inf, float)]
COUNT = [Interval("integer", 0, MAX_ITEMS)]
SIZE = [Interval("integer", 1, MAX_SAMPLES)]


def optional(constraints: list) -> list:
    """``constraints`` or None."""
    return [NoneValue(), *constraints]


def hex_digits(length: int) -> Check:
    """A string of ``length`` lower-case hex digits."""
    pattern = re.compile(f"[0-9a-f]{{{length}}}")
    return Check(f"{length} lower-case hex digits", lambda v: isinstance(v, str), pattern.fullmatch)


def check_fields(record) -> None:
    """Check ``record`` against its class's ``_constraints``; store the converted values."""
    constraints = type(record)._constraints
    values = {name: getattr(record, name) for name in constraints}
    for name, value in _validate_params(type(record).__name__, constraints, values).items():
        object.__setattr__(record, name, value)


_GUARANTEE = {
    "notion": [Options("pure", "zcdp", "local", "none")],
    "epsilon": BUDGET,
    "delta": UNIT,
    "rho": optional(BUDGET),
    "adjacency": [Options("replace-one", "add/remove", "replace-one and add/remove")],
    "holds": FLAG,
    "description": TEXT,
}


def check_guarantee(guarantee: Any) -> PrivacyGuarantee:
    """A :class:`~privconf_sklearn.privacy.PrivacyGuarantee` with checked fields."""
    if not isinstance(guarantee, PrivacyGuarantee):
        raise TypeError(f"expected a PrivacyGuarantee; got {type(guarantee).__name__}.")
    values = {name: getattr(guarantee, name) for name in _GUARANTEE}
    return PrivacyGuarantee(**_validate_params("PrivacyGuarantee", _GUARANTEE, values))


def guarantee_from_dict(data: Any, path: str) -> PrivacyGuarantee:
    """A checked guarantee from decoded JSON."""
    guarantee = record_from_dict(PrivacyGuarantee, data, path)
    try:
        return check_guarantee(guarantee)
    except (TypeError, ValueError) as exc:
        raise CardFormatError(f"{path}: {exc}") from exc


def marginal_lower_bound(lower_bound: float, confidence: float) -> float:
    """``L - (1 - confidence)``, floored at 0: a marginal bound from a high-probability one."""
    if confidence >= 1.0:
        return float(lower_bound)
    return max(0.0, float(lower_bound) - (1.0 - float(confidence)))


class _Checked:
    """Records whose fields are checked against ``_constraints`` when built."""

    _constraints: ClassVar[dict[str, list]] = {}

    def __post_init__(self):
        check_fields(self)


@dataclass(frozen=True)
class ComponentSpec(_Checked):
    """A mechanism or score: class name and ``get_params(deep=False)`` as JSON values.

    Parameters
    ----------
    name : str
        Class name, e.g. ``"DPAPS"``; mechanisms are rebuilt from it to recompute ``L(c)``.
    params : dict
        Parameters as plain values (objects recorded as ``{"$repr": ...}``).
    """

    name: str
    params: dict[str, Any]
    _constraints: ClassVar = {"name": TEXT, "params": [InstanceOf(dict, "dict")]}

    @classmethod
    def of(cls, component) -> ComponentSpec:
        """The spec of a scikit-learn style component instance."""
        params = plain_value(component.get_params(deep=False))
        return cls(type(component).__name__, dict(sorted(params.items())))


@dataclass(frozen=True)
class Configuration(_Checked):
    """The calibration choices ``c``.

    Parameters
    ----------
    task : {"classification", "regression", "unspecified"}
        What the predictor outputs (sets or intervals).
    alpha : float
        Requested miscoverage, in (0, 1).
    nominal_coverage : float
        ``gamma = 1 - alpha``.
    n_samples : int
        Calibration size (public), in [1, 2**53].
    mechanism : ComponentSpec
        Quantile mechanism and its parameters.
    conformity_score : ComponentSpec or None
        Conformity score and its parameters.
    estimator : str or None
        The fitted model (class path; pipelines list their steps).
    agent_sizes : tuple of int or None
        Federated mechanisms: each agent's (public) calibration size, summing to
        ``n_samples``.
    """

    task: str
    alpha: float
    nominal_coverage: float
    n_samples: int
    mechanism: ComponentSpec
    conformity_score: ComponentSpec | None = None
    estimator: str | None = None
    agent_sizes: tuple[int, ...] | None = None
    _constraints: ClassVar = {
        "task": [Options("classification", "regression", "unspecified")],
        "alpha": OPEN_UNIT,
        "nominal_coverage": OPEN_UNIT,
        "n_samples": SIZE,
        "mechanism": [InstanceOf(ComponentSpec)],
        "conformity_score": optional([InstanceOf(ComponentSpec)]),
        "estimator": optional(TEXT),
        "agent_sizes": optional([tuple_of(*SIZE)]),
    }
    _nested: ClassVar = {"mechanism": ComponentSpec, "conformity_score": ComponentSpec}

    def __post_init__(self):
        check_fields(self)
        if not math.isclose(self.nominal_coverage, 1.0 - self.alpha, rel_tol=1e-12):
            raise ValueError(f"nominal_coverage {self.nominal_coverage!r} is not 1 - alpha.")
        if self.agent_sizes is not None and sum(self.agent_sizes) != self.n_samples:
            raise ValueError(f"agent_sizes sum to {sum(self.agent_sizes)}, not n_samples.")


@dataclass(frozen=True)
class TrainingPrivacy(_Checked):
    """Privacy of the model training, ``eps_train``.

    Parameters
    ----------
    epsilon : float
        Training privacy loss, >= 0; ``inf`` when the model is not known to be private.
    delta : float
        Training delta in [0, 1].
    source : str
        Where the numbers come from (a diffprivlib model's ``epsilon``, the user...).
    """

    epsilon: float
    delta: float
    source: str
    _constraints: ClassVar = {"epsilon": BUDGET, "delta": UNIT, "source": TEXT}


@dataclass(frozen=True)
class Certificate(_Checked):
    """The mechanism's formal coverage certificate ``L(c)`` (the paper's Eq. (2)).

    Parameters
    ----------
    lower_bound : float
        ``L(c)`` as the mechanism states it, in [0, 1].
    confidence : float
        1 for a marginal bound, ``1 - b`` for one that holds with that probability.
    marginal_lower_bound : float
        ``L - (1 - confidence)`` floored at 0: the bound Eq. (3) is checked with.
    level_reachable : bool
        False when the mechanism releases the trivial top-of-range threshold.
    reason : str
        Why the level is unreachable, or empty.
    """

    lower_bound: float
    confidence: float
    marginal_lower_bound: float
    level_reachable: bool
    reason: str
    _constraints: ClassVar = {
        "lower_bound": UNIT,
        "confidence": UNIT,
        "marginal_lower_bound": UNIT,
        "level_reachable": FLAG,
        "reason": TEXT,
    }

    def __post_init__(self):
        check_fields(self)
        if self.marginal_lower_bound != marginal_lower_bound(self.lower_bound, self.confidence):
            raise ValueError("marginal_lower_bound is not L - (1 - confidence).")

    @classmethod
    def of(cls, lower_bound, confidence, level_reachable, reason) -> Certificate:
        """A certificate with its marginal bound filled in."""
        marginal = marginal_lower_bound(lower_bound, confidence)
        return cls(float(lower_bound), float(confidence), marginal, bool(level_reachable), reason)


@dataclass(frozen=True)
class Release(_Checked):
    """What the calibration released (None on cards of uncalibrated configurations).

    Parameters
    ----------
    threshold : float
        Threshold on the public range [0, 1].
    threshold_score_units : float or None
        The same threshold in score units (None when the score bounds are not public).
    score_bounds : tuple of float or None
        Public score range mapped to [0, 1] (None when not public).
    score_bounds_source : {"public", "calibration data"} or None
        Where the score range came from: ``"public"`` (a score's natural range, or the
        regressor's ``score_bounds``) or ``"calibration data"`` (``score_bounds=None``:
        the calibration guarantee does not hold and the range is an owner diagnostic).
        None for a bare mechanism calibration.
    target_level : float or None
        Empirical quantile level the mechanism aimed at (public).
    coverage_upper_bound : float or None
        Theorem upper bound on coverage for scores without atoms, if any.
    upper_bound_atom_slope : float
        Add ``slope * p_max`` to the upper bound when scores have atoms.
    informative : bool
        ``threshold < 1``. False: every set holds every label, every interval is as wide
        as the score bounds.
    coverage_holds : bool
        False when an assumption of the coverage guarantee broke or cannot be shown
        (a regression threshold at the upper score bound covers only targets whose score
        lies within the bounds, which the card cannot show without disclosing data).
    reason : str
        Why the release is uninformative or its coverage does not hold, or empty.
    """

    threshold: float
    threshold_score_units: float | None
    score_bounds: tuple[float, float] | None
    score_bounds_source: str | None
    target_level: float | None
    coverage_upper_bound: float | None
    upper_bound_atom_slope: float
    informative: bool
    coverage_holds: bool
    reason: str
    _constraints: ClassVar = {
        "threshold": UNIT,
        "threshold_score_units": optional([Interval("real")]),
        "score_bounds": optional([tuple_of(Interval("real"), length=2)]),
        "score_bounds_source": optional([Options("public", "calibration data")]),
        "target_level": optional([Interval("real", 0, None)]),
        "coverage_upper_bound": optional(UNIT),
        "upper_bound_atom_slope": [Interval("real", 0, None)],
        "informative": FLAG,
        "coverage_holds": FLAG,
        "reason": TEXT,
    }

    def __post_init__(self):
        check_fields(self)
        bounds = self.score_bounds
        if self.informative != (self.threshold < 1.0):
            raise ValueError(f"informative must be threshold < 1 = {self.threshold < 1.0}.")
        if (bounds is None) != (self.score_bounds_source != "public"):
            raise ValueError("score_bounds are recorded exactly when they are public.")
        if (self.threshold_score_units is None) != (bounds is None):
            raise ValueError("threshold_score_units is recorded exactly with score_bounds.")
        if bounds is not None and not bounds[0] < bounds[1]:
            raise ValueError(f"score_bounds must have low < high; got {bounds}.")


@dataclass(frozen=True)
class Candidate(_Checked):
    """One configuration of a certificate-aware search grid and what became of it.

    Parameters
    ----------
    index : int
        Position in the grid.
    configuration : Configuration
        The configuration.
    training : TrainingPrivacy
        Its training privacy.
    calibration : PrivacyGuarantee
        Its planned calibration guarantee (a calibrated one: the guarantee it carries).
    certificate : Certificate
        Its coverage certificate, from public quantities alone.
    formally_feasible : bool
        Eq. (3) for the contract, from the certificate (no data touched).
    status : {"infeasible", "dominated", "skipped", "evaluated", "chosen"}
        Formally infeasible; dominated; kept but not calibrated (``note`` says why);
        calibrated and evaluated; the selected one.
    note : str
        Why it was dominated or skipped, or empty.
    """

    index: int
    configuration: Configuration
    training: TrainingPrivacy
    calibration: PrivacyGuarantee
    certificate: Certificate
    formally_feasible: bool
    status: str
    note: str
    _constraints: ClassVar = {
        "index": COUNT,
        "configuration": [InstanceOf(Configuration)],
        "training": [InstanceOf(TrainingPrivacy)],
        "certificate": [InstanceOf(Certificate)],
        "formally_feasible": FLAG,
        "status": [Options("infeasible", "dominated", "skipped", "evaluated", "chosen")],
        "note": TEXT,
    }
    _nested: ClassVar = {
        "configuration": Configuration,
        "training": TrainingPrivacy,
        "calibration": guarantee_from_dict,
        "certificate": Certificate,
    }

    def __post_init__(self):
        check_fields(self)
        object.__setattr__(self, "calibration", check_guarantee(self.calibration))


@dataclass(frozen=True)
class Selection(_Checked):
    """Selection summary of a certificate-aware search (the paper's Sec. 4, Table 2).

    Parameters
    ----------
    rule : str
        The dominance and selection rule, in words.
    calibration_split : {"disjoint", "shared"}
        How evaluated configurations shared the calibration rows (sets the composition).
    n_checked, n_formally_feasible, n_selected, n_evaluated : int
        Grid size; configurations passing Eq. (3) on certificates alone; the feasible,
        non-dominated ones selected for evaluation; those actually calibrated.
    chosen_index : int or None
        Grid index of the configuration on the card (None if nothing was feasible).
    best_coverage_margin : float
        ``max_c L_marg(c) - gamma_target``: the failed margin of an infeasible contract.
    spent_epsilon_cal, spent_delta_cal : float
        Calibration privacy of the whole search: the maximum over calibrations on
        disjoint rows (parallel composition), the sum on shared rows.
    candidates : tuple of Candidate
        Every grid configuration.
    """

    rule: str
    calibration_split: str
    n_checked: int
    n_formally_feasible: int
    n_selected: int
    n_evaluated: int
    chosen_index: int | None
    best_coverage_margin: float
    spent_epsilon_cal: float
    spent_delta_cal: float
    candidates: tuple[Candidate, ...]
    _constraints: ClassVar = {
        "rule": TEXT,
        "calibration_split": [Options("disjoint", "shared")],
        "n_checked": COUNT,
        "n_formally_feasible": COUNT,
        "n_selected": COUNT,
        "n_evaluated": COUNT,
        "chosen_index": optional(COUNT),
        "best_coverage_margin": [Interval("real", -1, 1)],
        "spent_epsilon_cal": BUDGET,
        "spent_delta_cal": UNIT,
        "candidates": [tuple_of(InstanceOf(Candidate))],
    }
    _nested: ClassVar = {"candidates": Candidate}


_MEASURE = optional([Interval("real", 0, None)])


@dataclass
class Diagnostics(_Checked):
    """Published diagnostics (the paper's diagnostic layer; not formal evidence).

    Only public or privacy-protected quantities: results on data declared public
    (``evaluate(..., public=True)``, a search's evaluation data) and the mechanism's
    public details. None: not measured.

    Parameters
    ----------
    n_test : int or None
        Rows the empirical diagnostics were computed on.
    empirical_coverage : float or None
        Fraction of test targets in their set / interval.
    mean_set_size, singleton_rate, accuracy : float or None
        Classification: mean number of labels, fraction of singletons, model accuracy.
    mean_width : float or None
        Regression: mean interval width.
    mechanism_details : dict
        Public or privacy-protected quantities the mechanism reported.
    candidate_index : int or None
        Grid index, for the per-candidate entries of a search.
    candidates : tuple of Diagnostics
        Diagnostics of every configuration a search evaluated.
    """

    n_test: int | None = None
    empirical_coverage: float | None = None
    mean_set_size: float | None = None
    singleton_rate: float | None = None
    accuracy: float | None = None
    mean_width: float | None = None
    mechanism_details: dict[str, Any] = field(default_factory=dict)
    candidate_index: int | None = None
    candidates: tuple[Diagnostics, ...] = ()
    _constraints: ClassVar = {
        "n_test": optional([Interval("integer", 0, None)]),
        "empirical_coverage": optional(UNIT),
        "mean_set_size": _MEASURE,
        "singleton_rate": optional(UNIT),
        "accuracy": optional(UNIT),
        "mean_width": _MEASURE,
        "mechanism_details": [InstanceOf(dict, "dict")],
        "candidate_index": optional(COUNT),
    }
    _nested: ClassVar[dict[str, Any]] = {}


# Self-references, once the class exists.
Diagnostics._constraints["candidates"] = [tuple_of(InstanceOf(Diagnostics))]
Diagnostics._nested["candidates"] = Diagnostics


@dataclass(frozen=True)
class Signature(_Checked):
    """An Ed25519 signature of the card's formal layer (:meth:`ContractCard.sign`).

    Parameters
    ----------
    algorithm : {"ed25519"}
        Signature scheme.
    public_key : str
        The signer's raw public key (64 hex digits), to tell which key signed; an
        auditor checks with a key obtained from the issuer, not with this one.
    value : str
        The signature (128 hex digits) of the bytes ``formal_sha256`` is taken over.
    """

    algorithm: str
    public_key: str
    value: str
    _constraints: ClassVar = {
        "algorithm": [Options("ed25519")],
        "public_key": [hex_digits(64)],
        "value": [hex_digits(128)],
    }


def record_to_dict(record: Any) -> Any:
    """A record (recursively) as dicts, lists and plain values."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {name: record_to_dict(getattr(record, name)) for name in _names(type(record))}
    if isinstance(record, list | tuple):
        return [record_to_dict(item) for item in record]
    if isinstance(record, dict):
        return {str(key): record_to_dict(item) for key, item in record.items()}
    return record


def _names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")]


def _nested_value(build: type | Callable, value: Any, path: str) -> Any:
    if isinstance(value, tuple):
        return tuple(_nested_value(build, item, f"{path}[{i}]") for i, item in enumerate(value))
    if isinstance(build, type):
        return record_from_dict(build, value, path)
    return build(value, path)


def record_from_dict(cls: type, data: Any, path: str) -> Any:
    """Build the record ``cls`` from decoded JSON; errors name the JSON path."""
    if not isinstance(data, dict):
        raise CardFormatError(f"{path} must be a JSON object; got {type(data).__name__}.")
    names, nested = _names(cls), getattr(cls, "_nested", {})
    unknown, missing = sorted(set(data) - set(names)), [n for n in names if n not in data]
    if unknown or missing:
        raise CardFormatError(f"{path}: unknown fields {unknown[:10]}, missing fields {missing}.")
    kwargs = {
        name: _nested_value(nested[name], data[name], f"{path}.{name}")
        if name in nested and data[name] is not None
        else data[name]
        for name in names
    }
    try:
        return cls(**kwargs)
    except CardFormatError:
        raise
    except (TypeError, ValueError) as exc:
        raise CardFormatError(f"{path}: {exc}") from exc
