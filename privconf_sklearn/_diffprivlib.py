"""diffprivlib, imported only where it is used, and the one step it needs on scikit-learn 1.9.

diffprivlib is a dependency (its ``BudgetAccountant`` is the default privacy ledger and
its models are the private models the documentation wraps), but nothing in this package
needs it to *compute* anything: prediction sets, intervals, mechanisms and cards work
with any scikit-learn model. ``import privconf_sklearn`` does not import it. Only this
module does, and only when asked:

- ``accountant=None`` (the default ledger): :func:`default_accountant` imports diffprivlib
  and returns its process-wide default ``BudgetAccountant``. If diffprivlib cannot be
  imported, it raises :class:`DiffprivlibUnavailableError` (before the estimator reads
  any data) saying what to do: pass a ledger explicitly. Budget accounting never stops
  silently.
- ``score_bounds=None`` in the regressor warns with :class:`PrivacyLeakWarning`, defined
  here; when diffprivlib has been imported (by anyone) the warning is also an instance of
  diffprivlib's own ``PrivacyLeakWarning`` (:func:`privacy_leak_warning`), so filters on
  either class catch it. Warning never imports diffprivlib: a filter on diffprivlib's
  class exists only once diffprivlib is imported.
- Users: :func:`import_diffprivlib` returns the module (``import_diffprivlib().models``).

**The compatibility step (scikit-learn >= 1.9).** diffprivlib 0.6.6, the newest release,
imports all its models from its package ``__init__``; ``diffprivlib/models/forest.py``
does ``from sklearn.tree._tree import DOUBLE, DTYPE``, two names scikit-learn removed in
1.9. Up to scikit-learn 1.8 they were plain aliases of numpy scalar types,
``DOUBLE = numpy.float64`` and ``DTYPE = numpy.float32``, and diffprivlib uses them only
as dtypes. :func:`restore_removed_tree_aliases` defines each of the two names on
``sklearn.tree._tree`` *if and only if it is missing*, with exactly its old value, and
touches nothing else; on scikit-learn <= 1.8 it does nothing. ``import privconf_sklearn``
runs it (and nothing else outside the package), so that in any process that imported
this package first, diffprivlib imports: a script's ``from diffprivlib.models import
GaussianNB`` after ``import privconf_sklearn``, and every process that unpickles one of
this package's estimators wrapping a diffprivlib model (the estimator's class is
unpickled, hence this package imported, before the model inside it). diffprivlib's
``LogisticRegression`` still fails on scikit-learn >= 1.8, in its own ``__init__`` (it
passes ``multi_class``, which scikit-learn removed); nothing in this package uses it.

**What no import order can fix: joblib workers of scikit-learn.** diffprivlib's import
adds a filter on its ``PrivacyLeakWarning`` to ``warnings.filters``, and scikit-learn
>= 1.7 (``sklearn.utils.parallel``) sends the caller's warning filters with every task
to its joblib workers, where they are unpickled *before* the task's function and
arguments. A fresh worker process therefore imports diffprivlib before anything else,
and on scikit-learn >= 1.9 that import fails: in a process that imported diffprivlib,
every process-based parallel job of scikit-learn (``cross_val_score(..., n_jobs=2)``,
``GridSearchCV(n_jobs=2)``, of any estimator) fails with ``BrokenProcessPool``. The
package does not work around this globally. The remedy is per job: run the step in each
worker first (joblib >= 1.5)::

    with joblib.parallel_config(backend="loky", initializer=restore_removed_tree_aliases):
        GridSearchCV(..., n_jobs=2).fit(X, y)

or use joblib's threading backend (``joblib.parallel_config(backend="threading")``,
which is also the way to run searches over this package's estimators, whose copies in
other processes refuse to spend privacy budget).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

import numpy as np

from ._warnings import warn_at_caller

__all__ = [
    "DiffprivlibUnavailableError",
    "PrivacyLeakWarning",
    "default_accountant",
    "import_diffprivlib",
    "privacy_leak_warning",
    "restore_removed_tree_aliases",
]

#: The aliases scikit-learn <= 1.8 defined in ``sklearn.tree._tree`` and removed in 1.9.
REMOVED_TREE_ALIASES: dict[str, type] = {"DOUBLE": np.float64, "DTYPE": np.float32}


class DiffprivlibUnavailableError(ImportError):
    """diffprivlib is needed for what was asked (e.g. its default ledger) but cannot be imported."""


class PrivacyLeakWarning(RuntimeWarning):
    """A choice made from the private data breaks the privacy guarantee.

    Raised e.g. by ``PrivateConformalRegressor(score_bounds=None)``, which takes the
    score range from the calibration data. When diffprivlib has been imported, the
    warning raised is also an instance of ``diffprivlib.utils.PrivacyLeakWarning``.
    """


def restore_removed_tree_aliases() -> list[str]:
    """Define ``sklearn.tree._tree.DOUBLE`` / ``DTYPE`` where scikit-learn removed them.

    The one change this package makes outside itself, run by ``import privconf_sklearn``:
    diffprivlib 0.6.6 cannot be imported on scikit-learn >= 1.9 without it. Each name is
    set to its value of scikit-learn <= 1.8 (``numpy.float64``, ``numpy.float32``) only if
    it is missing. Also the ``initializer`` that lets process-based joblib workers of
    scikit-learn import diffprivlib (see the module description).

    Returns
    -------
    list of str
        The names that were missing and have been defined (empty on scikit-learn <= 1.8,
        and on every later call).

    Examples
    --------
    >>> import joblib
    >>> from privconf_sklearn import restore_removed_tree_aliases
    >>> with joblib.parallel_config(backend="loky", initializer=restore_removed_tree_aliases):
    ...     pass  # GridSearchCV(..., n_jobs=2).fit(X, y) after importing diffprivlib
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
    return module


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
    """The category to warn with: :class:`PrivacyLeakWarning`, also diffprivlib's if imported.

    Never imports diffprivlib: while it is not imported, nobody can have a filter on its
    class.

    Returns
    -------
    type
        :class:`PrivacyLeakWarning` itself while diffprivlib is not imported; afterwards
        a subclass of both it and ``diffprivlib.utils.PrivacyLeakWarning`` (created once).
    """
    global _LEAK_WARNING
    if _LEAK_WARNING is None:
        utils = sys.modules.get("diffprivlib.utils")
        theirs = getattr(utils, "PrivacyLeakWarning", None)
        if theirs is None:
            return PrivacyLeakWarning
        _LEAK_WARNING = type(
            "PrivacyLeakWarning",
            (PrivacyLeakWarning, theirs),
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
