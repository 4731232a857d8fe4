"""Bounded FedCP planning: ``make_plan`` and the server's re-derivation, up to 1,000 agents.

Issue 24 (item 5): ``make_plan`` for 256 agents of 5,000 to 10,000 scores took 79 s
(FedCP2-QQ) and 37 s (FedCP-QQ), and the server re-derives every plan it is handed
(``verified_plan``, called by ``aggregate``). The target: under 2 s for up to 1,000
agents. Every measurement runs in a fresh process (every cache cold): ``make_plan``
from the public inputs, then, in another process, ``verified_plan`` of the plan's JSON
(what ``aggregate`` does first). With ``--baseline DIR`` (a checkout of the previous
code, e.g. ``git worktree add DIR <commit>``), each round runs the baseline and this
tree alternately, and the report gives both and the median (range) of the per-round
ratios baseline / ours of ``make_plan``'s wall time; slow baseline runs are cut at
``--timeout`` seconds (their ratio is then a lower bound, shown with ``>``).

Run:  python -m benchmarks.bench_fedcp_plan_bounds [--repeats 3] [--baseline DIR]
(``DIR`` holds the baseline's ``privconf_sklearn`` package, e.g. ``git archive <commit>
privconf_sklearn | tar -x -C DIR``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _sizes(kind: str, m: int) -> list[int]:
    rng = np.random.default_rng(m)
    if kind == "5k-10k":
        return rng.integers(5_000, 10_001, m).tolist()
    if kind == "1-20k":
        return np.exp(rng.uniform(0.0, np.log(20_000.0), m)).astype(int).clip(1).tolist()
    return [int(kind)] * m


#: (label, agents, sizes, epsilon); "5k-10k" uniform, "1-20k" log-uniform, or one size.
CASES = [
    ("issue 24: 256 x 5k-10k", 256, "5k-10k", None),
    ("issue 24: 256 x 5k-10k", 256, "5k-10k", 1.0),
    ("1000 x 5k-10k", 1000, "5k-10k", None),
    ("1000 x 5k-10k", 1000, "5k-10k", 1.0),
    ("1000 x 1-20k", 1000, "1-20k", None),
    ("1000 x 1-20k", 1000, "1-20k", 1.0),
    ("50 x 1-20k", 50, "1-20k", None),
    ("50 x 1-20k", 50, "1-20k", 1.0),
    ("1000 x 10000", 1000, "10000", 1.0),
    ("1000 x 20 (infeasible)", 1000, "20", 1.0),
]


def _single(index: int, mode: str, path: str) -> None:
    """Child process: time ``make_plan`` (writing the plan) or ``verified_plan`` (reading it)."""
    import privconf_sklearn
    from privconf_sklearn.federated import make_plan, plan_to_dict, verified_plan

    assert Path(privconf_sklearn.__file__).resolve().is_relative_to(Path.cwd().resolve())

    _, m, kind, epsilon = CASES[index]
    start, cpu = time.perf_counter(), time.process_time()
    if mode == "make":
        plan = make_plan(_sizes(kind, m), 0.1, epsilon=epsilon)
    else:
        plan = verified_plan(json.loads(Path(path).read_text()))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    if mode == "make":
        Path(path).write_text(json.dumps(plan_to_dict(plan)))
    print(
        json.dumps(
            {"seconds": seconds, "cpu": cpu, "feasible": plan.feasible, "k": plan.server_rank}
        )
    )


def _run(index: int, mode: str, path: str, tree: Path, timeout: float) -> dict:
    # The script by path (not -m from this tree), so that ``tree``'s package is imported.
    env = dict(os.environ, PYTHONPATH=str(tree))
    command = [sys.executable, str(Path(__file__).resolve()), "--single", str(index), mode, path]
    try:
        done = subprocess.run(
            command, env=env, cwd=tree, capture_output=True, text=True, timeout=timeout, check=True
        )
    except subprocess.TimeoutExpired:
        return {"seconds": float("inf"), "cpu": float("inf")}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cell(runs: list[dict], timeout: float) -> str:
    """Median wall and CPU seconds of the runs (``> timeout`` when cut)."""
    wall = statistics.median(run["seconds"] for run in runs)
    if wall == float("inf"):
        return f"> {timeout:g}"
    return f"{wall:.2f} ({statistics.median(run['cpu'] for run in runs):.2f})"


def _ratio(baseline: list[dict], ours: list[dict], timeout: float) -> str:
    """Median (range) of the per-round ratios baseline / ours of wall seconds.

    A baseline run cut at ``timeout`` counts as ``timeout`` seconds: the ratios are then
    lower bounds, marked ``>``.
    """
    pairs = list(zip(baseline, ours, strict=True))
    ratios = sorted(min(b["seconds"], timeout) / o["seconds"] for b, o in pairs)
    cut = "> " if any(b["seconds"] == float("inf") for b, _ in pairs) else ""
    return f"{cut}{statistics.median(ratios):.3g} ({ratios[0]:.3g}-{ratios[-1]:.3g})"


def main(argv=None) -> None:
    """Print the table of median times (seconds) over ``--repeats`` fresh processes."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--single", nargs=3, default=None)
    args = parser.parse_args(argv)
    if args.single:
        _single(int(args.single[0]), args.single[1], args.single[2])
        return
    trees = {"ours": ROOT} | ({"baseline": args.baseline} if args.baseline else {})
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    header = "| case | protocol | feasible, k | make_plan (s) | re-derivation (s) |"
    if args.baseline:
        header += " baseline make_plan (s) | baseline re-derivation (s) | ratio make_plan |"
    print(header + "  wall (CPU), medians")
    print("|---" * (header.count("|") - 1) + "|")
    with tempfile.TemporaryDirectory() as folder:
        for index, (label, _, _, epsilon) in enumerate(CASES):
            runs: dict[str, dict[str, list[dict]]] = {t: {"make": [], "verify": []} for t in trees}
            for _ in range(args.repeats):
                for name, tree in trees.items():  # alternate baseline and ours
                    path = str(Path(folder) / f"{name}-{index}.json")
                    made = _run(index, "make", path, tree, args.timeout)
                    runs[name]["make"].append(made)
                    verified = (
                        made if "k" not in made else _run(index, "verify", path, tree, args.timeout)
                    )
                    runs[name]["verify"].append(verified)
            made = runs["ours"]["make"][-1]
            protocol = "FedCP-QQ" if epsilon is None else f"FedCP2-QQ eps {epsilon:g}"
            cells = [_cell(runs[n][mode], args.timeout) for n in trees for mode in runs[n]]
            if args.baseline:
                cells.append(_ratio(runs["baseline"]["make"], runs["ours"]["make"], args.timeout))
            print(
                f"| {label} | {protocol} | {made['feasible']}, {made['k']} | "
                + " | ".join(cells)
                + " |",
                flush=True,
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
