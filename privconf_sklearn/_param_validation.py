"""Parameter validation, scikit-learn's way: its constraints, its error, its messages.

A class declares the accepted forms of its parameters in ``_parameter_constraints``
(parameter name -> list of constraints, any one of which suffices) with scikit-learn's
own constraints (:mod:`sklearn.utils._param_validation`), which mean here exactly what
they mean there: ``None``, a type (any instance of it), ``"boolean"`` (``bool`` or
``numpy.bool_``), ``callable``, ``StrOptions({...})``, ``Options(type, {...})``,
``HasMethods([...])``, ``Hidden(...)``, ``"no_validation"``. One public call validates
once, with :func:`validate_params`, and passes the returned values down; internal
helpers never validate again. A value no constraint accepts raises scikit-learn's
:class:`~sklearn.utils._param_validation.InvalidParameterError` (a ``ValueError`` and a
``TypeError``) with scikit-learn's message, e.g. ``The 'alpha' parameter of ExponQ.calibrate
must be a float in the range (0.0, 1.0). Got 2 instead.``

Why scikit-learn's constraints and a local loop: the constraint classes are the same in
scikit-learn 1.6 to 1.9 (the module differs only in a sparse-matrix name and in
accepting ``float("nan")`` for ``"nan"``), so the package uses them directly, with no
fallback to maintain. Its ``validate_parameter_constraints`` (and so
``BaseEstimator._validate_params``) accepts only scikit-learn's own constraint classes
and returns nothing; :func:`validate_params` is a copy of that loop (same order, same
message) that also accepts the package's constraints, subclasses of scikit-learn's
``_Constraint``, and returns the values in canonical form. ``tests/test_param_validation.py``
checks, on every scikit-learn version CI runs, that its errors are scikit-learn's.

Deviations from scikit-learn, all deliberate:

- :class:`Interval` is scikit-learn's ``Interval`` except that a bool is never a number:
  scikit-learn's ``Interval(Real, ...)`` and ``Interval(Integral, ...)`` accept ``True``
  as 1, this one rejects ``bool`` and ``numpy.bool_`` (the package's rule: bools are not
  numbers, strings are not booleans). Over the reals it also rejects numbers that are
  not float64 numbers (an int beyond 1.8e308), which would otherwise overflow later.
  Its bounds mean what scikit-learn's mean: ``None`` is an infinite end, which admits
  ``inf`` only when the interval is closed there (``Interval(Real, 0, None,
  closed="neither")``: finite and > 0; ``closed="both"``: >= 0, ``inf`` included).
- :func:`validate_params` returns the values in canonical form: a value accepted by an
  :class:`Interval` becomes a Python ``int`` or ``float``, other numpy scalars their
  Python scalar (``numpy.bool_`` -> ``bool``), and a constraint with a ``convert``
  method converts its values; the estimator's own attributes stay as given
  (``get_params`` returns what the user set).
- The offending value is shown by a ``repr`` cut to :data:`REPR_LIMIT` characters (an
  integer of more than 128 bits by its size), so that no input makes the message
  itself huge or fail.
- scikit-learn's ``skip_parameter_validation`` configuration is not honoured: a privacy
  parameter is always checked.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.utils._param_validation import (
    HasMethods,
    Hidden,
    InvalidParameterError,
    Options,
    RealNotInt,
    StrOptions,
    _Constraint,
    make_constraint,
)
from sklearn.utils._param_validation import Interval as _ScikitLearnInterval

__all__ = [
    "Bounds",
    "Constraint",
    "HasMethods",
    "Hidden",
    "Interval",
    "InvalidParameterError",
    "Options",
    "RealNotInt",
    "StrOptions",
    "canonical_value",
    "check_alpha",
    "constraint_of",
    "short_repr",
    "validate_params",
]

#: Longest ``repr`` of an offending value an error message shows.
REPR_LIMIT = 80


class Constraint(_Constraint):
    """Base class of the package's own constraints (scikit-learn's ``_Constraint``).

    A subclass implements ``is_satisfied_by(val)`` and ``__str__``, and may add
    ``convert(val)`` (the value in canonical form, see :func:`validate_params`).
    """


class Interval(_ScikitLearnInterval):
    """scikit-learn's ``Interval``, except that a bool is never a number.

    Parameters
    ----------
    type : {numbers.Integral, numbers.Real, RealNotInt}
        The numbers of the interval, as in scikit-learn.
    left, right : float, int or None
        The ends, as in scikit-learn (None: infinite).
    closed : {"left", "right", "both", "neither"}
        Which ends belong to the interval.
    """

    def is_satisfied_by(self, val) -> bool:
        """scikit-learn's test, after rejecting bools (and, over the reals, non-float64s)."""
        if isinstance(val, bool | np.bool_) or not isinstance(val, self.type):
            return False
        if self.type is Integral or isinstance(val, Integral):
            if self.type is not Integral and not _is_float64(val):
                return False
            return val in self
        # Non-integral reals (float, numpy floats, Fraction...) compare as float64.
        return _is_float64(val) and float(val) in self

    def convert(self, val) -> int | float:
        """A Python ``int`` (integer intervals) or ``float``."""
        return int(val) if self.type is Integral else float(val)


class Bounds(Constraint):
    """A pair ``(low, high)`` of finite real numbers (never bools) with ``low < high``.

    A tuple, list or one-dimensional array of two numbers whose difference is finite
    too, within ``[lowest, highest]``; converted to a pair of Python floats.

    Parameters
    ----------
    lowest, highest : float, default=(-inf, inf)
        The range the pair must lie in.
    """

    def __init__(self, lowest: float = -math.inf, highest: float = math.inf):
        super().__init__()
        self.lowest, self.highest = lowest, highest

    def is_satisfied_by(self, val) -> bool:
        """Two finite real numbers ``lowest <= low < high <= highest``."""
        if not isinstance(val, tuple | list | np.ndarray) or np.ndim(val) != 1 or len(val) != 2:
            return False
        if not all(
            isinstance(v, Real) and not isinstance(v, bool | np.bool_) and _is_float64(v)
            for v in np.asarray(val, dtype=object).tolist()
        ):
            return False
        low, high = float(val[0]), float(val[1])
        finite = math.isfinite(low) and math.isfinite(high) and math.isfinite(high - low)
        return finite and self.lowest <= low < high <= self.highest

    def convert(self, val) -> tuple[float, float]:
        """``(float(low), float(high))``."""
        return float(val[0]), float(val[1])

    def __str__(self) -> str:
        if math.isinf(self.lowest) and math.isinf(self.highest):
            return "a pair (low, high) of finite real numbers with low < high"
        return (
            f"a pair (low, high) of real numbers with {self.lowest!r} <= low < high <= "
            f"{self.highest!r}"
        )


def _is_float64(val) -> bool:
    try:
        float(val)
    except (OverflowError, TypeError, ValueError):
        return False
    return True


def short_repr(value: Any, limit: int = REPR_LIMIT) -> str:
    """``repr(value)``, cut to ``limit`` characters (huge integers: their size)."""
    if isinstance(value, int) and value.bit_length() > 128:
        return f"<integer with {value.bit_length()} bits>"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def constraint_of(constraint) -> _Constraint:
    """scikit-learn's ``make_constraint``, also accepting the package's constraints.

    Any instance of scikit-learn's ``_Constraint`` (the base class of the package's
    constraints) is returned as it is; ``Hidden`` hides what it wraps.
    """
    if isinstance(constraint, Hidden):
        inner = constraint_of(constraint.constraint)
        inner.hidden = True
        return inner
    if isinstance(constraint, _Constraint):  # the package's constraints (and scikit-learn's)
        return constraint
    return make_constraint(constraint)


def canonical_value(constraint: _Constraint, value):
    """``value``, accepted by ``constraint``, in canonical form (see the module)."""
    convert = getattr(constraint, "convert", None)
    if convert is not None:
        return convert(value)
    return value.item() if isinstance(value, np.generic) else value


def validate_params(
    parameter_constraints: dict[str, Any], params: dict[str, Any], caller_name: str
) -> dict[str, Any]:
    """Check ``params`` against ``parameter_constraints``; return them in canonical form.

    scikit-learn's ``validate_parameter_constraints``, parameter by parameter in the order
    of ``params``: a parameter without constraints, or with ``"no_validation"``, is not
    checked (and not returned).

    Parameters
    ----------
    parameter_constraints : dict
        Parameter name -> list of constraints (any one suffices), or ``"no_validation"``.
    params : dict
        Parameter name -> value (e.g. ``estimator.get_params(deep=False)``).
    caller_name : str
        The class, method or function named in the error message.

    Returns
    -------
    dict
        Each checked parameter's value in canonical form (see the module description).

    Raises
    ------
    InvalidParameterError
        For the first parameter no constraint accepts, naming it, the accepted forms and
        the value.
    """
    checked = {}
    for name, value in params.items():
        constraints = parameter_constraints.get(name, "no_validation")
        if isinstance(constraints, str) and constraints == "no_validation":
            continue
        constraints = [constraint_of(constraint) for constraint in constraints]
        accepted = next((c for c in constraints if c.is_satisfied_by(value)), None)
        if accepted is None:
            shown = [str(c) for c in constraints if not c.hidden]
            expected = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
            raise InvalidParameterError(
                f"The {name!r} parameter of {caller_name} must be {expected}. "
                f"Got {short_repr(value)} instead."
            )
        checked[name] = canonical_value(accepted, value)
    return checked


#: A miscoverage level: a real number in the open interval (0, 1).
ALPHA = [Interval(Real, 0, 1, closed="neither")]


def check_alpha(alpha, caller_name: str) -> float:
    """A miscoverage level given to a public function or method, as a Python float.

    Parameters
    ----------
    alpha : object
        The value to check.
    caller_name : str
        The function or method it was given to (named in the error).

    Returns
    -------
    float

    Raises
    ------
    InvalidParameterError
        If ``alpha`` is not a real number (never a bool) in (0, 1).
    """
    return validate_params({"alpha": ALPHA}, {"alpha": alpha}, caller_name)["alpha"]
