"""Exact rational parameters of the exact samplers."""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

__all__ = ["as_fraction", "as_positive_integer"]


def as_fraction(value, name: str, *, allow_zero: bool = False) -> Fraction:
    """``value`` as an exact :class:`~fractions.Fraction`, checked finite and positive.

    A float is a dyadic rational and converts exactly; so do ints and Fractions.

    Parameters
    ----------
    value : int, float or Fraction
        The parameter (not a bool).
    name : str
        Its name, for the error message.
    allow_zero : bool, default=False
        Whether 0 is accepted.

    Returns
    -------
    Fraction

    Raises
    ------
    ValueError
        If ``value`` is not a finite real number that is positive (or zero when allowed).
    """
    exact = None
    if isinstance(value, bool):
        pass
    elif isinstance(value, Fraction):
        exact = value
    elif isinstance(value, numbers.Integral):
        exact = Fraction(int(value))
    elif isinstance(value, numbers.Real) and math.isfinite(float(value)):
        exact = Fraction(float(value))  # a float is a dyadic rational: exact
    if exact is not None and (exact > 0 or (allow_zero and exact == 0)):
        return exact
    bound = ">= 0" if allow_zero else "> 0"
    raise ValueError(f"{name} must be a finite real number {bound}; got {value!r}.")


def as_positive_integer(value, name: str) -> int:
    """``value`` as a Python int >= 1 (an int or numpy integer, not a bool)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 1:
        return int(value)
    raise ValueError(f"{name} must be an integer >= 1; got {value!r}.")
