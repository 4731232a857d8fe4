"""A guard that turns a hang into a test failure (not a speed test: the limit is generous)."""

import signal
from contextlib import contextmanager

#: Seconds a guarded block may run: far above its normal run time (well under a second
#: to a few seconds), so that only a hang, never a loaded machine, fails the test.
HANG_LIMIT = 120


@contextmanager
def no_hang(seconds: float = HANG_LIMIT):
    """Fail with TimeoutError, instead of hanging, when the block runs past ``seconds``."""

    def stop(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
