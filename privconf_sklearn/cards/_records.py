"""The records a contract card is made of (paper 003 Table 1).

Formal records (frozen): the configuration, the training privacy, the certificate, the
release and the selection summary of a certificate-aware search. Diagnostics (mutable,
filled by :meth:`ContractCard.evaluate`) are outside the formal layer and its digest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..privacy import PrivacyGuarantee
from ._serial import plain_value

__all__ = [
    "CANDIDATE_STATUSES",
    "Candidate",
    "Certificate",
    "ComponentSpec",
    "Configuration",
    "Diagnostics",
    "Release",
    "Selection",
    "TrainingPrivacy",
]

#: What a certificate-aware search did with each configuration of its grid.
CANDIDATE_STATUSES = ("infeasible", "dominated", "skipped", "evaluated", "chosen")


@dataclass(frozen=True)
class ComponentSpec:
    """A mechanism or score: class name and constructor parameters (JSON values).

    Parameters
    ----------
    name : str
        Class name, e.g. ``"DPAPS"``; mechanisms are looked up by it in
        :mod:`privconf_sklearn.mechanisms` to recompute ``L(c)``.
    params : dict
        ``get_params(deep=False)`` as plain values (see :func:`plain_value`).
    """

    name: str
    params: dict[str, Any]

    @classmethod
    def of(cls, component) -> ComponentSpec:
        """The spec of a scikit-learn style component instance."""
        params = plain_value(component.get_params(deep=False))
        return cls(type(component).__name__, dict(sorted(params.items())))


@dataclass(frozen=True)
class Configuration:
    """The selected calibration choices ``c = (gamma, eps_train, eps_cal, xi)``.

    Privacy coordinates are recorded separately (:class:`TrainingPrivacy` and the
    calibration :class:`~privconf_sklearn.PrivacyGuarantee`).

    Parameters
    ----------
    task : {"classification", "regression", "unspecified"}
        What the predictor outputs (sets or intervals).
    alpha : float
        Requested miscoverage.
    nominal_coverage : float
        ``gamma = 1 - alpha``.
    n_samples : int
        Calibration size (public, as in all source papers).
    mechanism : ComponentSpec
        Quantile mechanism and its parameters.
    conformity_score : ComponentSpec or None
        Conformity score and its parameters.
    estimator : str or None
        The fitted model (class path; pipelines list their steps).
    agent_sizes : tuple of int or None
        Federated mechanisms: calibration size of each agent (public, paper 004); the
        certificate depends on them. None for central mechanisms.
    """

    task: str
    alpha: float
    nominal_coverage: float
    n_samples: int
    mechanism: ComponentSpec
    conformity_score: ComponentSpec | None = None
    estimator: str | None = None
    agent_sizes: tuple[int, ...] | None = None


@dataclass(frozen=True)
class TrainingPrivacy:
    """Privacy of the model training, ``eps_train`` (and its delta).

    Parameters
    ----------
    epsilon : float
        Training privacy loss; ``inf`` when the model is not known to be private.
    delta : float
        Training delta (0 for pure DP).
    source : str
        Where the numbers come from (a diffprivlib model's ``epsilon``, the user...).
    """

    epsilon: float
    delta: float
    source: str


@dataclass(frozen=True)
class Certificate:
    """The mechanism's formal coverage certificate ``L(c)`` (paper 003 Eq. (2)).

    Parameters
    ----------
    lower_bound : float
        ``L(c)`` as the mechanism states it.
    confidence : float
        1 for a marginal bound, ``1 - b`` for one that holds with that probability.
    marginal_lower_bound : float
        ``L - (1 - confidence)``: the marginal bound Eq. (3) is checked with.
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


@dataclass(frozen=True)
class Release:
    """What the calibration released (absent on cards of uncalibrated configurations).

    Parameters
    ----------
    threshold : float
        Threshold on the public range [0, 1].
    threshold_score_units : float or None
        The same threshold in score units.
    score_bounds : tuple of float or None
        Public score range mapped to [0, 1].
    target_level : float or None
        Empirical quantile level the mechanism aimed at (e.g. ExponQ's inflated level).
    coverage_upper_bound : float or None
        Theorem upper bound on coverage for scores without atoms, when one exists.
    upper_bound_atom_slope : float
        Add ``slope * p_max`` to the upper bound when scores have atoms.
    """

    threshold: float
    threshold_score_units: float | None
    score_bounds: tuple[float, float] | None
    target_level: float | None
    coverage_upper_bound: float | None
    upper_bound_atom_slope: float


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
        Its calibration guarantee, from the mechanism's parameters alone.
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

    def __post_init__(self):
        if self.status not in CANDIDATE_STATUSES:
            raise ValueError(f"status must be one of {CANDIDATE_STATUSES}; got {self.status!r}.")


@dataclass(frozen=True)
class Selection:
    """Selection summary of a certificate-aware search (paper 003 Sec. 4, Table 2).

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
        infeasible contract (paper 003 Sec. 4).
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


@dataclass
class Diagnostics:
    """Empirical and certificate diagnostics (paper 003 Table 1, not formal evidence).

    ``None`` means not measured / not reported by the mechanism.

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
    certificate_width, observed_inflation, grid_threshold : float or None
        From the calibration (DP-APS, paper 003 Prop. 5.2): ``W(c)``, the private minus
        the non-private grid threshold, and the non-private grid threshold.
    diagnostics_are_private : bool or None
        Whether those calibration diagnostics were released under the calibration
        guarantee. ``False`` for DP-APS: they are data-dependent and disclose the
        calibration set (publish them only in a trusted audit setting, paper 003
        Sec. 5; :meth:`ContractCard.redacted` removes them).
    mechanism_details : dict
        Other quantities the mechanism reported (public parameters it resolved, such as
        ExponQ's automatic bins, and possibly data-dependent ones).
    redacted : bool
        True when non-private calibration diagnostics were removed.
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
    certificate_width: float | None = None
    observed_inflation: float | None = None
    grid_threshold: float | None = None
    diagnostics_are_private: bool | None = None
    mechanism_details: dict[str, Any] = field(default_factory=dict)
    redacted: bool = False
    candidate_index: int | None = None
    candidates: tuple[Diagnostics, ...] = ()
