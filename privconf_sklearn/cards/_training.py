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

from ._records import TrainingPrivacy

__all__ = ["check_budget", "describe_estimator", "training_privacy"]


def _components(estimator):
    """Leaf estimators of (nested) pipelines and frozen estimators, in order."""
    if isinstance(estimator, Pipeline):
        for _, step in estimator.steps:
            if step is None or (isinstance(step, str) and step == "passthrough"):
                continue
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


def check_budget(value, name: str) -> float:
    """A stated privacy budget: a real number >= 0 (``inf`` allowed), as a float."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or math.isnan(value):
        raise ValueError(f"{name} must be a real number >= 0 (inf allowed); got {value!r}.")
    if value < 0:
        raise ValueError(f"{name} must be >= 0; got {value!r}.")
    return float(value)


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
    ValueError
        If a stated budget is negative or NaN, or ``epsilon_train`` under-states the
        diffprivlib models' total.
    """
    components = list(_components(estimator))
    private = [c for c in components if _is_diffprivlib(c)]
    others = [c for c in components if not _is_diffprivlib(c)]
    reported = math.fsum(float(c.epsilon) for c in private) if private else None
    reported_delta = math.fsum(
        float(getattr(c, "delta", 0.0))
        for c in private
        if isinstance(getattr(c, "delta", 0.0), numbers.Real)
    )
    names = " + ".join(f"{type(c).__name__}.epsilon" for c in private)
    if epsilon_train is None:
        if private and not others:
            delta = (
                reported_delta if delta_train is None else check_budget(delta_train, "delta_train")
            )
            return TrainingPrivacy(reported, delta, f"diffprivlib: {names}")
        unknown = ", ".join(type(c).__name__ for c in others)
        return TrainingPrivacy(
            math.inf,
            0.0 if delta_train is None else check_budget(delta_train, "delta_train"),
            f"not known to be private ({unknown} is not a diffprivlib model); "
            "pass epsilon_train= to state it",
        )
    epsilon = check_budget(epsilon_train, "epsilon_train")
    if reported is not None and epsilon < reported:
        raise ValueError(
            f"epsilon_train={epsilon_train!r} is below the {reported:g} the diffprivlib "
            f"steps report ({names}); a card must not under-state the training budget."
        )
    if delta_train is None:
        delta = reported_delta
    else:
        delta = check_budget(delta_train, "delta_train")
        if delta < reported_delta:
            raise ValueError(
                f"delta_train={delta_train!r} is below the {reported_delta:g} the "
                "diffprivlib steps report."
            )
    note = f" (diffprivlib steps report {reported:g})" if reported is not None else ""
    return TrainingPrivacy(epsilon, delta, f"stated by the user{note}")
