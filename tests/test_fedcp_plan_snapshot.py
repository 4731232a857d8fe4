"""FedCP plans are byte-identical to a stored snapshot of 532 public inputs.

``tests/data/fedcp_plan_snapshot.json`` (written by ``tools/fedcp_plan_snapshot.py``
from the planning code before it was restructured) holds agent sizes (equal and
unequal, 2 to 50 agents, 1 to 20 000 scores each), ``alpha``, and for FedCP2-QQ epsilon
in {0.5, 1, 2, 8} with default and non-default bins, ``gamma`` and scaling, feasible and
infeasible, each with the SHA-256 of the plan's canonical JSON. Every plan is recomputed
through the public :func:`~privconf_sklearn.federated.make_plan` and compared byte for
byte (on the numpy and scipy releases the digests were computed with; on others,
whose special functions may differ in the last bits, by feasibility, server rank and
bound to 1e-12 relative); the "fast" entries (FedCP-QQ for equal sizes or two agents)
run in the default selection, all of them under ``slow``.

``tests/data/fedcp_plan_snapshot_changes.json`` lists the 28 plans the bounded planner
makes differently, each with its new digest and reason (``tools/fedcp_plan_snapshot.py
--changes``): the unequal-size rank search ran out of its work budget (17, 23 to 50
agents, a certified bound at most 3.7e-5 larger); its fast values, now computed on each
server rank's own window, differ in the last bits and sent the local search another
way among configurations of almost equal coverage (3 the same or a better bound, 6 at
most 2.6e-6 larger); or a plan was infeasible because a fast value sat just below the
level and the next configuration is now certified (2).
"""

import hashlib
import json
import math
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
import scipy

from privconf_sklearn.federated import make_plan

#: The releases the snapshot's digests were computed with. With others (CI's
#: oldest-versions environment: numpy 2.0, scipy 1.13) the special functions may differ in
#: the last bits, so plans are compared by their feasibility, server rank and bound
#: (to 1e-12 relative) instead of byte for byte.
SNAPSHOT_VERSIONS = ("2.4.6", "1.17.1")
BYTE_FOR_BYTE = (np.__version__, scipy.__version__) == SNAPSHOT_VERSIONS

DATA = Path(__file__).parent / "data"
SNAPSHOT = json.loads((DATA / "fedcp_plan_snapshot.json").read_text(encoding="utf-8"))
CHANGES = {
    change["index"]: change
    for change in json.loads((DATA / "fedcp_plan_snapshot_changes.json").read_text("utf-8"))
}


def canonical_plan(plan) -> str:
    """Every field of ``plan`` and its protocol as canonical JSON (floats by ``repr``)."""
    payload = {"protocol": plan.protocol}
    for item in fields(plan):
        value = getattr(plan, item.name)
        payload[item.name] = list(value) if isinstance(value, tuple) else value
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)


def mismatches(entries) -> list[str]:
    found = []
    for position, entry in entries:
        options = {k: entry[k] for k in ("epsilon", "n_bins", "gamma", "scaling") if k in entry}
        plan = make_plan(entry["sizes"], entry["alpha"], **options)
        stored = CHANGES.get(position, entry)
        digest = hashlib.sha256(canonical_plan(plan).encode()).hexdigest()
        if digest != stored["sha256"] and (BYTE_FOR_BYTE or not _same_in_value(plan, stored)):
            found.append(
                f"sizes={entry['sizes']} alpha={entry['alpha']} {options}: feasible "
                f"{plan.feasible} (stored {entry['feasible']}), k={plan.server_rank} "
                f"(stored {entry['server_rank']}), bound {plan.coverage_lower_bound!r} "
                f"(stored {entry['coverage_lower_bound']!r})"
            )
    return found


def _same_in_value(plan, stored) -> bool:
    """Same feasibility, server rank (when stored) and bound to 1e-12 relative."""
    return (
        plan.feasible == stored["feasible"]
        and plan.server_rank == stored.get("server_rank", plan.server_rank)
        and math.isclose(plan.coverage_lower_bound, stored["coverage_lower_bound"], rel_tol=1e-12)
    )


def test_snapshot_covers_what_it_claims():
    assert len(SNAPSHOT) - len(CHANGES) >= 500  # byte-identical to the code before
    fast = [e for e in SNAPSHOT if e["tier"] == "fast"]
    assert len(fast) >= 100
    assert {len(e["sizes"]) for e in SNAPSHOT} >= {2, 50}
    assert any(not e["feasible"] for e in fast) and any(e["feasible"] for e in fast)
    assert {e.get("epsilon") for e in SNAPSHOT} >= {None, 0.5, 1.0, 2.0, 8.0}
    assert any(len(set(e["sizes"])) > 1 for e in fast)


def test_every_change_is_explained():
    """Budget cuts cost little; ties and near-level fixes never cost anything."""
    for position, change in CHANGES.items():
        before = SNAPSHOT[position]
        gain = before["coverage_lower_bound"] - change["coverage_lower_bound"]
        assert change["feasible"] and change["coverage_lower_bound"] >= 1 - before["alpha"]
        if change["reason"] == "budget":
            assert len(set(before["sizes"])) > 1 and gain > -2e-4
        elif change["reason"] == "feasible":
            assert not before["feasible"]
        elif change["reason"] == "path":
            assert before["feasible"] and -5e-6 < gain < -1e-14
        else:
            assert change["reason"] == "tie" and before["feasible"] and gain >= -1e-14


def test_fast_plans_are_byte_identical_to_the_snapshot():
    found = mismatches([(i, e) for i, e in enumerate(SNAPSHOT) if e["tier"] == "fast"])
    assert not found, f"{len(found)} plans changed:\n" + "\n".join(found[:20])


@pytest.mark.slow
def test_all_plans_are_byte_identical_to_the_snapshot():
    found = mismatches([(i, e) for i, e in enumerate(SNAPSHOT) if e["tier"] != "fast"])
    assert not found, f"{len(found)} plans changed:\n" + "\n".join(found[:20])
