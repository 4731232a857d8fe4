"""JSON for cards: a float codec for infinities, strict bounded parsing, digests.

JSON has no ``inf``. A card value that can be infinite (an unconstrained budget, the
epsilon of a non-private step, a margin of ``-inf``) is written as the one-key object
``{"$float": "inf"}`` (or ``"-inf"``); finite floats are written with ``repr``, so a
card round-trips exactly. NaN never appears on a card.

Reading is strict and bounded, so that no crafted input can crash or exhaust a reader:
at most :data:`MAX_CHARS` characters and :data:`MAX_DEPTH` levels of nesting, no
duplicate keys, no bare ``NaN``/``Infinity`` tokens, integers of at most
:data:`MAX_INT_DIGITS` digits and floats that are finite. Violations raise
:class:`CardFormatError`.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from typing import Any

import numpy as np

__all__ = [
    "MAX_CHARS",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "CardFormatError",
    "canonical_bytes",
    "decode",
    "dumps",
    "loads",
    "plain_value",
    "sha256_of",
]

#: Largest card text read (characters).
MAX_CHARS = 16 * 2**20
#: Deepest nesting of objects and arrays in a card.
MAX_DEPTH = 32
#: Most digits of an integer in a card.
MAX_INT_DIGITS = 20

_FLOAT = "$float"
_INFINITIES = {"inf": math.inf, "-inf": -math.inf}


class CardFormatError(ValueError):
    """A serialised card is unreadable or does not follow the schema (names the field)."""


def _encode(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return {_FLOAT: "inf" if value > 0 else "-inf"}
    if isinstance(value, dict):
        return {str(key): _encode(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(item) for item in value]
    return value


def dumps(data: Any) -> str:
    """Readable JSON (2-space indent, fields in schema order), infinities encoded."""
    return json.dumps(_encode(data), indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def canonical_bytes(data: Any) -> bytes:
    """Key-sorted, compact, ASCII JSON: the bytes a digest or signature is taken over."""
    text = json.dumps(
        _encode(data), sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=True
    )
    return text.encode("ascii")


def sha256_of(data: Any) -> str:
    """SHA-256 (hex) of :func:`canonical_bytes` of ``data``."""
    return hashlib.sha256(canonical_bytes(data)).hexdigest()


def _object(pairs: list[tuple[str, Any]]) -> dict:
    data = dict(pairs)
    if len(data) != len(pairs):
        keys = [key for key, _ in pairs]
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        raise CardFormatError(f"duplicate keys {repeated[:5]} in a JSON object.")
    return data


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise CardFormatError(f"an integer of {len(text)} digits is out of range.")
    return int(text)


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise CardFormatError(f"the number {text[:30]} is out of the float64 range.")
    return value


def _constant(token: str):
    raise CardFormatError(f"bare {token} is not JSON; cards write {{'{_FLOAT}': 'inf'}}.")


def loads(text: str | bytes) -> Any:
    """Parse card JSON within the limits above and :func:`decode` it."""
    if len(text) > MAX_CHARS:
        raise CardFormatError(f"a card has at most {MAX_CHARS} characters; got {len(text)}.")
    try:
        data = json.loads(
            text,
            object_pairs_hook=_object,
            parse_int=_integer,
            parse_float=_finite,
            parse_constant=_constant,
        )
    except json.JSONDecodeError as exc:
        raise CardFormatError(f"not valid JSON: {exc}") from exc
    except RecursionError:
        raise CardFormatError(f"nested deeper than {MAX_DEPTH} levels.") from None
    return decode(data)


def decode(data: Any, path: str = "card", depth: int = 0) -> Any:
    """Parsed JSON as card values: ``{"$float": "inf"}`` to floats, arrays to tuples.

    Also checks a parsed value given directly (``verify_card(json.loads(text))``):
    nesting depth, JSON types only, string keys, no NaN. Idempotent. Errors name the
    path.
    """
    if depth > MAX_DEPTH:
        raise CardFormatError(f"{path}: nested deeper than {MAX_DEPTH} levels.")
    if isinstance(data, dict):
        if _FLOAT in data:
            if len(data) != 1 or data[_FLOAT] not in _INFINITIES:
                raise CardFormatError(
                    f"{path}: {{'{_FLOAT}': ...}} must be the only key, with value 'inf' or '-inf'."
                )
            return _INFINITIES[data[_FLOAT]]
        if not all(isinstance(key, str) for key in data):
            raise CardFormatError(f"{path}: JSON object keys must be strings.")
        return {key: decode(item, f"{path}.{key}", depth + 1) for key, item in data.items()}
    if isinstance(data, list | tuple):
        return tuple(decode(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(data))
    if isinstance(data, float) and math.isnan(data):
        raise CardFormatError(f"{path}: NaN is not a card value.")
    if data is None or isinstance(data, bool | int | float | str):
        return data
    raise CardFormatError(f"{path}: {type(data).__name__} is not a JSON value.")


def plain_value(value: Any) -> Any:
    """``value`` as a JSON-representable value, or its ``repr`` marked as such.

    None, bool, int, float and str pass (numpy scalars become Python ones); sequences
    and arrays become tuples; dicts keep string keys. Anything else becomes
    ``{"$repr": repr(value)}``: recorded for the reader, not reconstructible.
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value) if not math.isnan(value) else {"$repr": "nan"}
    if isinstance(value, np.ndarray | list | tuple):
        return tuple(plain_value(item) for item in value)
    if isinstance(value, dict):
        return {str(key): plain_value(item) for key, item in value.items()}
    return {"$repr": repr(value)}
