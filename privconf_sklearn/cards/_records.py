"""The records a contract card is made of (the contract-cards paper's Table 1).

Formal records (frozen): the configuration, the training privacy, the certificate, the
release and the selection summary of a certificate-aware search. :class:`Diagnostics`
(mutable, filled by :meth:`ContractCard.evaluate`) is outside the formal layer.

Every record checks its fields against a constraints table when it is built (types,
ranges, finiteness, sizes), so a card built in memory or read from JSON never holds a
negative budget, a threshold outside [0, 1] or a NaN; :func:`record_from_dict` turns
those errors into :class:`CardFormatError` naming the JSON path.
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
    "CANDIDATE_STATUSES",
    "MAX_AGENTS",
    "MAX_SAMPLES",
    "Candidate",
    "Certificate",
    "ComponentSpec",
    "Configuration",
    "Diagnostics",
    "Release",
    "Selection",
    "Signature",
    "TrainingPrivacy",
    "check_fields",
    "check_guarantee",
    "guarantee_from_dict",
    "marginal_lower_bound",
    "record_from_dict",
    "record_to_dict",
]

#: Largest calibration size a card records: 2**53, so every size is an exact float64.
MAX_SAMPLES = 2**53
#: Most federated agents a card records.
MAX_AGENTS = 100_000
#: Most configurations of a search a card records.
MAX_CANDIDATES = 10_000
#: What a certificate-aware search did with each configuration of its grid.
CANDIDATE_STATUSES = ("infeasible", "dominated", "skipped", "evaluated", "chosen")
TASKS = ("classification", "regression", "unspecified")


class Infinity(Constraint):
    """``inf`` (``sign=1``) or ``-inf`` (``sign=-1``), for unbounded budgets and margins."""

    def __init__(self, sign: int = 1):
        self.value = math.copysign(math.inf, sign)

    def accepts_type(self, value) -> bool:
        """Real numbers."""
        return isinstance(value, int | float | np.floating) and not isinstance(value, bool)

    def accepts_value(self, value) -> bool:
        """Exactly the infinity."""
        return value == self.value

    def convert(self, value):
        """A float."""
        return float(value)

    def describe(self) -> str:
        """``inf`` or ``-inf``."""
        return str(self.value)


class TupleOf(Constraint):
    """A list, tuple or array whose items each meet one of ``options``; stored as a tuple."""

    def __init__(self, *options: Constraint, length: int | None = None, max_length: int):
        self.options, self.length, self.max_length = options, length, max_length

    def accepts_type(self, value) -> bool:
        """Sequences."""
        return isinstance(value, list | tuple | np.ndarray)

    def _item(self, item) -> Constraint | None:
        ok = (o for o in self.options if o.accepts_type(item) and o.accepts_value(item))
        return next(ok, None)

    def accepts_value(self, value) -> bool:
        """The length is right and every item is accepted."""
        if len(value) > self.max_length or self.length not in (None, len(value)):
            return False
        return all(self._item(item) is not None for item in value)

    def convert(self, value):
        """A tuple of converted items."""
        return tuple(self._item(item).convert(item) for item in value)  # type: ignore[union-attr]

    def describe(self) -> str:
        """E.g. ``a sequence of 2 items, each a finite real number``."""
        size = f"{self.length} " if self.length is not None else ""
        each = " or ".join(option.describe() for option in self.options)
        return f"a sequence of {size}items (at most {self.max_length}), each {each}"


class Hex(Constraint):
    """A lower-case hexadecimal string of a fixed length."""

    def __init__(self, length: int):
        self.length = length

    def accepts_type(self, value) -> bool:
        """Strings."""
        return isinstance(value, str)

    def accepts_value(self, value) -> bool:
        """``length`` hex digits."""
        return re.fullmatch(f"[0-9a-f]{{{self.length}}}", value) is not None

    def describe(self) -> str:
        """E.g. ``64 lower-case hex digits``."""
        return f"{self.length} lower-case hex digits"


TEXT = [InstanceOf(str, "string")]
OPTIONAL_TEXT = [NoneValue(), *TEXT]
FLAG = [Boolean()]
UNIT = [Interval("real", 0, 1)]
OPEN_UNIT = [Interval("real", 0, 1, closed="neither")]
BUDGET = [Interval("real", 0, None), Infinity()]  # epsilon: >= 0, inf allowed
DELTA = [Interval("real", 0, 1)]
COUNT = [Interval("integer", 0, MAX_CANDIDATES)]
SIZE = [Interval("integer", 1, MAX_SAMPLES)]
SIGNED = [Interval("real"), Infinity(), Infinity(-1)]


def check_fields(record) -> None:
    """Check ``record`` against its class's ``_constraints``; store the converted values.

    Raises ``TypeError`` / ``ValueError`` naming the record and field.
    """
    constraints = type(record)._constraints
    values = {name: getattr(record, name) for name in constraints}
    for name, value in _validate_params(type(record).__name__, constraints, values).items():
        object.__setattr__(record, name, value)


_GUARANTEE = {
    "notion": [Options("pure", "zcdp", "local", "none")],
    "epsilon": BUDGET,
    "delta": DELTA,
    "rho": [NoneValue(), *BUDGET],
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
    """A checked :class:`~privconf_sklearn.privacy.PrivacyGuarantee` from decoded JSON."""
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


@dataclass(frozen=True)
class ComponentSpec:
    """A mechanism or score: class name and constructor parameters (JSON values).

    Parameters
    ----------
    name : str
        Class name, e.g. ``"DPAPS"``; mechanisms are rebuilt from it to recompute
        ``L(c)``.
    params : dict
        ``get_params(deep=False)`` as plain values (objects as ``{"$repr": ...}``).
    """

    name: str
    params: dict[str, Any]
    _constraints: ClassVar = {"name": TEXT, "params": [InstanceOf(dict, "dict")]}

    def __post_init__(self):
        check_fields(self)

    @classmethod
    def of(cls, component) -> ComponentSpec:
        """The spec of a scikit-learn style component instance."""
        params = plain_value(component.get_params(deep=False))
        return cls(type(component).__name__, dict(sorted(params.items())))


@dataclass(frozen=True)
class Configuration:
    """The calibration choices ``c``; privacy coordinates are recorded separately.

    Parameters
    ----------
    task : {"classification", "regression", "unspecified"}
        What the predictor outputs (sets or intervals).
    alpha : float
        Requested miscoverage, in (0, 1).
    nominal_coverage : float
        ``gamma = 1 - alpha``.
    n_samples : int
        Calibration size (public, as in all source papers), in [1, 2**53].
    mechanism : ComponentSpec
        Quantile mechanism and its parameters.
    conformity_score : ComponentSpec or None
        Conformity score and its parameters.
    estimator : str or None
        The fitted model (class path; pipelines list their steps).
    agent_sizes : tuple of int or None
        Federated mechanisms: calibration size of each agent (public; the certificate
        depends on them), summing to ``n_samples``. None for central mechanisms.
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
        "task": [Options(*TASKS)],
        "alpha": OPEN_UNIT,
        "nominal_coverage": OPEN_UNIT,
        "n_samples": SIZE,
        "mechanism": [InstanceOf(ComponentSpec)],
        "conformity_score": [NoneValue(), InstanceOf(ComponentSpec)],
        "estimator": OPTIONAL_TEXT,
        "agent_sizes": [NoneValue(), TupleOf(*SIZE, max_length=MAX_AGENTS)],
    }
    _nested: ClassVar = {"mechanism": ComponentSpec, "conformity_score": ComponentSpec}

    def __post_init__(self):
        check_fields(self)
        if not math.isclose(self.nominal_coverage, 1.0 - self.alpha, rel_tol=1e-12):
            raise ValueError(
                f"nominal_coverage {self.nominal_coverage!r} is not 1 - alpha = "
                f"{1.0 - self.alpha!r}."
            )
        if self.agent_sizes is not None and sum(self.agent_sizes) != self.n_samples:
            raise ValueError(
                f"agent_sizes sum to {sum(self.agent_sizes)}, not n_samples = {self.n_samples}."
            )


@dataclass(frozen=True)
class TrainingPrivacy:
    """Privacy of the model training, ``eps_train`` (and its delta).

    Parameters
    ----------
    epsilon : float
        Training privacy loss, >= 0; ``inf`` when the model is not known to be private.
    delta : float
        Training delta in [0, 1] (0 for pure DP).
    source : str
        Where the numbers come from (a diffprivlib model's ``epsilon``, the user...).
    """

    epsilon: float
    delta: float
    source: str
    _constraints: ClassVar = {"epsilon": BUDGET, "delta": DELTA, "source": TEXT}

    def __post_init__(self):
        check_fields(self)


@dataclass(frozen=True)
class Certificate:
    """The mechanism's formal coverage certificate ``L(c)`` (the paper's Eq. (2)).

    Parameters
    ----------
    lower_bound : float
        ``L(c)`` as the mechanism states it, in [0, 1].
    confidence : float
        1 for a marginal bound, ``1 - b`` for one that holds with that probability.
    marginal_lower_bound : float
        ``L - (1 - confidence)`` floored at 0: the marginal bound Eq. (3) is checked with.
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
        return cls(
            lower_bound=float(lower_bound),
            confidence=float(confidence),
            marginal_lower_bound=marginal_lower_bound(lower_bound, confidence),
            level_reachable=bool(level_reachable),
            reason=str(reason),
        )


@dataclass(frozen=True)
class Release:
    """What the calibration released (absent on cards of uncalibrated configurations).

    Parameters
    ----------
    threshold : float
        Threshold on the public range [0, 1].
    threshold_score_units : float or None
        The same threshold in score units (None when the score bounds are not public).
    score_bounds : tuple of float or None
        Public score range mapped to [0, 1]; None when it is not public.
    score_bounds_source : {"public", "calibration data"} or None
        Where the score range came from: ``"public"`` (a score's natural range, or
        ``score_bounds`` given to the regressor) or ``"calibration data"`` (the
        regressor's ``score_bounds=None``: the range was read from the data, the privacy
        guarantee does not hold and the range itself is an owner diagnostic). None for
        a bare mechanism calibration.
    target_level : float or None
        Empirical quantile level the mechanism aimed at (public).
    coverage_upper_bound : float or None
        Theorem upper bound on coverage for scores without atoms, when one exists.
    upper_bound_atom_slope : float
        Add ``slope * p_max`` to the upper bound when scores have atoms.
    informative : bool
        ``threshold < 1``. False: the release is the top of the public range, so every
        set holds every label and every interval is as wide as the score bounds.
    coverage_holds : bool
        False when an assumption of the coverage guarantee broke or cannot be shown:
        a regression threshold at the upper score bound covers only targets whose
        score lies within the bounds, which the card cannot certify without disclosing
        calibration data.
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
        "threshold_score_units": [NoneValue(), Interval("real")],
        "score_bounds": [NoneValue(), TupleOf(Interval("real"), length=2, max_length=2)],
        "score_bounds_source": [NoneValue(), Options("public", "calibration data")],
        "target_level": [NoneValue(), Interval("real", 0, None)],
        "coverage_upper_bound": [NoneValue(), *UNIT],
        "upper_bound_atom_slope": [Interval("real", 0, None)],
        "informative": FLAG,
        "coverage_holds": FLAG,
        "reason": TEXT,
    }

    def __post_init__(self):
        check_fields(self)
        if self.informative != (self.threshold < 1.0):
            raise ValueError(f"informative must be threshold < 1 = {self.threshold < 1.0}.")
        bounds = self.score_bounds
        if (bounds is None) != (self.score_bounds_source != "public"):
            raise ValueError("score_bounds are recorded exactly when they are public.")
        if (self.threshold_score_units is None) != (bounds is None):
            raise ValueError("threshold_score_units is recorded exactly with the score bounds.")
        if bounds is not None and not bounds[0] < bounds[1]:
            raise ValueError(f"score_bounds must have low < high; got {bounds}.")


@dataclass(frozen=True)
class Candidate:
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
        Its calibration guarantee, from the mechanism's parameters alone (for a
        calibrated configuration: the guarantee its calibration carries).
    certificate : Certificate
        Its coverage certificate, from public quantities alone.
    formally_feasible : bool
        Eq. (3) for the contract, from the certificate (no data touched).
    status : {"infeasible", "dominated", "skipped", "evaluated", "chosen"}
        Formally infeasible; feasible but dominated; non-dominated but not calibrated
        (``note`` says why); calibrated and evaluated; the selected one.
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
        "status": [Options(*CANDIDATE_STATUSES)],
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
class Selection:
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
        ``max_c L_marg(c) - gamma_target`` over the grid: the failed margin of an
        infeasible contract.
    spent_epsilon_cal, spent_delta_cal : float
        Calibration privacy of the whole search: parallel composition (maximum) over
        the evaluated calibrations on disjoint rows, basic composition (sum) on shared
        rows; 0 when nothing was calibrated.
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
        "chosen_index": [NoneValue(), *COUNT],
        "best_coverage_margin": [Interval("real", -1, 1)],
        "spent_epsilon_cal": BUDGET,
        "spent_delta_cal": DELTA,
        "candidates": [TupleOf(InstanceOf(Candidate), max_length=MAX_CANDIDATES)],
    }
    _nested: ClassVar = {"candidates": Candidate}

    def __post_init__(self):
        check_fields(self)


_MEASURE = [NoneValue(), Interval("real", 0, None)]


@dataclass
class Diagnostics:
    """Published diagnostics (the paper's Table 1 diagnostic layer; not formal evidence).

    Only public or privacy-protected quantities: empirical diagnostics on data the owner
    declared public (``evaluate(..., public=True)``, or a search's evaluation data),
    and the mechanism's public details. ``None`` means not measured.

    Parameters
    ----------
    n_test : int or None
        Rows the empirical diagnostics were computed on.
    empirical_coverage : float or None
        Fraction of test targets in their set / interval.
    mean_set_size, singleton_rate, accuracy : float or None
        Classification: mean number of labels, fraction of singleton sets, accuracy of
        the wrapped model's ``predict``.
    mean_width : float or None
        Regression: mean interval width.
    mechanism_details : dict
        Public or privacy-protected quantities the mechanism reported (resolved
        parameters such as ExponQ's bins, noisy counts...).
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
        "n_test": [NoneValue(), Interval("integer", 0, None)],
        "empirical_coverage": [NoneValue(), *UNIT],
        "mean_set_size": _MEASURE,
        "singleton_rate": [NoneValue(), *UNIT],
        "accuracy": [NoneValue(), *UNIT],
        "mean_width": _MEASURE,
        "mechanism_details": [InstanceOf(dict, "dict")],
        "candidate_index": [NoneValue(), *COUNT],
    }
    _nested: ClassVar[dict[str, Any]] = {}

    def __post_init__(self):
        check_fields(self)


# Self-references, once the class exists.
Diagnostics._constraints["candidates"] = [
    TupleOf(InstanceOf(Diagnostics), max_length=MAX_CANDIDATES)
]
Diagnostics._nested["candidates"] = Diagnostics


@dataclass(frozen=True)
class Signature:
    """An Ed25519 signature of the card's formal layer (see :meth:`ContractCard.sign`).

    Parameters
    ----------
    algorithm : {"ed25519"}
        Signature scheme.
    public_key : str
        The signer's raw public key (64 hex digits), to tell which key to check with;
        an auditor verifies with a key obtained from the issuer, not this one.
    value : str
        The signature (128 hex digits) of the canonical JSON of the schema header and
        the formal layer (the bytes ``formal_sha256`` is taken over).
    """

    algorithm: str
    public_key: str
    value: str
    _constraints: ClassVar = {
        "algorithm": [Options("ed25519")],
        "public_key": [Hex(64)],
        "value": [Hex(128)],
    }

    def __post_init__(self):
        check_fields(self)


def record_to_dict(record: Any) -> Any:
    """A record (recursively) as dicts, lists and plain values."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {
            f.name: record_to_dict(getattr(record, f.name))
            for f in dataclasses.fields(record)
            if f.init and not f.name.startswith("_")
        }
    if isinstance(record, list | tuple):
        return [record_to_dict(item) for item in record]
    if isinstance(record, dict):
        return {str(key): record_to_dict(item) for key, item in record.items()}
    return record


def _nested_value(build: type | Callable, value: Any, path: str) -> Any:
    if isinstance(value, tuple):
        return tuple(_nested_value(build, item, f"{path}[{i}]") for i, item in enumerate(value))
    if isinstance(build, type):
        return record_from_dict(build, value, path)
    return build(value, path)


def record_from_dict(cls: type, data: Any, path: str) -> Any:
    """Build the record ``cls`` from decoded JSON, checking every field.

    Raises
    ------
    CardFormatError
        Naming the JSON path of a missing, unknown or invalid field.
    """
    if not isinstance(data, dict):
        raise CardFormatError(f"{path} must be a JSON object; got {type(data).__name__}.")
    names = [f.name for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")]
    unknown, missing = sorted(set(data) - set(names)), [n for n in names if n not in data]
    if unknown or missing:
        raise CardFormatError(f"{path}: unknown fields {unknown[:10]}, missing fields {missing}.")
    nested = getattr(cls, "_nested", {})
    kwargs = {
        name: data[name]
        if data[name] is None or name not in nested
        else _nested_value(nested[name], data[name], f"{path}.{name}")
        for name in names
    }
    try:
        return cls(**kwargs)
    except CardFormatError:
        raise
    except (TypeError, ValueError) as exc:
        raise CardFormatError(f"{path}: {exc}") from exc
