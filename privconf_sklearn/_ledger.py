"""The privacy ledger an estimator checks and spends on, and what happens when it is copied.

A ledger is any object with diffprivlib's ``BudgetAccountant`` interface:
``check(epsilon, delta)`` raises if the spend would exceed the budget, and
``spend(epsilon, delta)`` records it. ``accountant=None`` means diffprivlib's
process-wide default ledger (:func:`~privconf_sklearn._diffprivlib.default_accountant`).

**Copies never receive spending.** A ledger is a shared record: a copy records spending
nobody reads. Estimators keep their ledger by reference through ``clone``,
``copy.deepcopy`` and a pickle round trip inside one process. When an estimator is
unpickled in *another* process (a joblib worker of ``GridSearchCV(n_jobs=2)`` or
``cross_validate(n_jobs=2)`` with the default process-based backend, a dask worker, a
later session), its ledger is left behind: the copy's ``accountant`` becomes a
:class:`DetachedLedger`, whose ``check`` raises :class:`DetachedLedgerError` before any
data is read, saying why and what to do. Prediction needs no ledger and keeps working.
The same holds for ``accountant=None``: the default ledger of a worker process is a
different object from the caller's.
"""

from __future__ import annotations

import os
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
    "resolve_ledger",
    "spend",
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
#: Serialises check-then-record in :func:`spend` between threads of this process.
_SPEND_LOCK = threading.Lock()


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
    pid : int
        Process that pickled the estimator.
    token : str or None
        Registry token of the ledger in that process (None for ``accountant=None``, or
        when the ledger cannot be referred to).
    default : bool
        True for ``accountant=None`` (the default ledger).
    description : str
        For the error message of a :class:`DetachedLedger`.
    """

    pid: int
    token: str | None
    default: bool
    description: str

    @classmethod
    def to(cls, ledger) -> LedgerReference:
        """Reference to ``ledger`` (None: the default ledger) from this process."""
        if isinstance(ledger, DetachedLedger):
            return cls(os.getpid(), None, False, ledger.description)
        token = None if ledger is None else _register(ledger)
        return cls(os.getpid(), token, ledger is None, _describe(ledger))

    def resolve(self):
        """The original ledger when in the same process and alive; else a DetachedLedger."""
        if self.pid == os.getpid():
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


def spend(ledger, epsilon: float, delta: float) -> None:
    """Record a spend on ``ledger`` (its own ``spend`` checks the budget again).

    The call is serialised between threads of this process, so concurrent calibrations
    on one ledger (e.g. a threaded ``GridSearchCV``) can neither lose a record nor both
    pass the budget check of the last remaining budget.
    """
    with _SPEND_LOCK:
        ledger.spend(epsilon, delta)
