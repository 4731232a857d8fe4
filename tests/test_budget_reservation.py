"""Ledgers survive PID reuse; a zCDP statement that converts to epsilon = 0 still counts.

A pickled estimator finds its ledger again only in the process that pickled it, told
apart by a random token (not the process id, which another process can reuse), drawn
again in a forked child.
"""

import os
import pickle
import select
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from sklearn.naive_bayes import GaussianNB

from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn._ledger import DetachedLedger, DetachedLedgerError
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.mechanisms import ExponQ
from privconf_sklearn.privacy import PrivacyGuarantee


class RecordingLedger:
    """A ledger without a budget that records every spend."""

    def __init__(self):
        self.records = []

    def check(self, epsilon, delta):
        pass

    def spend(self, epsilon, delta):
        self.records.append((epsilon, delta))


@pytest.fixture(scope="module")
def data():
    X, y = make_two_gaussians(5000, random_state=3)
    model = GaussianNB().fit(X[:3000], y[:3000])
    return model, X[3000:], y[3000:]


# ------------------------------------------------------------------- privacy
def test_zcdp_statement_converted_to_epsilon_zero_is_restated_with_group_privacy():
    """Under replace-one an add/remove zCDP statement costs 4 rho, also when its
    conversion at delta rounds to epsilon = 0: it still read data."""
    statement = PrivacyGuarantee("zcdp", 0.0, 1e-3, 1e-7, adjacency="add/remove")
    assert statement.reads_data
    restated = statement.under("replace-one")
    assert restated.rho == pytest.approx(4e-7, rel=1e-15) and restated.delta == 1e-3
    untouched = PrivacyGuarantee.untouched("nothing read")
    assert not untouched.reads_data and untouched.under("add/remove").holds


# ---------------------------------------------------------- ledger references
def _run(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_process_with_the_same_pid_gets_a_detached_ledger(data, tmp_path):
    """The audit's case: an estimator unpickled by another process that has the same PID
    (PID 1 in containers; simulated here) used to get that process's fresh default
    ledger, bypassing the owner's spent cap."""
    model, X, y = data
    estimator = PrivateConformalClassifier(model, mechanism=ExponQ(epsilon=1.0))
    path = tmp_path / "estimator.pkl"
    path.write_bytes(pickle.dumps(estimator))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    result = _run(
        """
        import os, pickle, sys
        import numpy as np
        os.getpid = lambda: int(sys.argv[1])  # the pickling process's id
        import privconf_sklearn
        folder = sys.argv[2]
        estimator = pickle.loads(open(folder + "/estimator.pkl", "rb").read())
        print(type(estimator.accountant).__name__)
        try:
            estimator.fit_calibrate(np.load(folder + "/X.npy"), np.load(folder + "/y.npy"))
        except Exception as exc:
            print(type(exc).__name__)
        """,
        str(os.getpid()),
        str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["DetachedLedger", "DetachedLedgerError"]


def estimator_on(model, ledger):
    return PrivateConformalClassifier(model, mechanism=ExponQ(epsilon=1.0), accountant=ledger)


def _in_forked_child(work) -> str:
    """``work()`` in a forked child; its returned text (or the error) comes back."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read)
            try:
                text = work()
            except BaseException as exc:  # reported to the parent
                text = f"{type(exc).__name__}: {exc}"
            os.write(write, text.encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], 60)
        if not ready:
            os.kill(pid, 9)
            return "HANG"
        chunks = []
        while chunk := os.read(read, 65536):
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        os.close(read)
        os.waitpid(pid, 0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_resolve_to_its_copy_of_the_ledger(data):
    """The child holds a copy of every ledger: references made in the parent detach, and
    references the child makes to its own ledgers resolve."""
    model, _, _ = data
    ledger = RecordingLedger()
    given = pickle.dumps(estimator_on(model, ledger))
    default = pickle.dumps(estimator_on(model, None))

    def work():
        own = RecordingLedger()
        again = pickle.loads(pickle.dumps(estimator_on(model, own)))
        return " ".join(
            [
                type(pickle.loads(given).accountant).__name__,
                type(pickle.loads(default).accountant).__name__,
                str(again.accountant is own),
            ]
        )

    assert _in_forked_child(work) == "DetachedLedger DetachedLedger True"
    # In the parent, nothing changed.
    assert pickle.loads(given).accountant is ledger
    assert pickle.loads(default).accountant is None


def test_a_reference_pickled_with_a_process_id_is_detached(data):
    """Estimators pickled by versions that stored the process id stay detached."""
    model, _, _ = data
    state = estimator_on(model, None).__getstate__()
    old = object.__new__(type(state["accountant"]))
    old.__dict__.update(pid=os.getpid(), token=None, default=True, description="old")
    restored = PrivateConformalClassifier.__new__(PrivateConformalClassifier)
    restored.__setstate__({**state, "accountant": old})
    assert isinstance(restored.accountant, DetachedLedger)
    with pytest.raises(DetachedLedgerError):
        restored.accountant.check(1.0, 0.0)
