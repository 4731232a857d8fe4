"""The privacy ledger an estimator checks and spends on, and what happens when it is copied.

A ledger is any object with diffprivlib's ``BudgetAccountant`` interface:
``check(epsilon, delta)`` raises if the spend would exceed the budget, and
``spend(epsilon, delta)`` records it. ``accountant=None`` means diffprivlib's
process-wide default ledger (:func:`~privconf_sklearn._diffprivlib.default_accountant`).

**Reservation.** A calibration spends before it reads: :func:`reserve` checks and
records the spend in one step, under a lock of that ledger, so that of two threads
sharing a ledger with room for one calibration, exactly one records its spend and the
other is refused before its model sees a calibration row. The lock is per ledger
object and per process; it serialises the calibrations of this package, not other
code spending on the same ledger (a diffprivlib model fitting in another thread).

**Copies never receive spending.** A ledger is a shared record: a copy records spending
nobody reads. Estimators keep their ledger by reference through ``clone``,
``copy.deepcopy`` and a pickle round trip inside one process. When an estimator is
unpickled in *another* process (a joblib worker of ``GridSearchCV(n_jobs=2)`` or
``cross_validate(n_jobs=2)`` with the default process-based backend, a dask worker, a
later session), its ledger is left behind: the copy's ``accountant`` becomes a
:class:`DetachedLedger`, whose ``check`` raises :class:`DetachedLedgerError` before any
data is read, saying why and what to do. Prediction needs no ledger and keeps working.
The same holds for ``accountant=None``: the default ledger of a worker process is a
different object from the caller's. Processes are told apart by a random token drawn
when this module is imported and drawn again in a child created by ``os.fork``, not by
their process id, which another process may have too (PID 1 in every container).

Not detected: a forked child that uses an estimator it inherited without pickling holds
the child's copy of the ledger object, and spends on that copy.
"""

from __future__ import annotations

import os
import secrets
import threading
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

from ._diffprivlib import default_accountant
from ._param_validation import HasMethods

__all__ = [
    "LEDGER",
    "DetachedLedger",
    "DetachedLedgerError",
    "LedgerReference",
    "reserve",
    "resolve_ledger",
]


#: The accepted forms of ``accountant``: None (diffprivlib's default ledger) or an object
#: with ``check(epsilon, delta)`` and ``spend(epsilon, delta)`` methods.
LEDGER = [None, HasMethods(["check", "spend"])]


class DetachedLedgerError(RuntimeError):
    """The estimator's ledger stayed in another process: spending there would be lost."""


class DetachedLedger:
    """Stand-in for a ledger that did not travel with a pickled estimator.

    Parameters
    ----------
    description : str
        Which ledger it stands for and where it lives.
    """

    def __init__(self, description: str):
        self.description = description

    def __repr__(self) -> str:
        return f"DetachedLedger({self.description!r})"

    def _refuse(self) -> None:
        raise DetachedLedgerError(
            f"This estimator was copied to another process by pickling, and its privacy "
            f"ledger ({self.description}) stayed behind: spending recorded here would never "
            "reach it, so calibration is refused before reading any data. Typical cause: "
            "GridSearchCV / cross_validate with n_jobs > 1 and joblib's default "
            "process-based backend. Use n_jobs=1, or run the search under joblib's "
            "threading backend (with joblib.parallel_backend('threading'): ...), so that "
            "every calibration spends on the ledger you hold; or, to spend on a ledger of "
            "this process, set it again: estimator.set_params(accountant=ledger)."
        )

    def check(self, epsilon: float, delta: float) -> None:
        """Refuse (see the class description)."""
        self._refuse()

    def spend(self, epsilon: float, delta: float) -> None:
        """Refuse (see the class description)."""
        self._refuse()


#: Ledgers of this process that pickled estimators refer to, by token.
_REGISTRY: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_REGISTRY_LOCK = threading.Lock()
#: This process, for :class:`LedgerReference` (random: a process id can be reused).
_PROCESS_TOKEN = secrets.token_hex(16)
#: One lock per ledger object (by ``id``, removed when the ledger is collected), for
#: :func:`reserve`; ledgers that cannot be weakly referenced share ``_SHARED_LOCK``.
_LEDGER_LOCKS: dict[int, threading.Lock] = {}
_SHARED_LOCK = threading.Lock()


def _new_process() -> None:
    """In a forked child: a token of its own, empty tables and fresh locks.

    The child holds copies of the parent's ledgers: a reference made in the parent must
    not resolve to a copy (spending there would never reach the parent's ledger), and a
    lock another parent thread held at the fork would never be released in the child.
    """
    global _PROCESS_TOKEN, _REGISTRY, _REGISTRY_LOCK, _LEDGER_LOCKS, _SHARED_LOCK
    _PROCESS_TOKEN = secrets.token_hex(16)
    _REGISTRY = weakref.WeakValueDictionary()
    _REGISTRY_LOCK = threading.Lock()
    _LEDGER_LOCKS = {}
    _SHARED_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_new_process)


def _register(ledger) -> str | None:
    """A token under which this process finds ``ledger`` again (None if not weak-referable)."""
    with _REGISTRY_LOCK:
        for token, registered in _REGISTRY.items():
            if registered is ledger:
                return token
        token = uuid.uuid4().hex
        try:
            _REGISTRY[token] = ledger
        except TypeError:  # objects without __weakref__ (e.g. __slots__ classes)
            return None
        return token


def _describe(ledger) -> str:
    if ledger is None:
        return "the default diffprivlib BudgetAccountant of process " + str(os.getpid())
    text = repr(ledger)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} of process {os.getpid()}"


@dataclass(frozen=True)
class LedgerReference:
    """What a pickled estimator stores in place of its ledger.

    Parameters
    ----------
    process : str
        Random token of the process that pickled the estimator (not its process id:
        another process, e.g. any container's PID 1, may have the same id).
    token : str or None
        Registry token of the ledger in that process (None for ``accountant=None``, or
        when the ledger cannot be referred to).
    default : bool
        True for ``accountant=None`` (the default ledger).
    description : str
        For the error message of a :class:`DetachedLedger`.
    """

    process: str
    token: str | None
    default: bool
    description: str

    @classmethod
    def to(cls, ledger) -> LedgerReference:
        """Reference to ``ledger`` (None: the default ledger) from this process."""
        if isinstance(ledger, DetachedLedger):
            return cls(_PROCESS_TOKEN, None, False, ledger.description)
        token = None if ledger is None else _register(ledger)
        return cls(_PROCESS_TOKEN, token, ledger is None, _describe(ledger))

    def resolve(self):
        """The original ledger when in the same process and alive; else a DetachedLedger.

        A reference pickled by a version that stored the process id instead of the
        token (no ``process``) is detached.
        """
        if getattr(self, "process", None) == _PROCESS_TOKEN:
            if self.default:
                return None
            if self.token is not None:
                ledger = _REGISTRY.get(self.token)
                if ledger is not None:
                    return ledger
        return DetachedLedger(self.description)


def resolve_ledger(accountant):
    """The ledger to check and spend on: ``accountant``, or the default one for None.

    Raises
    ------
    DiffprivlibUnavailableError
        For ``accountant=None`` when diffprivlib cannot be imported.
    """
    return default_accountant() if accountant is None else accountant


def _lock_of(ledger) -> threading.Lock:
    """The lock of ``ledger`` in this process (created on first use)."""
    with _REGISTRY_LOCK:
        key = id(ledger)
        lock = _LEDGER_LOCKS.get(key)
        if lock is not None:
            return lock
        lock = threading.Lock()
        try:
            weakref.finalize(ledger, _LEDGER_LOCKS.pop, key, None)
        except TypeError:  # not weak-referable: its id could be reused after it dies
            return _SHARED_LOCK
        _LEDGER_LOCKS[key] = lock
        return lock


def reserve(ledger, epsilon: float, delta: float) -> None:
    """Check and record a spend on ``ledger`` in one step, before any data is read.

    ``ledger.check(epsilon, delta)`` then ``ledger.spend(epsilon, delta)``, under the
    lock of this ledger: concurrent calibrations of this process on one ledger (e.g. a
    threaded ``GridSearchCV``) can neither lose a record nor both pass the check of the
    last remaining budget, and the one refused raises here, before it reads anything.
    Nothing is recorded for a spend of ``(0, 0)`` (a release that reads no data). A
    reservation is final: the ledger protocol has no refund, so a calibration that fails
    after reserving leaves its spend on the ledger.

    Raises
    ------
    Exception
        Whatever ``ledger.check`` or ``ledger.spend`` raises when the budget does not
        allow the spend (diffprivlib's ``BudgetError``), or :class:`DetachedLedgerError`.
    """
    if epsilon == 0.0 and delta == 0.0:
        return
    with _lock_of(ledger):
        ledger.check(epsilon, delta)
        ledger.spend(epsilon, delta)
