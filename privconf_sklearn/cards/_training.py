"""The training privacy ``eps_train`` of a fitted model, for the card.

diffprivlib models carry their budget as ``epsilon``. A pipeline of diffprivlib steps
trained on the same rows composes sequentially, so its ``eps_train`` is the sum. A step
that is not a diffprivlib model may have read the training data without protection, so
the automatic reading refuses to call the model private (``epsilon = inf``) unless the
user states the budget. The reading trusts the model's stated ``epsilon``: a
diffprivlib ``PrivacyLeakWarning`` raised at training time (e.g. feature bounds taken
from the data) is not visible afterwards.
"""

from __future__ import annotations

import math
import numbers

from sklearn.pipeline import Pipeline

from .._validation import validate_params
from ._records import BUDGET, UNIT, TrainingPrivacy, optional

__all__ = ["check_stated", "describe_estimator", "stated_training", "training_privacy"]


def _components(estimator):
    """Leaf estimators of (nested) pipelines and frozen estimators, in order."""
    if isinstance(estimator, Pipeline):
        for _, step in estimator.steps:
            if step is not None and not (isinstance(step, str) and step == "passthrough"):
                yield from _components(step)
        return
    inner = getattr(estimator, "estimator", None)
    if type(estimator).__name__ == "FrozenEstimator" and inner is not None:
        yield from _components(inner)
        return
    yield estimator


def _is_diffprivlib(component) -> bool:
    return type(component).__module__.split(".")[0] == "diffprivlib" and isinstance(
        getattr(component, "epsilon", None), numbers.Real
    )


def _class_path(component) -> str:
    return f"{type(component).__module__}.{type(component).__qualname__}"


def describe_estimator(estimator) -> str:
    """Class path of the model; pipelines list their steps."""
    if isinstance(estimator, Pipeline):
        return f"Pipeline({', '.join(_class_path(c) for c in _components(estimator))})"
    return _class_path(estimator)


def check_stated(epsilon_train, delta_train) -> tuple[float | None, float | None]:
    """A stated training budget: epsilon >= 0 (inf allowed) and delta in [0, 1], or None."""
    checked = validate_params(
        "ContractCard",
        {"epsilon_train": optional(BUDGET), "delta_train": optional(UNIT)},
        {"epsilon_train": epsilon_train, "delta_train": delta_train},
    )
    return checked["epsilon_train"], checked["delta_train"]


def stated_training(epsilon_train, delta_train) -> TrainingPrivacy:
    """Training privacy stated by the user for a card without a model on record."""
    epsilon, delta = check_stated(epsilon_train, delta_train)
    delta = 0.0 if delta is None else delta
    if epsilon is None:
        return TrainingPrivacy(math.inf, delta, "not stated (no model on record)")
    return TrainingPrivacy(epsilon, delta, "stated by the user")


def training_privacy(estimator, epsilon_train=None, delta_train=None) -> TrainingPrivacy:
    """Read or take the training privacy of ``estimator``.

    Parameters
    ----------
    estimator : estimator
        The fitted model (a pipeline is searched step by step).
    epsilon_train : float or None, default=None
        Training budget stated by the user. None reads it from diffprivlib models.
        A stated value below what diffprivlib models report is refused.
    delta_train : float or None, default=None
        Training delta stated by the user. None: the diffprivlib models' ``delta``
        attributes (0 for the pure-DP ones), or 0 for a user-stated epsilon.

    Returns
    -------
    TrainingPrivacy

    Raises
    ------
    TypeError, ValueError
        If a stated budget is not a number, negative or NaN, or under-states the
        diffprivlib models' total.
    """
    epsilon, delta = check_stated(epsilon_train, delta_train)
    components = list(_components(estimator))
    private = [c for c in components if _is_diffprivlib(c)]
    others = ", ".join(type(c).__name__ for c in components if not _is_diffprivlib(c))
    reported = math.fsum(float(c.epsilon) for c in private)
    reported_delta = math.fsum(
        float(d) for c in private if isinstance(d := getattr(c, "delta", 0.0), numbers.Real)
    )
    names = " + ".join(f"{type(c).__name__}.epsilon" for c in private)
    if epsilon is None:
        if private and not others:
            delta = reported_delta if delta is None else delta
            return TrainingPrivacy(reported, delta, f"diffprivlib: {names}")
        return TrainingPrivacy(
            math.inf,
            0.0 if delta is None else delta,
            f"not known to be private ({others} is not a diffprivlib model); "
            "pass epsilon_train= to state it",
        )
    if private and epsilon < reported:
        raise ValueError(
            f"epsilon_train={epsilon_train!r} is below the {reported:g} the diffprivlib "
            f"steps report ({names}); a card must not under-state the training budget."
        )
    if delta is not None and delta < reported_delta:
        raise ValueError(
            f"delta_train={delta_train!r} is below the {reported_delta:g} the "
            "diffprivlib steps report."
        )
    note = f" (diffprivlib steps report {reported:g})" if private else ""
    delta = reported_delta if delta is None else delta
    return TrainingPrivacy(epsilon, delta, f"stated by the user{note}")
