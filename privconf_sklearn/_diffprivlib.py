"""The package's one door to diffprivlib: an import that may fail, after a compatibility step.

diffprivlib is a dependency (its ``BudgetAccountant`` is the default privacy ledger and
its models are the private models the documentation wraps), but nothing in this package
needs it to *compute* anything: prediction sets, intervals, mechanisms and cards work
with any scikit-learn model. So a diffprivlib that cannot be imported breaks only what
uses it, and only this module imports it:

- ``accountant=None`` (the default ledger): :func:`default_accountant` returns
  diffprivlib's process-wide default ``BudgetAccountant``. If diffprivlib cannot be
  imported, it raises :class:`DiffprivlibUnavailableError` (before the estimator reads
  any data) saying what to do: pass a ledger explicitly. Budget accounting never stops
  silently.
- ``score_bounds=None`` in the regressor: the warning category is
  :class:`PrivacyLeakWarning`, defined here without diffprivlib; when diffprivlib can be
  imported the warning is also an instance of diffprivlib's own ``PrivacyLeakWarning``
  (:func:`privacy_leak_warning`), so filters on either class catch it.
- Users: :func:`import_diffprivlib` returns the module (``import_diffprivlib().models``).

**Compatibility step (scikit-learn >= 1.9).** diffprivlib 0.6.6, the newest release,
imports all its models from its package ``__init__``; ``diffprivlib/models/forest.py``
does ``from sklearn.tree._tree import DOUBLE, DTYPE``, two names scikit-learn removed
in 1.9. Up to scikit-learn 1.8 they were plain aliases of numpy scalar types,
``DOUBLE = numpy.float64`` and ``DTYPE = numpy.float32``, and diffprivlib uses them only
as dtypes (``validate_data(..., dtype=DTYPE)``, ``np.ascontiguousarray(y, dtype=DOUBLE)``).
Before importing diffprivlib, :func:`import_diffprivlib` therefore defines each of the two
names on ``sklearn.tree._tree`` *if and only if it is missing*, with exactly its old value.
Nothing else is touched; on scikit-learn <= 1.8 the step does nothing. With it,
diffprivlib's ``BudgetAccountant``, ``GaussianNB``, ``RandomForestClassifier`` and
``LinearRegression`` work on scikit-learn 1.9 (the forest gives identical predictions on
1.7 and 1.9 for the same seed). diffprivlib's ``LogisticRegression`` still fails on
scikit-learn >= 1.8, in its own ``__init__`` (it passes ``multi_class``, which
scikit-learn removed); nothing in this package uses it.

The step runs when ``privconf_sklearn`` is imported, which then imports diffprivlib
(about 50 ms) if it can, so a script that imports ``privconf_sklearn`` first may import
diffprivlib directly afterwards. If diffprivlib cannot be imported, nothing fails at
import time; what needs it says so (:func:`default_accountant`).

**Worker processes.** diffprivlib adds a warning filter on its ``PrivacyLeakWarning`` when
imported, and scikit-learn (>= 1.7) sends the parent's warning filters to every joblib
worker, where unpickling that filter imports diffprivlib, in a fresh interpreter that has
not run the compatibility step: on scikit-learn 1.9 every process-parallel job
(``cross_val_score(..., n_jobs=2)``, even of a plain scikit-learn model) would fail with
``BrokenProcessPool``. So after importing diffprivlib this module puts a filter entry of
its own ahead of diffprivlib's (:func:`order_worker_imports`; its category,
:class:`WorkerImportOrder`, is never raised, so the entry changes no warning): a worker
unpickles it first, which imports ``privconf_sklearn`` and runs the step before
diffprivlib is imported there.
"""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType
from typing import Any

import numpy as np

from ._warnings import warn_at_caller

__all__ = [
    "DiffprivlibUnavailableError",
    "PrivacyLeakWarning",
    "default_accountant",
    "diffprivlib_unavailable_reason",
    "import_diffprivlib",
    "privacy_leak_warning",
]

#: The aliases scikit-learn <= 1.8 defined in ``sklearn.tree._tree`` and removed in 1.9.
REMOVED_TREE_ALIASES: dict[str, type] = {"DOUBLE": np.float64, "DTYPE": np.float32}


class DiffprivlibUnavailableError(ImportError):
    """diffprivlib is needed for what was asked (e.g. its default ledger) but cannot be imported."""


class PrivacyLeakWarning(RuntimeWarning):
    """A choice made from the private data breaks the privacy guarantee.

    Raised e.g. by ``PrivateConformalRegressor(score_bounds=None)``, which takes the
    score range from the calibration data. When diffprivlib can be imported, the warning
    raised is also an instance of ``diffprivlib.utils.PrivacyLeakWarning``.
    """


class WorkerImportOrder(Warning):
    """Never raised: the category of a warning filter that orders imports in worker processes.

    A process that rebuilds its warning filters from pickled ones (scikit-learn's joblib
    workers) imports this class, hence ``privconf_sklearn`` and its compatibility step,
    before the diffprivlib class of the filter that follows it.
    """


def order_worker_imports() -> None:
    """Put the :class:`WorkerImportOrder` filter entry first in ``warnings.filters``.

    ``warnings.filterwarnings`` moves an existing identical entry to the front, so calling
    this again after diffprivlib (or anything else) added filters restores the order.
    """
    warnings.filterwarnings("default", category=WorkerImportOrder)


def prepare_diffprivlib() -> None:
    """Run at ``import privconf_sklearn``: the compatibility step, then diffprivlib if it imports.

    A diffprivlib that cannot be imported is not an error here: the default ledger raises
    :class:`DiffprivlibUnavailableError` when it is needed.
    """
    restore_removed_tree_aliases()
    try:
        import_diffprivlib()
    except DiffprivlibUnavailableError:
        return


def restore_removed_tree_aliases() -> list[str]:
    """Define ``sklearn.tree._tree.DOUBLE`` / ``DTYPE`` where scikit-learn removed them.

    Returns
    -------
    list of str
        The names that were missing and have been defined (empty on scikit-learn <= 1.8).
    """
    tree = importlib.import_module("sklearn.tree._tree")
    restored = []
    for name, value in REMOVED_TREE_ALIASES.items():
        if not hasattr(tree, name):
            setattr(tree, name, value)
            restored.append(name)
    return restored


def import_diffprivlib() -> ModuleType:
    """Import diffprivlib (after the compatibility step) and return the module.

    Returns
    -------
    module
        ``diffprivlib``, with ``diffprivlib.models``, ``diffprivlib.accountant`` and
        ``diffprivlib.utils`` loaded.

    Raises
    ------
    DiffprivlibUnavailableError
        If diffprivlib is not installed or fails to import; the message gives the
        original error.

    Examples
    --------
    >>> from privconf_sklearn import import_diffprivlib
    >>> dp = import_diffprivlib()
    >>> model = dp.models.GaussianNB(epsilon=1.0, bounds=(0.0, 1.0))
    """
    restore_removed_tree_aliases()
    try:
        module = importlib.import_module("diffprivlib")
        for part in ("accountant", "models", "utils"):
            importlib.import_module(f"diffprivlib.{part}")
    except Exception as exc:  # any failure inside diffprivlib's own imports
        raise DiffprivlibUnavailableError(
            f"diffprivlib cannot be imported: {type(exc).__name__}: {exc}"
        ) from exc
    order_worker_imports()
    return module


def diffprivlib_unavailable_reason() -> str | None:
    """Why diffprivlib cannot be imported here, or None if it can."""
    try:
        import_diffprivlib()
    except DiffprivlibUnavailableError as exc:
        return str(exc)
    return None


def default_accountant() -> Any:
    """The process-wide default diffprivlib ``BudgetAccountant`` (``accountant=None``).

    Raises
    ------
    DiffprivlibUnavailableError
        If diffprivlib cannot be imported, with what to do instead.
    """
    try:
        module = import_diffprivlib()
    except DiffprivlibUnavailableError as exc:
        raise DiffprivlibUnavailableError(
            f"accountant=None spends the calibration budget on diffprivlib's default "
            f"BudgetAccountant, but {exc}. Nothing was read or spent. Pass a ledger "
            "explicitly: accountant=<an object with check(epsilon, delta) and "
            "spend(epsilon, delta) methods>, such as a diffprivlib BudgetAccountant "
            "once diffprivlib imports, or your own ledger."
        ) from exc
    return module.accountant.BudgetAccountant.load_default(None)


_LEAK_WARNING: type[Warning] | None = None


def privacy_leak_warning() -> type[Warning]:
    """The category to warn with: :class:`PrivacyLeakWarning`, also diffprivlib's when importable.

    Returns
    -------
    type
        :class:`PrivacyLeakWarning` itself when diffprivlib cannot be imported;
        otherwise a subclass of both it and ``diffprivlib.utils.PrivacyLeakWarning``
        (created once).
    """
    global _LEAK_WARNING
    if _LEAK_WARNING is None:
        try:
            module = import_diffprivlib()
        except DiffprivlibUnavailableError:
            return PrivacyLeakWarning
        _LEAK_WARNING = type(
            "PrivacyLeakWarning",
            (PrivacyLeakWarning, module.utils.PrivacyLeakWarning),
            {
                "__doc__": PrivacyLeakWarning.__doc__,
                "__module__": __name__,
                "__qualname__": "PrivacyLeakWarning",
            },
        )
    return _LEAK_WARNING


def warn_privacy_leak(message: str) -> None:
    """Warn with :func:`privacy_leak_warning`'s category, at the user's line."""
    warn_at_caller(message, privacy_leak_warning())
