"""``import privconf_sklearn`` changes nothing outside the package but two missing aliases.

diffprivlib 0.6.6 imports ``DOUBLE`` and ``DTYPE`` from ``sklearn.tree._tree``, which
scikit-learn 1.9 removed; the package defines them there, only where missing, and does
nothing else outside itself: no warning filter, no diffprivlib import. Each test runs
in a fresh interpreter. Where it matters, a ``sitecustomize`` removes the two aliases at
the start of every interpreter (joblib's worker processes included), so that every
scikit-learn version behaves as 1.9 does.
"""

import os
import subprocess
import sys
import textwrap

import pytest
import sklearn

#: scikit-learn >= 1.7 sends the caller's warning filters to its joblib workers.
SHIPS_WARNING_FILTERS = tuple(int(p) for p in sklearn.__version__.split(".")[:2]) >= (1, 7)

WITHOUT_ALIASES = (
    "import sklearn.tree._tree as tree\n"
    "for name in ('DOUBLE', 'DTYPE'):\n"
    "    if hasattr(tree, name):\n"
    "        delattr(tree, name)\n"
)


def _run(code: str, tmp_path=None) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (every one without the aliases if ``tmp_path``)."""
    env = dict(os.environ)
    if tmp_path is not None:
        (tmp_path / "sitecustomize.py").write_text(WITHOUT_ALIASES)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _lines(result) -> dict[str, str]:
    return dict(line.split(" ", 1) for line in result.stdout.splitlines() if " " in line)


def test_import_changes_nothing_outside_the_package_but_the_missing_aliases(dp, tmp_path):
    """Everything the import loads from other packages is loaded first; then the import
    may add only privconf_sklearn modules and the two aliases (removed beforehand, as on
    scikit-learn >= 1.9), never a warning filter. The aliases have their old values, and
    diffprivlib, imported directly afterwards, trains a forest."""
    listed = _run(
        """
        import sys
        import privconf_sklearn
        print("\\n".join(m for m in sys.modules if not m.startswith("privconf_sklearn")))
        """
    )
    (tmp_path / "dependencies.txt").write_text(listed.stdout)
    result = _run(
        f"""
        import importlib, sys, warnings
        for name in open({str(tmp_path / "dependencies.txt")!r}).read().split():
            if name != "__main__":
                try:
                    importlib.import_module(name)
                except Exception:  # e.g. a private alias that only its parent can import
                    pass
        import sklearn.tree._tree as tree
        filters, modules, tree_names = list(warnings.filters), set(sys.modules), set(vars(tree))
        import privconf_sklearn
        new = sorted(m for m in set(sys.modules) - modules if not m.startswith("privconf_sklearn"))
        print("FILTERS", warnings.filters == filters)
        print("MODULES", new)
        print("TREE", sorted(set(vars(tree)) - tree_names))
        print("DIFFPRIVLIB", "diffprivlib" in sys.modules)
        import numpy as np
        print("ALIASES", tree.DOUBLE is np.float64 and tree.DTYPE is np.float32)
        from diffprivlib.models import RandomForestClassifier
        X = np.random.default_rng(0).uniform(size=(200, 2)); y = (X[:, 0] > 0.5).astype(int)
        forest = RandomForestClassifier(
            epsilon=5.0, bounds=(0, 1), classes=[0, 1], n_estimators=5, random_state=0
        ).fit(X, y)
        print("FOREST", forest.predict_proba(X[:3]).shape)
        print("AGAIN", privconf_sklearn.restore_removed_tree_aliases())
        """,
        tmp_path,
    )
    assert _lines(result) == {
        "FILTERS": "True",
        "MODULES": "[]",
        "TREE": "['DOUBLE', 'DTYPE']",
        "DIFFPRIVLIB": "False",
        "ALIASES": "True",
        "FOREST": "(3, 2)",
        "AGAIN": "[]",
    }


def test_diffprivlib_is_imported_only_where_it_is_used(dp):
    """A warning about a privacy leak does not import diffprivlib (nobody can filter its
    class before importing it); once diffprivlib is imported, the warning is an instance
    of its PrivacyLeakWarning too. The default ledger does import it."""
    result = _run(
        """
        import sys, warnings
        import numpy as np
        from sklearn.linear_model import LinearRegression
        import privconf_sklearn
        from privconf_sklearn import PrivateConformalRegressor
        from privconf_sklearn.mechanisms import ExponQ

        class Ledger:
            def check(self, epsilon, delta): pass
            def spend(self, epsilon, delta): pass

        rng = np.random.default_rng(0)
        X = rng.normal(size=(2000, 2)); y = X[:, 0] + rng.normal(size=2000)
        model = LinearRegression().fit(X[:1000], y[:1000])

        def leak(accountant):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                PrivateConformalRegressor(
                    model, mechanism=ExponQ(1.0), accountant=accountant, random_state=0
                ).fit_calibrate(X[1000:], y[1000:])
            return [w.category for w in caught if issubclass(w.category, RuntimeWarning)]

        print("BEFORE", [c is privconf_sklearn.PrivacyLeakWarning for c in leak(Ledger())])
        print("LOADED", "diffprivlib" in sys.modules)
        leak(None)  # the default ledger is diffprivlib's
        print("DEFAULT", "diffprivlib" in sys.modules)
        from diffprivlib.utils import PrivacyLeakWarning
        print("AFTER", [issubclass(c, PrivacyLeakWarning) for c in leak(Ledger())])
        """
    )
    assert _lines(result) == {
        "BEFORE": "[True]",
        "LOADED": "False",
        "DEFAULT": "True",
        "AFTER": "[True]",
    }


def test_aliases_left_untouched_when_present(dp):
    import sklearn.tree._tree as tree

    if not hasattr(tree, "DOUBLE"):
        pytest.skip("scikit-learn >= 1.9 has no DOUBLE alias of its own")
    before = (tree.DOUBLE, tree.DTYPE)
    from privconf_sklearn import import_diffprivlib, restore_removed_tree_aliases

    assert restore_removed_tree_aliases() == []
    import_diffprivlib()
    assert (tree.DOUBLE, tree.DTYPE) == before


#: A fitted estimator wrapping a diffprivlib model, and its sets in this process.
_FITTED = """
    import sys
    import joblib
    import numpy as np
    from sklearn.utils.parallel import Parallel, delayed
    import privconf_sklearn
    from diffprivlib.models import GaussianNB  # after privconf_sklearn, as documented
    from privconf_sklearn import PrivateConformalClassifier
    from privconf_sklearn.mechanisms import ExponQ

    class Ledger:
        def check(self, epsilon, delta): pass
        def spend(self, epsilon, delta): pass

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 2)); y = (X[:, 0] > 0).astype(int)
    model = GaussianNB(epsilon=2.0, bounds=(-5, 5), random_state=0).fit(X[:1000], y[:1000])
    pcc = PrivateConformalClassifier(model, mechanism=ExponQ(1.0), accountant=Ledger(),
                                     random_state=0).fit_calibrate(X[1000:2000], y[1000:2000])
    expected = pcc.predict_set(X[2000:])
    parts = np.array_split(X[2000:], 4)
"""


@pytest.mark.slow
def test_joblib_workers_unpickle_wrapped_diffprivlib_models(dp, tmp_path):
    """Process-based joblib workers (their interpreters without the aliases) unpickle an
    estimator wrapping a diffprivlib model: unpickling the estimator's class imports
    privconf_sklearn, hence the aliases, before the diffprivlib model inside it."""
    result = _run(
        _FITTED
        + """
    sets = joblib.Parallel(n_jobs=2, backend="loky")(
        joblib.delayed(pcc.predict_set)(part) for part in parts
    )
    print("EQUAL", bool((np.vstack(sets) == expected).all()))
    """,
        tmp_path,
    )
    assert _lines(result) == {"EQUAL": "True"}


@pytest.mark.slow
def test_scikit_learn_workers_need_the_documented_initializer(dp, tmp_path):
    """What no import order fixes. A worker that unpickles a bare diffprivlib model imports
    diffprivlib before this package. And scikit-learn >= 1.7 sends diffprivlib's warning
    filter to its workers, which unpickle it (importing diffprivlib) before the task: with
    diffprivlib imported here, cross-validating even a plain scikit-learn model fails.
    Both work once each worker runs ``restore_removed_tree_aliases`` first, the documented
    joblib initializer; so does predicting with an estimator wrapping a diffprivlib model
    in scikit-learn's own ``Parallel``."""
    result = _run(
        _FITTED
        + """
    from joblib.externals.loky.process_executor import BrokenProcessPool
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_score

    def cross_validate(model):
        try:
            return len(cross_val_score(model, X[:1000], y[:1000], cv=2, n_jobs=2))
        except BrokenProcessPool:
            return "broken"

    private_model = GaussianNB(epsilon=2.0, bounds=(-5, 5), random_state=0)
    print("PLAIN_SKLEARN", cross_validate(LogisticRegression()))
    print("PLAIN_DIFFPRIVLIB", cross_validate(private_model))
    initializer = privconf_sklearn.restore_removed_tree_aliases
    with joblib.parallel_config(backend="loky", initializer=initializer):
        print("SKLEARN", cross_validate(LogisticRegression()))
        print("DIFFPRIVLIB", cross_validate(private_model))
        sets = Parallel(n_jobs=2)(delayed(pcc.predict_set)(part) for part in parts)
        print("PREDICTED", bool((np.vstack(sets) == expected).all()))
    """,
        tmp_path,
    )
    assert _lines(result) == {
        "PLAIN_SKLEARN": "broken" if SHIPS_WARNING_FILTERS else "2",
        "PLAIN_DIFFPRIVLIB": "broken",
        "SKLEARN": "2",
        "DIFFPRIVLIB": "2",
        "PREDICTED": "True",
    }
