"""Plans and messages as JSON: canonical form, digests, strict parsing.

A plan travels as a dict of JSON types with its protocol, the protocol version, a round
id (a random nonce the server draws for each round, :func:`secrets.token_hex`) and a
SHA-256 digest of its canonical JSON (sorted keys, no whitespace, no NaN, the round id
included). Every message carries the version, the round id and the digest of the plan
it was made for (:func:`plan_digest`, the plan's content without the round id). Parsing is strict:
exact key sets, exact types (a bool is never a number, a number never a bool), values
in range, bounded lengths; wrong types raise ``TypeError``, wrong values ``ValueError``,
both naming the field.

The digest protects against accidents and binds messages to one plan; it is not a
signature (anyone can recompute it). The server therefore re-derives the plan from its
public inputs (:func:`verified_plan`), and agents check only what protects them
(:mod:`._protocol`).
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
import sys
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from ..mechanisms.fedcp import (
    AGENT_SCALINGS,
    FEDCP2_QQ,
    FEDCP_QQ,
    MAX_AGENT_SIZE,
    MAX_AGENTS,
    MAX_BINS,
    FedCP2QQPlan,
    FedCPQQPlan,
    FederatedPlan,
    make_plan,
)
from ._ledger import ROUND_ID

__all__ = [
    "PROTOCOL_VERSION",
    "message_fields",
    "plan_digest",
    "plan_from_dict",
    "plan_to_dict",
    "received_plan",
    "shown",
    "verified_plan",
]

#: Version of the plan and message format; agents and server must agree on it.
#: Version 2: plans carry a digest, messages the digest of their plan. Version 3: plans
#: carry a round id, messages echo it.
PROTOCOL_VERSION = 3

_PLAN_TYPES: dict[str, type[FedCPQQPlan] | type[FedCP2QQPlan]] = {
    FEDCP_QQ: FedCPQQPlan,
    FEDCP2_QQ: FedCP2QQPlan,
}

_META = ("protocol", "version", "round", "digest")


# ---------------------------------------------------------------- canonical form
def _canonical(payload: dict[str, Any]) -> bytes:
    return json.dumps(
        payload, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=True
    ).encode()


def _payload(plan: FederatedPlan) -> dict[str, Any]:
    out: dict[str, Any] = {"protocol": plan.protocol, "version": PROTOCOL_VERSION}
    for item in fields(plan):
        value = getattr(plan, item.name)
        out[item.name] = list(value) if isinstance(value, tuple) else value
    return out


def plan_digest(plan: FederatedPlan) -> str:
    """SHA-256 (hex) of the plan's canonical JSON (every field, protocol and version).

    The digest of the plan's content: the same for every round of the same plan.
    """
    return hashlib.sha256(_canonical(_payload(plan))).hexdigest()


def plan_to_dict(plan: FederatedPlan, *, round_id=None) -> dict[str, Any]:
    """The plan of one round as a dict of JSON types, ready to send to every agent.

    Each call opens a new round: send the same dict to every agent, and pass it to
    :func:`~privconf_sklearn.federated.aggregate` with their messages.

    Parameters
    ----------
    plan : FedCPQQPlan or FedCP2QQPlan
    round_id : str or None, default=None
        The round's id, 32 lowercase hexadecimal digits; None (the default, and the
        only sensible choice outside tests) draws a fresh one with
        ``secrets.token_hex(16)``. Agents answer a round id, and a plan, once.

    Returns
    -------
    dict
        The plan's fields with ``protocol``, ``version``, ``round`` and ``digest`` (of
        all of them), ready for ``json.dumps``; :func:`plan_from_dict` reads it back.
    """
    if not isinstance(plan, FedCPQQPlan | FedCP2QQPlan):
        raise TypeError(f"plan must be a FedCPQQPlan or FedCP2QQPlan; got {type(plan).__name__}.")
    if round_id is None:
        round_id = secrets.token_hex(16)
    _round_id(round_id)
    payload = _payload(plan)
    payload["round"] = round_id
    payload["digest"] = hashlib.sha256(_canonical(payload)).hexdigest()
    return payload


def _round_id(value) -> str:
    """A round id: 32 lowercase hexadecimal digits."""
    if not isinstance(value, str):
        raise TypeError(f"plan field 'round' must be a string; got {type(value).__name__}.")
    if ROUND_ID.fullmatch(value) is None:
        raise ValueError(
            f"plan field 'round' must be 32 lowercase hexadecimal digits; got {value[:40]!r}."
        )
    return value


# ------------------------------------------------------------- typed fields
def shown(value) -> str:
    """``repr(value)``, or the size of an integer too large to print in an error."""
    if isinstance(value, int) and abs(value) > 10**30:
        return f"an integer of about 10^{value.bit_length() * 0.30103:.0f}"
    return repr(value)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _integer(name: str, value, low: int, high: int) -> int:
    if not _is_int(value):
        raise TypeError(f"plan field {name!r} must be an integer; got {type(value).__name__}.")
    if not low <= value <= high:
        raise ValueError(f"plan field {name!r} must lie in [{low}, {high}]; got {shown(value)}.")
    return value


def _real(name: str, value, low: float, high: float, *, open_low=False) -> float:
    """A finite JSON number in the range (any integer or float; compared before conversion)."""
    if not _is_real(value):
        raise TypeError(f"plan field {name!r} must be a number; got {type(value).__name__}.")
    inside = (low < value if open_low else low <= value) and value <= min(high, sys.float_info.max)
    if not inside:  # NaN and infinities too
        bracket = "(" if open_low else "["
        raise ValueError(
            f"plan field {name!r} must lie in {bracket}{low:g}, {high:g}]; got {shown(value)}."
        )
    return float(value)


def _boolean(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"plan field {name!r} must be a bool; got {type(value).__name__}.")
    return value


def _text(name: str, value, limit: int = 10_000) -> str:
    if not isinstance(value, str):
        raise TypeError(f"plan field {name!r} must be a string; got {type(value).__name__}.")
    if len(value) > limit:
        raise ValueError(f"plan field {name!r} is longer than {limit} characters.")
    return value


def _sequence(name: str, value, length: int | None) -> list:
    if not isinstance(value, list | tuple):
        raise TypeError(f"plan field {name!r} must be a list; got {type(value).__name__}.")
    if len(value) > MAX_AGENTS or (length is not None and len(value) != length):
        expected = f"{length}" if length is not None else f"at most {MAX_AGENTS}"
        raise ValueError(f"plan field {name!r} must have {expected} entries; got {len(value)}.")
    return list(value)


def _integers(name, value, length, low, high) -> tuple[int, ...]:
    return tuple(
        _integer(f"{name}[{i}]", v, low, high) for i, v in enumerate(_sequence(name, value, length))
    )


def _auto_or(name: str, value, parse):
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"plan field {name!r} must be 'auto' or a number; got {value!r}.")
        return value
    return parse(name, value)


# --------------------------------------------------------------- parsing
def _common(data: dict[str, Any]) -> dict[str, Any]:
    sizes = _sequence("agent_sizes", data["agent_sizes"], None)
    if len(sizes) < 2:
        raise ValueError(
            f"plan field 'agent_sizes' must list at least two agents; got {len(sizes)}."
        )
    values: dict[str, Any] = {
        "alpha": _real("alpha", data["alpha"], 0.0, 1.0, open_low=True),
        "agent_sizes": _integers("agent_sizes", sizes, None, 1, MAX_AGENT_SIZE),
        "feasible": _boolean("feasible", data["feasible"]),
        "reason": _text("reason", data["reason"]),
    }
    if values["alpha"] >= 1.0:
        raise ValueError(f"plan field 'alpha' must lie in (0, 1); got {values['alpha']!r}.")
    m = len(values["agent_sizes"])
    per_agent = m if values["feasible"] else 0
    values["sample_sizes"] = _integers(
        "sample_sizes", data["sample_sizes"], per_agent, 1, MAX_AGENT_SIZE
    )
    values["server_rank"] = _integer(
        "server_rank",
        data["server_rank"],
        1 if values["feasible"] else 0,
        m if values["feasible"] else 0,
    )
    for agent, (sample, size) in enumerate(
        zip(values["sample_sizes"], values["agent_sizes"], strict=False)
    ):
        if sample > size:
            raise ValueError(
                f"plan field 'sample_sizes[{agent}]' = {sample} exceeds the agent's size {size}."
            )
    return values


def _parse_qq(data: dict[str, Any]) -> FedCPQQPlan:
    values = _common(data)
    per_agent = len(values["sample_sizes"])
    values["local_ranks"] = _integers(
        "local_ranks", data["local_ranks"], per_agent, 1, MAX_AGENT_SIZE + 1
    )
    for agent, (rank, sample) in enumerate(
        zip(values["local_ranks"], values["sample_sizes"], strict=True)
    ):
        if rank > sample + 1:
            raise ValueError(f"plan field 'local_ranks[{agent}]' = {rank} exceeds {sample + 1}.")
    values["coverage_lower_bound"] = _real(
        "coverage_lower_bound", data["coverage_lower_bound"], 0.0, 1.0
    )
    values["coverage_upper_bound"] = _real(
        "coverage_upper_bound", data["coverage_upper_bound"], 0.0, 1.0
    )
    return FedCPQQPlan(**values)


def _check_levels(levels: tuple[float, ...], releases: tuple[bool, ...], scaling: str) -> None:
    """Each releasing agent's level is one its scaling is epsilon-DP at (paper: q < 1)."""
    strategy = AGENT_SCALINGS[scaling]
    for agent, (level, release) in enumerate(zip(levels, releases, strict=True)):
        if release and not strategy.valid_level(level):
            raise ValueError(
                f"plan field 'local_levels[{agent}]' must lie in {strategy.levels} under the "
                f"{scaling} scaling; got {level!r}."
            )


def _parse_qq2(data: dict[str, Any]) -> FedCP2QQPlan:
    values = _common(data)
    feasible = values["feasible"]
    per_agent = len(values["sample_sizes"])
    values["epsilon"] = _real("epsilon", data["epsilon"], 0.0, math.inf, open_low=True)
    scaling = _text("scaling", data["scaling"])
    if scaling not in AGENT_SCALINGS:
        raise ValueError(
            f"plan field 'scaling' must be one of {sorted(AGENT_SCALINGS)}; got {scaling!r}."
        )
    values["scaling"] = scaling
    values["n_bins_request"] = _auto_or(
        "n_bins_request", data["n_bins_request"], lambda n, v: _integer(n, v, 2, MAX_BINS)
    )
    values["gamma_request"] = _auto_or(
        "gamma_request", data["gamma_request"], lambda n, v: _real(n, v, 0.0, 1.0, open_low=True)
    )
    values["n_bins"] = _integer("n_bins", data["n_bins"], 2 if feasible else 0, MAX_BINS)
    values["gamma"] = _real("gamma", data["gamma"], 0.0, 1.0, open_low=feasible)
    values["table_level"] = _real("table_level", data["table_level"], 0.0, 1.0, open_low=True)
    values["table_ranks"] = _integers(
        "table_ranks", data["table_ranks"], per_agent, 1, MAX_AGENT_SIZE + 1
    )
    values["rank_corrections"] = _integers(
        "rank_corrections", data["rank_corrections"], per_agent, 0, MAX_AGENT_SIZE
    )
    releases = _sequence("releases", data["releases"], per_agent)
    values["releases"] = tuple(_boolean(f"releases[{i}]", v) for i, v in enumerate(releases))
    levels = _sequence("local_levels", data["local_levels"], per_agent)
    values["local_levels"] = tuple(
        _real(f"local_levels[{i}]", v, 0.0, 1.0, open_low=release)
        for i, (v, release) in enumerate(zip(levels, values["releases"], strict=True))
    )
    _check_levels(values["local_levels"], values["releases"], scaling)
    values["table_coverage"] = _real("table_coverage", data["table_coverage"], 0.0, 1.0)
    values["coverage_lower_bound"] = _real(
        "coverage_lower_bound", data["coverage_lower_bound"], 0.0, 1.0
    )
    return FedCP2QQPlan(**values)


_PARSERS: dict[str, Callable[[dict[str, Any]], FederatedPlan]] = {
    FEDCP_QQ: _parse_qq,
    FEDCP2_QQ: _parse_qq2,
}


def plan_from_dict(data) -> FederatedPlan:
    """Read a plan from :func:`plan_to_dict` output (e.g. after ``json.loads``), strictly.

    Checks the protocol, the version, the exact set of fields, every field's type and
    range, the round id's form, and that the digest matches the content. Cheap (linear
    in the number of agents); it does not re-derive the plan (:func:`verified_plan`
    does).

    Raises
    ------
    TypeError
        If ``data`` or a field has the wrong type.
    ValueError
        If the protocol or version is unknown, fields are missing or extra, a value is
        out of range, or the digest does not match.
    """
    return received_plan(data)[0]


def received_plan(data) -> tuple[FederatedPlan, str]:
    """:func:`plan_from_dict` that also returns the round id."""
    if not isinstance(data, dict):
        raise TypeError(f"A plan must be a dict; got {type(data).__name__}.")
    protocol = data.get("protocol")
    if protocol not in _PARSERS:
        raise ValueError(f"Unknown protocol {protocol!r} in plan (expected {sorted(_PARSERS)}).")
    version = data.get("version")
    if not _is_int(version) or version != PROTOCOL_VERSION:
        raise ValueError(
            f"Plan version {version!r} differs from this library's protocol version "
            f"{PROTOCOL_VERSION}."
        )
    names = {item.name for item in fields(_PLAN_TYPES[protocol])} | set(_META)
    missing, unknown = names - set(data), set(data) - names
    if missing or unknown:
        raise ValueError(
            f"Plan fields do not match the {protocol} format: missing {sorted(missing)}, "
            f"unknown {sorted(map(str, unknown))}."
        )
    digest = data["digest"]
    if not isinstance(digest, str):
        raise TypeError(f"plan field 'digest' must be a string; got {type(digest).__name__}.")
    round_id = _round_id(data["round"])
    plan = _PARSERS[data["protocol"]](data)
    payload = dict(_payload(plan), round=round_id)
    if hashlib.sha256(_canonical(payload)).hexdigest() != digest:
        raise ValueError("The plan's digest does not match its content: it was altered.")
    return plan, round_id


def verified_plan(plan) -> FederatedPlan:
    """The plan re-derived from its public inputs; refuses any plan that differs from it.

    Parameters
    ----------
    plan : FedCPQQPlan, FedCP2QQPlan or dict
        A plan or its :func:`plan_to_dict` form.

    Returns
    -------
    FedCPQQPlan or FedCP2QQPlan
        The re-derived plan (equal to the given one).

    Raises
    ------
    TypeError, ValueError
        If the plan is malformed (see :func:`plan_from_dict`) or does not follow from its
        public inputs (agent sizes, alpha and, for FedCP2-QQ, epsilon, scaling and the
        requested bins and gamma).
    """
    if isinstance(plan, dict):
        plan = plan_from_dict(plan)
    if not isinstance(plan, FedCPQQPlan | FedCP2QQPlan):
        raise TypeError(
            f"plan must be a FedCPQQPlan, a FedCP2QQPlan or a dict; got {type(plan).__name__}."
        )
    if isinstance(plan, FedCP2QQPlan):
        expected = make_plan(
            plan.agent_sizes,
            plan.alpha,
            epsilon=plan.epsilon,
            n_bins=plan.n_bins_request,
            gamma=plan.gamma_request,
            scaling=plan.scaling,
        )
    else:
        expected = make_plan(plan.agent_sizes, plan.alpha)
    if expected != plan:
        differing = [
            item.name
            for item in fields(plan)
            if getattr(plan, item.name) != getattr(expected, item.name)
        ]
        raise ValueError(
            "The plan does not follow from its public inputs (agent sizes, alpha, epsilon, "
            f"scaling, requested bins and gamma): fields {differing} differ from the plan "
            "this library derives. Refusing it."
        )
    return expected


def message_fields(plan: FederatedPlan) -> tuple[str, ...]:
    """The exact keys of a message under ``plan``."""
    common = (
        "protocol",
        "version",
        "round",
        "plan_digest",
        "agent",
        "n_samples",
        "value",
        "read_data",
    )
    return (*common, "bin") if isinstance(plan, FedCP2QQPlan) else common
