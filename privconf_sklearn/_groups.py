"""Group ids for Mondrian calibration: checked, encoded, looked up.

A Mondrian callable maps the rows of ``X`` to group ids. The ids must be one per row,
hashable and equal to themselves (NaN and NaT are not: a row with a NaN id would belong
to no group). Encoding turns them into integer codes ``0..G-1`` against an ordered list
of distinct ids; lookup maps new ids to those codes, with -1 for an id the list does not
hold.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from ._param_validation import short_repr

__all__ = ["GroupIndex", "check_group_ids", "check_group_list", "group_ids_of_rows"]


def _is_missing(value) -> bool:
    """Ids that are not equal to themselves (NaN, NaT, ``pandas.NA``...)."""
    try:
        differs = value != value
    except Exception:  # a comparison that raises cannot identify a group
        return True
    return not (isinstance(differs, bool | np.bool_) and not differs)


def _rows_preview(mask: np.ndarray) -> list[int]:
    return np.flatnonzero(mask)[:5].tolist()


def check_group_ids(ids, n_rows: int, *, source: str) -> np.ndarray:
    """One valid group id per row, as a one-dimensional numpy array.

    Parameters
    ----------
    ids : array-like
        What the Mondrian callable returned.
    n_rows : int
        Number of rows it was given.
    source : str
        Name used in error messages (e.g. ``"mondrian(X)"``).

    Returns
    -------
    ndarray of shape (n_rows,)
        Numeric, string, boolean or datetime dtype, or object dtype holding hashable
        values.

    Raises
    ------
    ValueError
        Wrong length or shape, or NaN / NaT ids (naming rows).
    TypeError
        Not an array, list or tuple (e.g. None, one scalar, a string, a set or a
        generator), unhashable ids (naming rows) or ids of an unsupported dtype.
    """
    if hasattr(ids, "to_numpy"):  # pandas Series / Index
        ids = ids.to_numpy()
    if hasattr(ids, "__array__"):  # numpy arrays and other array containers
        array = np.asarray(ids)
    elif isinstance(ids, Sequence) and not isinstance(ids, str | bytes):
        array = np.empty(len(ids), dtype=object)
        array[:] = list(ids)  # keeps tuples as single ids instead of making a 2-d array
    else:
        raise TypeError(
            f"{source} must return one group id per row: a 1-d array, list or tuple of "
            f"length {n_rows}; got {short_repr(ids)} of type {type(ids).__name__}."
        )
    if array.ndim != 1 or array.shape[0] != n_rows:
        raise ValueError(
            f"{source} must return one group id per row: shape ({n_rows},); got shape "
            f"{array.shape}."
        )
    kind = array.dtype.kind
    if kind in "fc":
        missing = np.isnan(array)
    elif kind in "mM":
        missing = np.isnat(array)
    elif kind in "biuUS":
        return array
    elif kind == "O":
        unhashable = np.array([not isinstance(v, Hashable) for v in array.tolist()], dtype=bool)
        if unhashable.any():
            row = int(np.flatnonzero(unhashable)[0])
            raise TypeError(
                f"{source} returned unhashable group ids, e.g. {array[row]!r} "
                f"(type {type(array[row]).__name__}) in rows {_rows_preview(unhashable)}: "
                "group ids must be hashable (numbers, strings, tuples...)."
            )
        missing = np.array([_is_missing(v) for v in array.tolist()], dtype=bool)
    else:
        raise TypeError(f"{source} returned group ids of unsupported dtype {array.dtype}.")
    if missing.any():
        raise ValueError(
            f"{source} returned NaN (or NaT) group ids in {int(missing.sum())} rows, e.g. "
            f"rows {_rows_preview(missing)}: every row needs a group id equal to itself."
        )
    return array


def check_group_list(group_ids, *, name: str) -> tuple[Any, ...]:
    """A public list of distinct, hashable, non-NaN group ids, as a tuple.

    Raises
    ------
    TypeError
        If it is not a list, tuple or one-dimensional array, or holds unhashable ids.
    ValueError
        If it is empty, holds duplicates or NaN ids.
    """
    if isinstance(group_ids, str | bytes) or not isinstance(group_ids, Sequence | np.ndarray):
        raise TypeError(
            f"{name} must be a list, tuple or 1-d array of group ids; got "
            f"{type(group_ids).__name__}."
        )
    values = check_group_ids(group_ids, len(group_ids), source=name).tolist()
    if not values:
        raise ValueError(f"{name} must hold at least one group id.")
    if len(set(values)) != len(values):
        counts = Counter(values)
        duplicates = [v for v, count in counts.items() if count > 1]
        raise ValueError(f"{name} holds duplicate group ids: {duplicates[:5]}.")
    return tuple(values)


def _distinct_in_order(values: list) -> list:
    distinct = list(dict.fromkeys(values))
    try:
        return sorted(distinct)
    except TypeError:  # mutually incomparable ids (e.g. str and int): first appearance
        return distinct


class GroupIndex:
    """Ordered distinct group ids and the code of each.

    Parameters
    ----------
    group_ids : sequence
        Distinct hashable ids, in the order of their codes.
    """

    def __init__(self, group_ids: Sequence):
        self.group_ids = tuple(group_ids)
        self._code = {group: code for code, group in enumerate(self.group_ids)}

    @classmethod
    def from_rows(cls, ids: np.ndarray) -> GroupIndex:
        """The distinct ids of checked row ids, sorted when comparable."""
        if ids.dtype.kind != "O":
            return cls(np.unique(ids).tolist())
        return cls(_distinct_in_order(ids.tolist()))

    def __len__(self) -> int:
        return len(self.group_ids)

    def codes(self, ids: np.ndarray) -> np.ndarray:
        """Code of every id; -1 for ids not in the list."""
        if ids.dtype.kind != "O" and len(self.group_ids) > 0:
            try:
                known = np.asarray(self.group_ids)
                if known.dtype.kind != "O":
                    distinct, inverse = np.unique(ids, return_inverse=True)
                    table = np.array([self._code.get(v, -1) for v in distinct.tolist()])
                    return table[inverse.reshape(-1)].astype(np.intp)
            except (TypeError, ValueError):
                pass
        return np.array([self._code.get(v, -1) for v in ids.tolist()], dtype=np.intp)


def index_rows(row_groups: np.ndarray, declared: tuple | None) -> tuple[GroupIndex, np.ndarray]:
    """The group index (the declared list, or the rows' distinct ids) and each row's code.

    With a declared list (private group sizes), a row outside it is an error naming the
    unknown ids, raised before anything is released.
    """
    index = GroupIndex.from_rows(row_groups) if declared is None else GroupIndex(declared)
    codes = index.codes(row_groups)
    if (codes < 0).any():
        unknown = list(dict.fromkeys(row_groups[codes < 0].tolist()))
        raise ValueError(
            f"mondrian(X) returned group ids not in PrivateGroupSizes.group_ids: "
            f"{unknown[:10]}; declare every group the callable can return."
        )
    return index, codes


def group_ids_of_rows(mondrian, X, n_rows: int) -> np.ndarray:
    """Call a Mondrian callable on ``X`` and check its output (:func:`check_group_ids`)."""
    name = getattr(mondrian, "__name__", type(mondrian).__name__)
    return check_group_ids(mondrian(X), n_rows, source=f"mondrian={name}: mondrian(X)")
