"""The training privacy ``eps_train`` of a fitted model, for the card.

diffprivlib steps trained on the same rows compose sequentially (their ``epsilon`` add up);
any other step may read the data unprotected: ``inf`` unless the user states a budget.
"""

from __future__ import annotations

import math
import numbers

from sklearn.pipeline import Pipeline

from .._param_validation import validate_params
from ._records import BUDGET, UNIT, TrainingPrivacy, optional

__all__ = ["check_stated", "describe_estimator", "stated_training", "training_privacy"]

#: The constraints of a stated training budget: epsilon >= 0 (inf allowed), delta in
#: [0, 1], or None (not stated).
STATED_BUDGET = {"epsilon_train": optional(BUDGET), "delta_train": optional(UNIT)}

#: When a diffprivlib model's ``epsilon`` holds: a fitted model keeps no trace of bounds
#: computed from its training data (diffprivlib warns at fit time only).
CONDITION = (
    ", if fitted with data-independent bounds (a PrivacyLeakWarning at fit time means it was not)"
)


def _components(model) -> list:
    """Leaf estimators of (nested) pipelines and frozen estimators, in order."""
    if type(model).__name__ == "FrozenEstimator" and getattr(model, "estimator", None) is not None:
        return _components(model.estimator)
    if not isinstance(model, Pipeline):
        return [model]
    steps = [s for _, s in model.steps if s is not None and s != "passthrough"]
    return [leaf for step in steps for leaf in _components(step)]


def _is_diffprivlib(component) -> bool:
    from_diffprivlib = type(component).__module__.split(".")[0] == "diffprivlib"
    return from_diffprivlib and isinstance(getattr(component, "epsilon", None), numbers.Real)


def describe_estimator(estimator) -> str:
    """Class path of the model; pipelines list their steps."""
    if isinstance(estimator, Pipeline):
        return f"Pipeline({', '.join(map(describe_estimator, _components(estimator)))})"
    return f"{type(estimator).__module__}.{type(estimator).__qualname__}"


def check_stated(
    epsilon_train, delta_train, owner: str = "ContractCard"
) -> tuple[float | None, float | None]:
    """A stated training budget: epsilon >= 0 (inf allowed) and delta in [0, 1], or None."""
    stated = {"epsilon_train": epsilon_train, "delta_train": delta_train}
    checked = validate_params(STATED_BUDGET, stated, owner)
    return checked["epsilon_train"], checked["delta_train"]


def stated_training(epsilon_train, delta_train) -> TrainingPrivacy:
    """Training privacy stated by the user for a card without a model on record."""
    epsilon, delta = check_stated(epsilon_train, delta_train)
    source = "not stated (no model on record)" if epsilon is None else "stated by the user"
    epsilon = math.inf if epsilon is None else epsilon
    return TrainingPrivacy(epsilon, 0.0 if delta is None else delta, source)


def training_privacy(estimator, epsilon_train=None, delta_train=None) -> TrainingPrivacy:
    """Read the training privacy of ``estimator`` (diffprivlib steps), or take the stated one.

    None takes the steps' sums (``inf`` if a step is not diffprivlib); a stated budget below
    them raises ValueError. diffprivlib's training-time ``PrivacyLeakWarning`` is not seen.
    """
    epsilon, delta = check_stated(epsilon_train, delta_train)
    components = _components(estimator)
    private = [c for c in components if _is_diffprivlib(c)]
    others = ", ".join(type(c).__name__ for c in components if not _is_diffprivlib(c))
    if epsilon is None and (others or not private):
        reason = f"not known to be private ({others} is not a diffprivlib model)"
        delta = 0.0 if delta is None else delta
        return TrainingPrivacy(math.inf, delta, f"{reason}; pass epsilon_train= to state it")
    reported, reported_delta = _reported_budget(private)
    delta = reported_delta if delta is None else delta
    if epsilon is None:
        names = " + ".join(f"{type(c).__name__}.epsilon" for c in private)
        return TrainingPrivacy(reported, delta, f"diffprivlib: {names}{CONDITION}")
    _check_not_under_stated(epsilon, delta, reported, reported_delta)
    note = f" (diffprivlib steps report {reported:g})" if private else ""
    return TrainingPrivacy(epsilon, delta, f"stated by the user{note}")


def _reported_budget(private: list) -> tuple[float, float]:
    """The diffprivlib steps' ``epsilon`` and ``delta``, each summed (sequential composition)."""
    reported = math.fsum(float(c.epsilon) for c in private)
    deltas = [getattr(c, "delta", 0.0) for c in private]
    return reported, math.fsum(float(d) for d in deltas if isinstance(d, numbers.Real))


def _check_not_under_stated(epsilon: float, delta: float, reported: float, reported_delta: float):
    """Refuse a stated training budget below what the diffprivlib steps report."""
    for name, value, floor in (("epsilon", epsilon, reported), ("delta", delta, reported_delta)):
        if value < floor:
            raise ValueError(
                f"{name}_train={value!r} under-states the {floor:g} the diffprivlib steps report."
            )
