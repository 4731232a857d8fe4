"""The records of a contract card (the contract-cards paper's Table 1).

A record is a dataclass whose annotations are its schema: ``Annotated`` types carry the
accepted forms (scikit-learn constraints, :mod:`privconf_sklearn._param_validation`),
record types nest. That one declaration validates a record when it is built
(``InvalidParameterError`` naming the field), writes it (:func:`to_plain`) and reads it
back (:func:`from_plain`, ``CardFormatError`` naming the JSON path).
"""

from __future__ import annotations

import math
import re
import types
from dataclasses import dataclass, field, fields
from numbers import Integral, Real
from typing import Annotated, Any, ClassVar, Union, get_args, get_origin, get_type_hints

import numpy as np

from .._param_validation import (
    Constraint,
    Interval,
    StrOptions,
    canonical_value,
    constraint_of,
    validate_params,
)
from ..privacy import ADJACENCY_STATEMENTS, PrivacyGuarantee
from ._codec import CardFormatError, canonical_bytes, plain_value

__all__ = [
    "CalibrationEntry",
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
#: Most agents, groups or grid configurations a card records.
MAX_ITEMS = 100_000


class Check(Constraint):
    """A constraint from a description, a test and a conversion."""

    def __init__(self, description: str, test, convert=None):
        super().__init__()
        self.description, self.test, self.conversion = description, test, convert

    def is_satisfied_by(self, val) -> bool:
        """The test."""
        return bool(self.test(val))

    def convert(self, value):
        """The conversion (none: unchanged)."""
        return value if self.conversion is None else self.conversion(value)

    def __str__(self) -> str:
        return self.description


class Items(Constraint):
    """A list, tuple or 1-d array of at most ``max_length`` items, each meeting an option.

    Converted to a tuple of the items in canonical form.
    """

    def __init__(self, *options, max_length: int = MAX_ITEMS, length=None):
        super().__init__()
        self.options = [constraint_of(option) for option in options]
        self.max_length, self.length = max_length, length

    def option(self, value):
        """The first option accepting ``value``, or None."""
        return next((o for o in self.options if o.is_satisfied_by(value)), None)

    def is_satisfied_by(self, val) -> bool:
        """A sequence of the right length whose every item meets an option."""
        if not isinstance(val, list | tuple | np.ndarray) or np.ndim(val) != 1:
            return False
        return (
            len(val) <= self.max_length
            and self.length in (None, len(val))
            and all(self.option(v) is not None for v in val)
        )

    def convert(self, values) -> tuple:
        """A tuple of the items in canonical form."""
        return tuple(canonical_value(self.option(v), v) for v in values)

    def __str__(self) -> str:
        each = " or ".join(str(option) for option in self.options)
        return f"a sequence of {self.length or f'at most {self.max_length}'} items, each {each}"


class Nested(Constraint):
    """A record; one of another class (a ``PrivacyGuarantee``) is checked and rebuilt."""

    def __init__(self, kind: type):
        super().__init__()
        self.kind = kind

    def is_satisfied_by(self, val) -> bool:
        """An instance of the record class."""
        return isinstance(val, self.kind)

    def convert(self, value):
        """Records validate themselves; others are checked against their schema."""
        if isinstance(value, Record):
            return value
        return self.kind(**validate_params(schema_of(self.kind), vars(value), self.kind.__name__))

    def __str__(self) -> str:
        return f"an instance of {self.kind.__name__!r}"


def distinct_ids(ids) -> bool:
    """Whether ``ids`` is a non-empty sequence of distinct JSON values (as written)."""
    keys = {canonical_bytes(value) for value in ids}
    return len(keys) == len(ids) > 0


def forms(*constraints) -> list:
    """The accepted forms of a field, for its ``Annotated`` type."""
    return list(constraints)


def optional(constraints: list) -> list:
    """``constraints`` or None."""
    return [None, *constraints]


def _hex(length: int) -> Check:
    pattern = re.compile(f"[0-9a-f]{{{length}}}")
    return Check(
        f"{length} lower-case hex digits",
        lambda v: isinstance(v, str) and pattern.fullmatch(v) is not None,
    )


#: A Mondrian group id: any JSON value but null (a class label, a declared id...).
GROUP_ID = Check("a JSON value other than null", lambda value: value is not None)
TEXT: list = [str]
UNIT = [Interval(Real, 0, 1, closed="both")]
BUDGET = [Interval(Real, 0, None, closed="both")]  # a privacy loss: >= 0, inf allowed
SIGNED = [Interval(Real, None, None, closed="both")]  # any real number or +-inf, not NaN
SIZE = [Interval(Integral, 1, MAX_SAMPLES, closed="both")]
COUNT = [Interval(Integral, 0, MAX_ITEMS, closed="both")]

# Field types: the annotation is the schema.
Text = Annotated[str, TEXT]
Flag = Annotated[bool, forms("boolean")]
Unit = Annotated[float, UNIT]
OpenUnit = Annotated[float, forms(Interval(Real, 0, 1, closed="neither"))]
Budget = Annotated[float, BUDGET]
Signed = Annotated[float | None, optional(SIGNED)]
Count = Annotated[int, COUNT]
Measure = Annotated[float | None, optional([Interval(Real, 0, None, closed="left")])]
MaybeUnit = Annotated[float | None, optional(UNIT)]
MaybeBudget = Annotated[float | None, optional(BUDGET)]
MaybeText = Annotated[str | None, optional(TEXT)]
MaybeCount = Annotated[int | None, optional(COUNT)]
Mapping = Annotated[dict[str, Any], forms(dict)]

#: The schema of a calibration guarantee (a class of the privacy layer).
GUARANTEE: dict[str, list] = {
    "notion": [StrOptions({"pure", "zcdp", "local", "none"})],
    "epsilon": BUDGET,
    "delta": UNIT,
    "rho": optional(BUDGET),
    "adjacency": [StrOptions(set(ADJACENCY_STATEMENTS))],
    "holds": ["boolean"],
    "description": TEXT,
}


_SCHEMAS: dict[type, dict[str, list]] = {}


def _constraints(hint) -> list:
    """Accepted forms of a field: ``Annotated`` metadata, or nested records."""
    if get_origin(hint) is Annotated:
        return list(hint.__metadata__[0])
    if get_origin(hint) is tuple:
        return [Items(*_constraints(get_args(hint)[0]))]
    kinds = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    return [None if kind is type(None) else Nested(kind) for kind in kinds]


def schema_of(cls: type) -> dict[str, list]:
    """Field name -> accepted forms, in the order the fields are written."""
    if cls is PrivacyGuarantee:
        return GUARANTEE
    if cls not in _SCHEMAS:
        hints = get_type_hints(cls, include_extras=True)
        _SCHEMAS[cls] = {f.name: _constraints(hints[f.name]) for f in fields(cls) if f.init}
    return _SCHEMAS[cls]


class Record:
    """A dataclass whose fields are checked against its annotations when it is built.

    Fields named in :attr:`written_when_set` appear in plain data only when they are not
    None, and may be absent when a record is read back: a field added after a schema
    was published then leaves the records that do not use it as they were written.
    """

    written_when_set: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self):
        schema = schema_of(type(self))
        values = {name: getattr(self, name) for name in schema}
        for name, value in validate_params(schema, values, type(self).__name__).items():
            object.__setattr__(self, name, value)
        self._check()

    def _check(self) -> None:
        """Rules between fields (``ValueError``)."""


def to_plain(value: Any) -> Any:
    """A record (recursively) as dicts, lists and plain values, fields in schema order."""
    if isinstance(value, Record | PrivacyGuarantee):
        unset = [n for n in getattr(value, "written_when_set", ()) if getattr(value, n) is None]
        return {
            name: to_plain(getattr(value, name))
            for name in schema_of(type(value))
            if name not in unset
        }
    if isinstance(value, list | tuple):
        return [to_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): to_plain(item) for key, item in value.items()}
    return value


def decode_field(options: list, value: Any, path: str) -> Any:
    """Nested JSON objects of a field value as the records its schema names."""
    if isinstance(value, dict):
        nested = next((o for o in options if isinstance(o, Nested)), None)
        return value if nested is None else from_plain(nested.kind, value, path)
    items = next((o for o in options if isinstance(o, Items)), None)
    if isinstance(value, tuple) and items is not None and len(value) <= MAX_ITEMS:
        return tuple(
            decode_field(list(items.options), v, f"{path}[{i}]") for i, v in enumerate(value)
        )
    return value


def json_object(data: Any, path: str, required, optional_fields=()) -> dict:
    """``data``: a JSON object with the fields ``required`` and perhaps ``optional_fields``."""
    if not isinstance(data, dict):
        raise CardFormatError(f"{path} must be a JSON object; got {type(data).__name__}.")
    missing = [name for name in required if name not in data]
    unknown = sorted(set(data) - {*required, *optional_fields})
    if unknown or missing:
        problems = [f"missing fields {missing}"] if missing else []
        problems += [f"unknown fields {unknown[:10]}"] if unknown else []
        raise CardFormatError(f"{path}: {', '.join(problems)}.")
    return dict(data)


def from_plain(cls: type, data: Any, path: str) -> Any:
    """The record ``cls`` from decoded JSON; every error names the JSON path."""
    schema, optional_names = schema_of(cls), getattr(cls, "written_when_set", ())
    required = [name for name in schema if name not in optional_names]
    data = json_object(data, path, required, optional_names)
    values = {name: decode_field(schema[name], data.get(name), f"{path}.{name}") for name in schema}
    try:
        return Nested(cls).convert(cls(**values))
    except CardFormatError:
        raise
    except (TypeError, ValueError) as exc:
        raise CardFormatError(f"{path}: {exc}") from exc


def marginal_lower_bound(lower_bound: float, confidence: float) -> float:
    """``L - (1 - confidence)`` floored at 0: a marginal bound from a high-probability one."""
    if confidence >= 1.0:
        return float(lower_bound)
    return max(0.0, float(lower_bound) - (1.0 - float(confidence)))


@dataclass(frozen=True)
class ComponentSpec(Record):
    """A mechanism or score: class name and ``get_params(deep=False)`` as JSON values.

    Parameters
    ----------
    name : str
        Class name, e.g. ``"DPAPS"``; the verifier rebuilds mechanisms from it.
    params : dict
        Parameters as plain values (other objects as ``{"$repr": ...}``).
    """

    name: Text
    params: Mapping

    @classmethod
    def of(cls, component) -> ComponentSpec:
        """The spec of a scikit-learn style component."""
        return cls(type(component).__name__, plain_value(component.get_params(deep=False)))


@dataclass(frozen=True)
class Configuration(Record):
    """The calibration choices ``c``.

    Parameters
    ----------
    task : {"classification", "regression", "unspecified"}
        What the predictor outputs (sets or intervals).
    alpha, nominal_coverage : float
        Requested miscoverage in (0, 1) and ``gamma = 1 - alpha``.
    n_samples : int
        Calibration size (public), in [1, 2**53].
    mechanism, conformity_score : ComponentSpec (score: or None)
        Quantile mechanism and conformity score with their parameters.
    estimator : str or None, default=None
        The fitted model's class path (pipelines list their steps).
    agent_sizes : tuple of int or None, default=None
        Federated mechanisms: each agent's public size, summing to ``n_samples``.
    mondrian : str or None, default=None
        Mondrian calibration: ``"class"`` or ``"callable <name>"`` (None: one threshold).
    group_sizes : "public", ComponentSpec or None, default=None
        With ``mondrian``: ``"public"`` or the ``PrivateGroupSizes`` that released them.
    groups : tuple or None, default=None
        With ``mondrian``: the public list of groups, in order (the classifier's
        ``classes_``, the declared ``PrivateGroupSizes.group_ids``, or the ids whose
        sizes were declared public). The card holds exactly one calibration entry per
        group, and the contract must hold in each.
    """

    task: Annotated[str, forms(StrOptions({"classification", "regression", "unspecified"}))]
    alpha: OpenUnit
    nominal_coverage: OpenUnit
    n_samples: Annotated[int, SIZE]
    mechanism: ComponentSpec
    conformity_score: ComponentSpec | None = None
    estimator: MaybeText = None
    agent_sizes: Annotated[tuple[int, ...] | None, optional([Items(*SIZE)])] = None
    mondrian: MaybeText = None
    group_sizes: Annotated[
        str | ComponentSpec | None, forms(None, StrOptions({"public"}), Nested(ComponentSpec))
    ] = None
    groups: Annotated[tuple | None, optional([Items(GROUP_ID)])] = None

    def _check(self) -> None:
        if not math.isclose(self.nominal_coverage, 1.0 - self.alpha, rel_tol=1e-12):
            raise ValueError(f"nominal_coverage {self.nominal_coverage!r} is not 1 - alpha.")
        if self.agent_sizes is not None and sum(self.agent_sizes) != self.n_samples:
            raise ValueError(f"agent_sizes sum to {sum(self.agent_sizes)}, not n_samples.")
        grouping = (self.mondrian, self.group_sizes, self.groups)
        if len({value is None for value in grouping}) > 1:
            raise ValueError(
                "mondrian, group_sizes and groups are recorded together or not at all."
            )
        if self.groups is not None and not distinct_ids(self.groups):
            raise ValueError("groups must list at least one group, each once.")


@dataclass(frozen=True)
class TrainingPrivacy(Record):
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

    epsilon: Budget
    delta: Unit
    source: Text


@dataclass(frozen=True)
class Certificate(Record):
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

    lower_bound: Unit
    confidence: Unit
    marginal_lower_bound: Unit
    level_reachable: Flag
    reason: Text

    def _check(self) -> None:
        if self.marginal_lower_bound != marginal_lower_bound(self.lower_bound, self.confidence):
            raise ValueError("marginal_lower_bound is not L - (1 - confidence).")

    @classmethod
    def of(cls, lower_bound, confidence, level_reachable, reason) -> Certificate:
        """A certificate with its marginal bound filled in."""
        marginal = marginal_lower_bound(lower_bound, confidence)
        return cls(float(lower_bound), float(confidence), marginal, bool(level_reachable), reason)


@dataclass(frozen=True)
class Release(Record):
    """What a calibration released.

    Parameters
    ----------
    threshold : float
        Threshold on the public range [0, 1].
    threshold_score_units : float or None
        The same in score units (None when the score bounds are not public).
    score_bounds : tuple of float or None
        Public score range mapped to [0, 1] (None when not public).
    score_bounds_source : {"public", "calibration data"} or None
        Where the score range came from (``"calibration data"``: ``score_bounds=None``,
        the calibration guarantee does not hold); None for a bare mechanism.
    target_level : float or None
        Empirical quantile level the mechanism aimed at (public).
    coverage_upper_bound : float or None
        Theorem upper bound on coverage for scores without atoms, if any.
    upper_bound_atom_slope : float
        Add ``slope * p_max`` to the upper bound when scores have atoms.
    informative : bool
        ``threshold < 1``. False: every set holds every label, every interval spans the
        score bounds.
    coverage_holds : bool
        False when an assumption of the coverage guarantee broke or cannot be shown
        (a regression threshold at the upper score bound).
    reason : str
        Why the release is uninformative or its coverage does not hold, or empty.
    """

    threshold: Unit
    threshold_score_units: Annotated[
        float | None, optional([Interval(Real, None, None, closed="neither")])
    ]
    score_bounds: Annotated[
        tuple[float, float] | None,
        optional([Items(Interval(Real, None, None, closed="neither"), length=2)]),
    ]
    score_bounds_source: Annotated[
        str | None, optional([StrOptions({"public", "calibration data"})])
    ]
    target_level: Measure
    coverage_upper_bound: MaybeUnit
    upper_bound_atom_slope: Annotated[float, forms(Interval(Real, 0, None, closed="left"))]
    informative: Flag
    coverage_holds: Flag
    reason: Text

    def _check(self) -> None:
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
class CalibrationEntry(Record):
    """One released threshold: the whole calibration set's, or one Mondrian group's.

    Parameters
    ----------
    group : JSON value or None
        The group id (None: the whole calibration set). Public: a label of the model
        (``mondrian="class"``), a declared id (``PrivateGroupSizes.group_ids``) or an id
        whose group size was declared public.
    n_samples : int
        Scores the mechanism ran on: the calibration size, the group's public size, or
        its privately released lower bound (never the exact size of a private group).
    certificate : Certificate
        ``L(c)`` within the group.
    release : Release or None
        The release (None for a configuration never calibrated).
    """

    group: Annotated[Any, forms(None, Check("a JSON value", lambda value: True))]
    n_samples: Annotated[int, forms(Interval(Integral, 0, MAX_SAMPLES, closed="both"))]
    certificate: Certificate
    release: Release | None


@dataclass(frozen=True)
class Candidate(Record):
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
        Planned calibration guarantee, under the estimator's adjacency (a calibrated
        configuration: the guarantee its release carries).
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

    index: Count
    configuration: Configuration
    training: TrainingPrivacy
    calibration: PrivacyGuarantee
    certificate: Certificate
    formally_feasible: Flag
    status: Annotated[
        str, forms(StrOptions({"infeasible", "dominated", "skipped", "evaluated", "chosen"}))
    ]
    note: Text


@dataclass(frozen=True)
class Selection(Record):
    """Selection summary of a certificate-aware search (the paper's Sec. 4, Table 2).

    Parameters
    ----------
    rule : str
        The dominance and selection rule, in words.
    calibration_split : {"disjoint", "shared"}
        How evaluated configurations shared the calibration rows (sets the composition).
    n_checked, n_formally_feasible, n_selected, n_evaluated : int
        Grid size; configurations passing Eq. (3) on certificates alone; the feasible,
        non-dominated ones; those actually calibrated.
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

    rule: Text
    calibration_split: Annotated[str, forms(StrOptions({"disjoint", "shared"}))]
    n_checked: Count
    n_formally_feasible: Count
    n_selected: Count
    n_evaluated: Count
    chosen_index: MaybeCount
    best_coverage_margin: Annotated[float, forms(Interval(Real, -1, 1, closed="both"))]
    spent_epsilon_cal: Budget
    spent_delta_cal: Unit
    candidates: tuple[Candidate, ...]


#: The empirical diagnostics, in the order cards show them.
EMPIRICAL = (
    "n_test",
    "empirical_coverage",
    "mean_set_size",
    "singleton_rate",
    "accuracy",
    "mean_width",
)
#: The empirical diagnostics of a risk card, in the order it shows them.
RISK_EMPIRICAL = ("n_test", "empirical_risk", "mean_set_size")


@dataclass
class Diagnostics(Record):
    """Published diagnostics (the paper's diagnostic layer; not formal evidence).

    Only public or privacy-protected quantities: results on data declared public and
    the mechanism's public details; None: not measured.

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
    empirical_risk : float or None
        Risk control: mean loss of the sets (written only when measured).
    mechanism_details : dict
        Public or privacy-protected quantities the mechanism(s) reported.
    candidate_index : int or None
        Grid index, for the per-candidate entries of a search.
    candidates : tuple of Diagnostics
        Diagnostics of every configuration a search evaluated.
    """

    n_test: Annotated[int | None, optional([Interval(Integral, 0, None, closed="left")])] = None
    empirical_coverage: MaybeUnit = None
    mean_set_size: Measure = None
    singleton_rate: MaybeUnit = None
    accuracy: MaybeUnit = None
    mean_width: Measure = None
    empirical_risk: Measure = None
    mechanism_details: Mapping = field(default_factory=dict)
    candidate_index: MaybeCount = None
    candidates: tuple[Diagnostics, ...] = ()

    written_when_set: ClassVar[tuple[str, ...]] = ("empirical_risk",)


@dataclass(frozen=True)
class Signature(Record):
    """An Ed25519 signature of the card's formal layer (:meth:`ContractCard.sign`).

    Parameters
    ----------
    algorithm : {"ed25519"}
        Signature scheme.
    public_key : str
        The signer's raw public key (64 hex digits): which key signed. An auditor
        checks with a key obtained from the issuer, not with this one.
    value : str
        The signature (128 hex digits) of the bytes ``formal_sha256`` is taken over.
    """

    algorithm: Annotated[str, forms(StrOptions({"ed25519"}))]
    public_key: Annotated[str, forms(_hex(64))]
    value: Annotated[str, forms(_hex(128))]
