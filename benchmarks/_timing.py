"""Shared timing for the benchmarks: alternate the contenders, report ratios per round.

Timing a baseline once and then every case after it lets a change of machine load
between the two (another job starting, a frequency change) land in the ratio: re-runs
of such a benchmark gave "57x" as 9.6-15x. Here every round calls each contender once,
in a fixed order (A B A B ...), and a ratio is computed *per round*, between calls a
few milliseconds apart; the report is the median of those ratios with their min-max,
and the machine's load average is printed beside it.

Peak memory is measured apart from the timed rounds (tracemalloc slows allocation),
one traced call per contender; numpy reports its array allocations to tracemalloc.
"""

from __future__ import annotations

import os
import statistics
import time
import tracemalloc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

__all__ = ["Rounds", "alternate", "best_time", "load_average", "peak_memory"]


def load_average() -> str:
    """``load average 1m, 5m, 15m on N CPUs`` (other jobs inflate absolute times)."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"


@dataclass
class Rounds:
    """Wall times of alternating calls: ``times[name][r]`` is round ``r``'s call."""

    times: dict[str, list[float]] = field(default_factory=dict)

    def best(self, name: str) -> float:
        """Fastest call of ``name`` (seconds)."""
        return min(self.times[name])

    def median(self, name: str) -> float:
        """Median call of ``name`` (seconds)."""
        return statistics.median(self.times[name])

    def ratios(self, numerator: str, denominator: str) -> list[float]:
        """Per-round ratios ``numerator / denominator``."""
        return [a / b for a, b in zip(self.times[numerator], self.times[denominator], strict=True)]

    def ratio(self, numerator: str, denominator: str) -> tuple[float, float, float]:
        """``(median, min, max)`` of the per-round ratios."""
        values = self.ratios(numerator, denominator)
        return statistics.median(values), min(values), max(values)

    def ratio_text(self, numerator: str, denominator: str) -> str:
        """``1.03x (0.98-1.10)``: median of the per-round ratios and their range."""
        median, low, high = self.ratio(numerator, denominator)
        return f"{median:.2f}x ({low:.2f}-{high:.2f})"


def alternate(
    contenders: Mapping[str, Callable[[], object]],
    rounds: int,
    *,
    warmup: int = 1,
    before: Mapping[str, Callable[[], object]] | None = None,
) -> Rounds:
    """Time ``rounds`` rounds, each calling every contender once, in order.

    Parameters
    ----------
    contenders : mapping of name to callable
        The functions to compare (e.g. ``{"numpy": ..., "ours": ...}``).
    rounds : int
        Number of rounds (timed calls per contender).
    warmup : int, default=1
        Untimed rounds first (imports, caches, page faults of first allocations).
    before : mapping of name to callable, default=None
        Untimed set-up run just before a contender's every call (e.g. clearing a cache
        for "cold" timings).

    Returns
    -------
    Rounds
    """
    before = before or {}
    result = Rounds({name: [] for name in contenders})
    for index in range(warmup + rounds):
        for name, function in contenders.items():
            if name in before:
                before[name]()
            start = time.perf_counter()
            function()
            elapsed = time.perf_counter() - start
            if index >= warmup:
                result.times[name].append(elapsed)
    return result


def best_time(
    function: Callable[[], object], repeats: int, before: Callable[[], object] | None = None
) -> float:
    """Best wall time of ``repeats`` calls of one function (``before`` runs untimed first).

    For timings with no baseline to alternate with (e.g. a single cold call); compare
    with a baseline through :func:`alternate`.
    """
    times = []
    for _ in range(repeats):
        if before is not None:
            before()
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def peak_memory(function: Callable[[], object]) -> int:
    """Peak bytes traced by tracemalloc during one call, its result included."""
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
