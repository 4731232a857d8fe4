"""Write the FedCP plan snapshot that ``tests/test_fedcp_plan_snapshot.py`` recomputes.

The snapshot pins the plans of :func:`privconf_sklearn.federated.make_plan` (FedCP-QQ
and FedCP2-QQ, feasible and infeasible) on a fixed list of public inputs: each entry
holds the inputs and the SHA-256 of the plan's canonical JSON (every field of the plan,
floats written by ``repr``, so equal digests mean byte-identical plans), with a few
fields in clear to read a difference. It was written from the planning code before the
FedCP subpackage refactor; rewriting it is a deliberate change of plans, to be
documented.

``--changes`` recomputes every plan with the current code and writes the plans that
differ to ``tests/data/fedcp_plan_snapshot_changes.json``, each with its new digest and
the reason, found by watching the planner (caches cleared): ``"budget"`` when the
unequal-size rank search ran out of its work budget, ``"feasible"`` when a plan that
was infeasible now certifies a neighbour of a configuration whose fast value was just
below the level; otherwise the fast values (last bits) sent the local search another
way among configurations of almost equal coverage: ``"tie"`` when the certified bound
is the same or smaller, ``"path"`` when it is larger.

Run ``python tools/fedcp_plan_snapshot.py [--changes]`` from the repository root (a few
minutes).
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np

from privconf_sklearn.federated import make_plan

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
OUTPUT = DATA / "fedcp_plan_snapshot.json"
CHANGES = DATA / "fedcp_plan_snapshot_changes.json"


def canonical_plan(plan) -> str:
    """Every field of ``plan`` and its protocol as canonical JSON (sorted keys, no spaces)."""
    payload = {"protocol": plan.protocol}
    for item in fields(plan):
        value = getattr(plan, item.name)
        payload[item.name] = list(value) if isinstance(value, tuple) else value
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _entry(sizes, alpha, **options) -> dict:
    return {"sizes": [int(n) for n in sizes], "alpha": alpha, **options}


def _equal_qq() -> list[dict]:
    out = []
    for m in (2, 3, 4, 5, 7, 10, 16, 25, 50):
        for n in (1, 3, 5, 10, 20, 50, 100, 300, 1000, 5000, 20000):
            out.append(_entry([n] * m, 0.1))
    for alpha in (0.01, 0.05, 0.2, 0.5, 0.9):
        for m, n in ((2, 40), (5, 100), (10, 1000), (20, 20000), (3, 7)):
            out.append(_entry([n] * m, alpha))
    return out


def _even(rng: np.random.Generator, count: int) -> list[dict]:
    """Sizes spread evenly (differing by one): the mechanisms' ``n_agents`` case."""
    out = []
    for _ in range(count):
        m = int(rng.integers(2, 51))
        total = int(rng.integers(m, 20 * m * 50))
        base, extra = divmod(total, m)
        sizes = [base + 1] * extra + [base] * (m - extra)
        epsilon = [None, 1.0][int(rng.integers(2))]
        out.append(_entry(sizes, 0.1, epsilon=epsilon))
    return out


def _unequal(rng: np.random.Generator, count: int, max_agents: int, private: bool):
    out = []
    for _ in range(count):
        m = int(rng.integers(2, max_agents + 1))
        sizes = np.exp(rng.uniform(0.0, np.log(20000.0), m)).astype(int).clip(1, 20000)
        alpha = float(rng.choice([0.05, 0.1, 0.2]))
        options: dict = {}
        if private:
            options["epsilon"] = float(rng.choice([0.5, 1.0, 2.0, 8.0]))
            if rng.uniform() < 0.3:
                options["n_bins"] = int(rng.choice([10, 100, 1000]))
            if rng.uniform() < 0.3:
                options["gamma"] = float(rng.choice([0.1, 0.5]))
            if rng.uniform() < 0.2:
                options["scaling"] = "paper"
        out.append(_entry(sizes, alpha, **options))
    return out


def _equal_private() -> list[dict]:
    out = []
    for m in (2, 5, 10, 20, 50):
        for n in (10, 50, 200, 1000, 5000, 20000):
            for epsilon in (0.5, 1.0, 2.0, 8.0):
                alpha = 0.05 if n >= 5000 and epsilon == 8.0 else 0.1
                out.append(_entry([n] * m, alpha, epsilon=epsilon))
    options = [
        {"n_bins": 10},
        {"n_bins": 100},
        {"n_bins": 1000},
        {"gamma": 0.1},
        {"gamma": 0.5},
        {"scaling": "paper"},
        {"scaling": "paper", "n_bins": 100, "gamma": 0.5},
        {"n_bins": 50, "gamma": 0.2},
    ]
    for option in options:
        for m, n, epsilon in ((2, 100, 1.0), (5, 1000, 0.5), (10, 300, 2.0), (20, 5000, 8.0)):
            out.append(_entry([n] * m, 0.1, epsilon=epsilon, **option))
    for alpha in (0.02, 0.2, 0.5):
        for m, n in ((3, 500), (10, 2000)):
            out.append(_entry([n] * m, alpha, epsilon=1.0))
    return out


def vectors() -> list[dict]:
    """The snapshot's inputs (deterministic)."""
    rng = np.random.default_rng(20260526)
    return [
        *_equal_qq(),
        *_equal_private(),
        *_unequal(rng, 40, 4, private=False),
        *_unequal(rng, 40, 4, private=True),
        *_unequal(rng, 70, 50, private=False),
        *_unequal(rng, 70, 50, private=True),
        *_even(rng, 30),
    ]


def plan_of(entry: dict):
    """The plan of one snapshot entry."""
    options = {key: entry[key] for key in ("epsilon", "n_bins", "gamma", "scaling") if key in entry}
    return make_plan(entry["sizes"], entry["alpha"], **options)


def record(entry: dict) -> dict:
    """The entry with its tier, the plan's digest and readable key fields.

    The "fast" tier (cheap plans, run by default) holds the FedCP-QQ plans for equal
    sizes or two agents.
    """
    plan = plan_of(entry)
    text = canonical_plan(plan)
    cheap = entry.get("epsilon") is None and (
        len(set(entry["sizes"])) == 1 or len(entry["sizes"]) == 2
    )
    return {
        **entry,
        "tier": "fast" if cheap else "slow",
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "feasible": plan.feasible,
        "server_rank": plan.server_rank,
        "coverage_lower_bound": plan.coverage_lower_bound,
    }


def _watched_plan(entry: dict):
    """The entry's plan from cold caches, and whether a work budget ran out on the way."""
    from privconf_sklearn.mechanisms.fedcp import _choice, _coverage, _plan

    for module in (_plan, _choice):
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()
    refused = []
    spend = _coverage.WorkBudget.spend

    def watched(budget, cells):
        try:
            spend(budget, cells)
        except _coverage.OverBudget:
            refused.append(cells)
            raise

    _coverage.WorkBudget.spend = watched
    try:
        return plan_of(entry), bool(refused)
    finally:
        _coverage.WorkBudget.spend = spend


def changes() -> int:
    """Write the snapshot entries whose plan the current code makes differently."""
    found = []
    for position, entry in enumerate(json.loads(OUTPUT.read_text(encoding="utf-8"))):
        plan = plan_of(entry)
        digest = hashlib.sha256(canonical_plan(plan).encode()).hexdigest()
        if digest == entry["sha256"]:
            continue
        plan, cut = _watched_plan(entry)
        better = plan.coverage_lower_bound <= entry["coverage_lower_bound"] + 1e-14
        reason = (
            "budget"
            if cut
            else "feasible"
            if not entry["feasible"]
            else "tie"
            if better
            else "path"
        )
        found.append(
            {
                "index": position,
                "reason": reason,
                "sha256": hashlib.sha256(canonical_plan(plan).encode()).hexdigest(),
                "feasible": plan.feasible,
                "coverage_lower_bound": plan.coverage_lower_bound,
            }
        )
        print(position, reason, flush=True)
    lines = ",\n".join(json.dumps(item, separators=(",", ":")) for item in found)
    CHANGES.write_text("[\n" + lines + "\n]\n", encoding="utf-8")
    return 0


def main() -> int:
    """Compute every plan of :func:`vectors` and write the snapshot."""
    records = []
    for position, entry in enumerate(vectors()):
        records.append(record(entry))
        print(position, len(entry["sizes"]), flush=True)
    lines = ",\n".join(json.dumps(item, separators=(",", ":")) for item in records)
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text("[\n" + lines + "\n]\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(changes() if "--changes" in sys.argv[1:] else main())
