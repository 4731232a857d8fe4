"""Independent Monte Carlo runs in chunks, in this process or in worker processes."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable, Sequence

#: glibc ``mallopt`` parameters: trim threshold and mmap threshold.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_freed_memory() -> None:
    """Stop glibc from returning large freed blocks to the OS after every array.

    The runs allocate and free megabyte-sized temporaries thousands of times; by
    default glibc hands such blocks back to the kernel and faults fresh zeroed pages in
    on the next allocation, which measured 40% of the CPU time as system time. Raising
    the trim and mmap thresholds (to 256 MiB and 64 MiB) keeps them in the heap. No-op
    outside glibc.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_TRIM_THRESHOLD, 256 * 2**20)
        libc.mallopt(_M_MMAP_THRESHOLD, 64 * 2**20)
    except (OSError, AttributeError):
        return


def _call(function: Callable, chunk):
    keep_freed_memory()
    return function(chunk)


def run_chunks(
    function: Callable, chunks: Sequence, *, jobs: int = 1, desc: str = "", total: int = 0
) -> list:
    """``[function(chunk) for chunk in chunks]``, with a tqdm bar counting runs.

    Every chunk is a sequence of run indices plus whatever ``function`` needs (it must
    be picklable for ``jobs > 1``); results come back in chunk order whatever ``jobs``,
    and each run's randomness depends only on its index, so the output does not depend
    on ``jobs``.
    """
    from tqdm import tqdm

    progress = tqdm(total=total or None, desc=desc, unit="run", mininterval=0.5)
    results = []
    if jobs == 1:
        for chunk in chunks:
            results.append(_call(function, chunk))
            progress.update(len(chunk[0]))
    else:
        from joblib import Parallel, delayed

        parallel = Parallel(n_jobs=jobs, return_as="generator")
        tasks = parallel(delayed(_call)(function, c) for c in chunks)
        for chunk, result in zip(chunks, tasks, strict=True):
            results.append(result)
            progress.update(len(chunk[0]))
    progress.close()
    return results
