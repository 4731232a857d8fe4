"""Exact JSON for card records: non-finite floats, strict typed decoding, digests.

JSON has no ``inf`` or ``NaN``. Card values that can be infinite (an unconstrained
budget, the epsilon of a non-private step, a margin of ``-inf``) are written as the
one-key object ``{"$float": "inf"}`` (``"-inf"``, ``"nan"``), so a card always
round-trips exactly and stays valid JSON for any reader. Finite floats are written with
``repr`` (shortest round-tripping form), so decoding gives back the same doubles.

Records are frozen dataclasses. :func:`record_to_dict` writes every field;
:func:`record_from_dict` reads them back checking, from the type hints, that every
field is present, no unknown field is there and each value has the declared type.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import numbers
import types
import typing
from typing import Any, Literal, Union

import numpy as np

__all__ = [
    "CardFormatError",
    "canonical_json",
    "dumps",
    "loads",
    "plain_value",
    "record_from_dict",
    "record_to_dict",
    "sha256_of",
]

_FLOAT_KEY = "$float"
_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


class CardFormatError(ValueError):
    """A serialised card does not follow the schema (missing, unknown or mistyped field)."""


def _encode(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        text = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return {_FLOAT_KEY: text}
    if isinstance(value, dict):
        return {str(key): _encode(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(item) for item in value]
    return value


def _decode_hook(obj: dict) -> Any:
    if _FLOAT_KEY in obj:
        if len(obj) != 1 or obj[_FLOAT_KEY] not in _NON_FINITE:
            raise CardFormatError(
                f"{{'{_FLOAT_KEY}': ...}} must be the only key and one of "
                f"{sorted(_NON_FINITE)}; got {obj!r}."
            )
        return _NON_FINITE[obj[_FLOAT_KEY]]
    return obj


def dumps(data: Any) -> str:
    """Readable JSON (2-space indent, fields in schema order), non-finite floats encoded."""
    return json.dumps(_encode(data), indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def loads(text: str | bytes) -> Any:
    """Inverse of :func:`dumps`; bare ``NaN``/``Infinity`` tokens are rejected."""

    def reject(token: str):
        raise CardFormatError(f"bare {token} is not JSON; cards write {{'$float': ...}}.")

    try:
        return json.loads(text, object_hook=_decode_hook, parse_constant=reject)
    except json.JSONDecodeError as exc:
        raise CardFormatError(f"not valid JSON: {exc}") from exc


def canonical_json(data: Any) -> str:
    """Key-sorted, compact, ASCII JSON: the byte string a digest is taken over."""
    return json.dumps(
        _encode(data), sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=True
    )


def sha256_of(data: Any) -> str:
    """SHA-256 (hex) of :func:`canonical_json` of ``data``."""
    return hashlib.sha256(canonical_json(data).encode("ascii")).hexdigest()


def plain_value(value: Any) -> Any:
    """``value`` as a JSON-representable Python value, or its ``repr`` marked as such.

    bool, int, float, str and None pass (numpy scalars become their Python type);
    sequences and arrays become tuples; dicts keep string keys. Anything else becomes
    ``{"$repr": repr(value)}``: recorded for the reader, not reconstructible.
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, np.ndarray | list | tuple):
        return tuple(plain_value(item) for item in value)
    if isinstance(value, dict):
        return {str(key): plain_value(item) for key, item in value.items()}
    return {"$repr": repr(value)}


def record_to_dict(record: Any) -> Any:
    """A dataclass record (recursively) as dicts, lists and plain values."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {f.name: record_to_dict(getattr(record, f.name)) for f in _init_fields(record)}
    if isinstance(record, list | tuple):
        return [record_to_dict(item) for item in record]
    if isinstance(record, dict):
        return {str(key): record_to_dict(item) for key, item in record.items()}
    return record


def record_from_dict(cls: type, data: Any, path: str) -> Any:
    """Build the dataclass ``cls`` from ``data``, checking fields and types.

    Raises
    ------
    CardFormatError
        Naming the JSON path of the first missing, unknown or mistyped field. Errors
        from the record's own validation (``__post_init__``) are re-raised as
        :class:`CardFormatError` with the path.
    """
    if not isinstance(data, dict):
        raise CardFormatError(f"{path} must be a JSON object; got {type(data).__name__}.")
    names = [f.name for f in _init_fields(cls)]
    unknown = sorted(set(data) - set(names))
    missing = [name for name in names if name not in data]
    if unknown or missing:
        raise CardFormatError(f"{path}: unknown fields {unknown}, missing fields {missing}.")
    hints = _type_hints(cls)
    kwargs = {name: _coerce(data[name], hints[name], f"{path}.{name}") for name in names}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, CardFormatError):
            raise
        raise CardFormatError(f"{path}: {exc}") from exc


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _init_fields(record) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(record) if f.init and not f.name.startswith("_")]


def _coerce(value: Any, hint: Any, path: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return _plain_json(value, path)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [arg for arg in args if arg is not type(None)]
        errors = []
        for option in options:
            try:
                return _coerce(value, option, path)
            except CardFormatError as exc:
                errors.append(str(exc))
        raise CardFormatError(errors[0] if len(errors) == 1 else f"{path}: {errors}")
    if origin is Literal:
        if value not in args:
            raise CardFormatError(f"{path} must be one of {list(args)}; got {value!r}.")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise CardFormatError(f"{path} must be true or false; got {value!r}.")
        return value
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise CardFormatError(f"{path} must be an integer; got {value!r}.")
        return value
    if hint is float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise CardFormatError(f"{path} must be a number; got {value!r}.")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise CardFormatError(f"{path} must be a string; got {value!r}.")
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise CardFormatError(f"{path} must be a JSON array; got {type(value).__name__}.")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(item, args[0], f"{path}[{i}]") for i, item in enumerate(value))
        if len(value) != len(args):
            raise CardFormatError(f"{path} must have {len(args)} entries; got {len(value)}.")
        return tuple(
            _coerce(item, arg, f"{path}[{i}]")
            for i, (item, arg) in enumerate(zip(value, args, strict=True))
        )
    if origin is dict:
        if not isinstance(value, dict):
            raise CardFormatError(f"{path} must be a JSON object; got {type(value).__name__}.")
        return {key: _coerce(item, args[1], f"{path}.{key}") for key, item in value.items()}
    if dataclasses.is_dataclass(hint):
        return record_from_dict(hint, value, path)
    raise CardFormatError(f"{path}: unsupported schema type {hint!r}.")  # pragma: no cover


def _plain_json(value: Any, path: str) -> Any:
    """A decoded JSON value for an ``Any`` field: arrays become tuples (as written)."""
    if isinstance(value, list):
        return tuple(_plain_json(item, f"{path}[{i}]") for i, item in enumerate(value))
    if isinstance(value, dict):
        return {key: _plain_json(item, f"{path}.{key}") for key, item in value.items()}
    return value
