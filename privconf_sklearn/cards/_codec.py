"""JSON for cards: a float codec for infinities, strict bounded parsing.

JSON has no ``inf``: cards write ``{"$float": "inf"}`` (or ``"-inf"``) and finite floats
with ``repr``, so a card round-trips exactly; NaN never appears. Reading is strict and
bounded (:data:`MAX_CHARS` characters, :data:`MAX_DEPTH` levels, no duplicate keys, no
bare ``NaN``/``Infinity``, integers of at most :data:`MAX_INT_DIGITS` digits, finite
floats), so that no crafted input can crash or exhaust a reader.
"""

from __future__ import annotations

import json
import math
import numbers
from collections import Counter
from typing import Any

import numpy as np

__all__ = ["CardFormatError", "canonical_bytes", "decode", "dumps", "loads", "plain_value"]

#: Largest card text read (characters).
MAX_CHARS = 16 * 2**20
#: Deepest nesting of objects and arrays in a card.
MAX_DEPTH = 32
#: Most digits of an integer in a card.
MAX_INT_DIGITS = 20
_INFINITIES = {"inf": math.inf, "-inf": -math.inf}


class CardFormatError(ValueError):
    """A serialised card is unreadable or does not follow the schema (names the field)."""


def _encode(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return {"$float": "inf" if value > 0 else "-inf"}
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
    text = json.dumps(_encode(data), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return text.encode("ascii")


def _object(pairs: list[tuple[str, Any]]) -> dict:
    data = dict(pairs)
    if len(data) != len(pairs):
        repeated = sorted(key for key, count in Counter(k for k, _ in pairs).items() if count > 1)
        raise CardFormatError(f"duplicate keys {repeated[:5]} in a JSON object.")
    return data


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise CardFormatError(f"an integer of {len(text)} digits is out of range.")
    return int(text)


def _finite(text: str) -> float:
    if math.isinf(value := float(text)):
        raise CardFormatError(f"the number {text[:30]} is out of the float64 range.")
    return value


def _constant(token: str):
    if token == "NaN":
        raise CardFormatError("bare NaN is not JSON, and no card field is NaN.")
    raise CardFormatError(f"bare {token} is not JSON; cards write {{'$float': 'inf'}}.")


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
    """Parsed JSON as card values (``{"$float": "inf"}`` to floats, arrays to tuples).

    Also checks a value parsed elsewhere (depth, JSON types, no NaN); idempotent.
    """
    if depth > MAX_DEPTH:
        raise CardFormatError(f"{path}: nested deeper than {MAX_DEPTH} levels.")
    if isinstance(data, dict):
        if "$float" in data:
            if len(data) != 1 or data["$float"] not in ("inf", "-inf"):
                raise CardFormatError(
                    f"{path}: {{'$float': ...}} must be the only key, with value 'inf' or '-inf'."
                )
            return _INFINITIES[data["$float"]]
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
    """``value`` as JSON-representable card values, or ``{"$repr": repr(value)}``.

    None, bools, numbers and strings pass (numpy scalars become Python ones, NaN its
    ``$repr``); sequences and arrays become tuples; dicts keep string keys.
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
