"""A calibration reserves its exact spend before it reads data; ledgers survive PID reuse.

- Reservation: the spend is checked and recorded in one step under the ledger's lock
  once the inputs are checked, before the model sees a calibration row; of two threads
  racing for a ledger with room for one calibration, the loser raises having read
  nothing. The reservation equals the final record (zero for a request that is
  infeasible from public sizes) and is final.
- Ledger references: a pickled estimator finds its ledger again only in the process
  that pickled it, told apart by a random token (not the process id, which another
  process can reuse), drawn again in a forked child.
"""

import copy
import math
import os
import pickle
import select
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace

import numpy as np
import pytest
from sklearn.naive_bayes import GaussianNB

from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn._ledger import DetachedLedger, DetachedLedgerError
from privconf_sklearn.cards import Contract
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.mechanisms import CoverageCertificate, ExponQ, FedCP2QQ
from privconf_sklearn.model_selection import CertificateAwareSearch
from privconf_sklearn.privacy import PrivacyGuarantee

from ._hang import no_hang

#: Seconds a watched model holds its first predict_proba call: ample time for a second
#: thread to pass any budget check that does not see the first thread's spend.
HOLD = 0.3


class WatchedNB(GaussianNB):
    """Records every predict_proba call (rows asked for), holding each for HOLD seconds."""

    def predict_proba(self, X):
        self.calls_.append(len(X))
        time.sleep(HOLD)
        return super().predict_proba(X)


class BrokenNB(GaussianNB):
    """A fitted model whose predict_proba fails (after the reservation)."""

    def predict_proba(self, X):
        raise RuntimeError("the model broke")


class OneCalibrationLedger:
    """Room for one calibration: refuses once anything is recorded.

    Deliberately not thread-safe by itself (check, a pause, then append): the package's
    lock must make the check and the record one step.
    """

    def __init__(self):
        self.records = []

    def check(self, epsilon, delta):
        if self.records:
            raise RuntimeError("over budget")

    def spend(self, epsilon, delta):
        self.check(epsilon, delta)
        time.sleep(HOLD)
        self.records.append((epsilon, delta))


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


def watched(model):
    """A copy of the fitted ``model`` that records its predict_proba calls."""
    copied = copy.deepcopy(model)
    copied.__class__ = WatchedNB
    copied.calls_ = []
    return copied


AGENTS = np.repeat(np.arange(4), 500)

CONFIGURATIONS = {
    "central": (dict(mechanism=ExponQ(epsilon=1.0)), {}),
    "mondrian": (dict(mechanism=ExponQ(epsilon=1.0), mondrian="class", group_sizes="public"), {}),
    "federated": (dict(mechanism=FedCP2QQ(epsilon=1.0)), {"groups": AGENTS}),
}


def race(calibrate):
    """Run ``calibrate(0)`` and ``calibrate(1)`` in two threads started together."""
    barrier = threading.Barrier(2)
    outcomes = [None, None]

    def run(i):
        barrier.wait()
        try:
            outcomes[i] = calibrate(i)
        except Exception as exc:  # the loser's refusal, checked by the caller
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    with no_hang():
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return outcomes


def assert_one_winner(outcomes, models, estimators, refusal):
    winners = [i for i, o in enumerate(outcomes) if isinstance(o, PrivateConformalClassifier)]
    assert len(winners) == 1, outcomes
    loser = 1 - winners[0]
    assert isinstance(outcomes[loser], refusal), outcomes[loser]
    assert models[loser].calls_ == []  # refused before its model saw a calibration row
    assert models[winners[0]].calls_ == [2000]
    assert not hasattr(estimators[loser], "calibration_")
    return estimators[winners[0]]


# ---------------------------------------------------------------- reservation
@pytest.mark.parametrize("name", sorted(CONFIGURATIONS))
def test_two_threads_one_budget_the_loser_reads_nothing(data, name):
    """The audit's case: both threads used to pass the check and read their data."""
    model, X, y = data
    params, kwargs = CONFIGURATIONS[name]
    ledger = OneCalibrationLedger()
    models = [watched(model), watched(model)]
    estimators = [
        PrivateConformalClassifier(m, accountant=ledger, random_state=0, **params) for m in models
    ]
    outcomes = race(lambda i: estimators[i].fit_calibrate(X, y, **kwargs))
    winner = assert_one_winner(outcomes, models, estimators, RuntimeError)
    assert ledger.records == [winner.calibration_.privacy.accountant_spend()]


def test_two_threads_on_a_diffprivlib_accountant(data, dp):
    model, X, y = data
    ledger = dp.accountant.BudgetAccountant(epsilon=1.0)
    models = [watched(model), watched(model)]
    estimators = [
        PrivateConformalClassifier(m, mechanism=ExponQ(epsilon=1.0), accountant=ledger)
        for m in models
    ]
    outcomes = race(lambda i: estimators[i].fit_calibrate(X, y))
    assert_one_winner(outcomes, models, estimators, dp.utils.BudgetError)
    assert ledger.spent_budget == [(1.0, 0)]


def _search(model, ledger):
    return CertificateAwareSearch(
        PrivateConformalClassifier(
            model, mechanism=ExponQ(epsilon=1.0), accountant=ledger, random_state=0
        ),
        contract=Contract(0.7, max_epsilon_train=math.inf, max_epsilon_cal=1.0, beta=0),
        param_grid={"alpha": [0.2], "calibration_size": [1000]},
        random_state=0,
    )


def test_two_searches_one_budget_the_loser_reads_nothing(data):
    """CertificateAwareSearch charges its composed spend before its first calibration."""
    model, X, y = data
    ledger = OneCalibrationLedger()
    models = [watched(model), watched(model)]
    searches = [_search(m, ledger) for m in models]
    outcomes = race(lambda i: searches[i].fit(X, y))
    winners = [i for i, o in enumerate(outcomes) if isinstance(o, CertificateAwareSearch)]
    assert len(winners) == 1, outcomes
    loser = 1 - winners[0]
    assert isinstance(outcomes[loser], RuntimeError) and models[loser].calls_ == []
    assert not hasattr(searches[loser], "card_")
    assert models[winners[0]].calls_ == [1000]
    assert ledger.records == [(1.0, 0.0)]


def test_reservation_is_final_when_the_model_fails_afterwards(data):
    """The estimator keeps its previous fit; the reservation stays on the ledger."""
    model, X, y = data
    ledger = RecordingLedger()
    estimator = PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=1.0), accountant=ledger, random_state=0
    ).fit_calibrate(X, y)
    before = {k: v for k, v in vars(estimator).items() if k != "estimator"}
    broken = copy.deepcopy(model)
    broken.__class__ = BrokenNB
    with pytest.raises(RuntimeError, match="the model broke"):
        estimator.set_params(estimator=broken).fit_calibrate(X, y)
    after = {k: v for k, v in vars(estimator).items() if k != "estimator"}
    assert after.keys() == before.keys() and all(after[k] is v for k, v in before.items())
    assert ledger.records == [(1.0, 0.0), (1.0, 0.0)]


@pytest.mark.parametrize(
    ("mechanism", "groups"),
    [(ExponQ(epsilon=0.1), None), (FedCP2QQ(epsilon=1.0), np.arange(30) % 3)],
    ids=["central", "federated"],
)
def test_infeasible_request_reserves_nothing(data, mechanism, groups):
    """Infeasible from the public sizes: the release reads nothing, nothing is reserved."""
    model, X, y = data
    ledger = RecordingLedger()
    estimator = PrivateConformalClassifier(model, mechanism=mechanism, accountant=ledger)
    with pytest.warns(UserWarning):
        estimator.fit_calibrate(X[:30], y[:30], groups=groups)
    assert not estimator.calibration_.feasible
    assert not estimator.calibration_.privacy.reads_data and ledger.records == []


class UnreachableCertificate(ExponQ):
    """Breaks the mechanism contract: certifies infeasibility, yet its release reads data."""

    def coverage_certificate(self, n_samples, alpha):
        return CoverageCertificate(1.0, feasible=False, reason="says so")


class ReachableCertificate(ExponQ):
    """Breaks the mechanism contract the other way: its releases read nothing."""

    def calibrate(self, scores, alpha, *, groups=None, random_state=None):
        release = super().calibrate(scores, alpha, groups=groups, random_state=random_state)
        return replace(release, privacy=PrivacyGuarantee.untouched("claims no read"))


@pytest.mark.parametrize(
    ("mechanism", "reserved"),
    [(UnreachableCertificate(epsilon=1.0), []), (ReachableCertificate(epsilon=1.0), [(1.0, 0.0)])],
)
def test_a_release_that_does_not_match_its_reservation_is_discarded(data, mechanism, reserved):
    """A third-party mechanism whose certificate misstates whether it reads data."""
    model, X, y = data
    ledger = RecordingLedger()
    estimator = PrivateConformalClassifier(model, mechanism=mechanism, accountant=ledger)
    with pytest.raises(RuntimeError, match="Privacy accounting mismatch"):
        estimator.fit_calibrate(X, y)
    assert not hasattr(estimator, "calibration_") and ledger.records == reserved


@pytest.mark.parametrize(
    ("mechanism", "groups", "match"),
    [
        (FedCP2QQ(epsilon=1.0, n_agents=3), AGENTS, "groups define 4 agents but n_agents = 3"),
        (FedCP2QQ(epsilon=1.0), np.zeros(2000), "at least two agents"),
        (FedCP2QQ(epsilon=1.0), None, "needs groups"),
        (ExponQ(epsilon=1.0), AGENTS, "takes no groups"),
    ],
)
def test_bad_agent_ids_are_refused_before_anything_is_read_or_reserved(
    data, mechanism, groups, match
):
    model, X, y = data
    model, ledger = watched(model), RecordingLedger()
    estimator = PrivateConformalClassifier(model, mechanism=mechanism, accountant=ledger)
    with pytest.raises(ValueError, match=match):
        estimator.fit_calibrate(X, y, groups=groups)
    assert model.calls_ == [] and ledger.records == []


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


@pytest.mark.slow  # a fresh interpreter imports the package: a few seconds
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


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_inherit_held_locks(data):
    """Locks held by another thread at the fork are never released in the child: it
    gets fresh ones (held here by this thread, as a reserving thread would)."""
    from privconf_sklearn import _ledger

    model, _, _ = data
    inherited = RecordingLedger()

    def work():
        own = RecordingLedger()
        _ledger.reserve(inherited, 1.0, 0.0)  # its lock was held at the fork
        _ledger.reserve(own, 0.5, 0.0)
        again = pickle.loads(pickle.dumps(estimator_on(model, own)))
        return f"{inherited.records} {own.records} {again.accountant is own}"

    with _ledger._lock_of(inherited), _ledger._REGISTRY_LOCK:
        answer = _in_forked_child(work)
    assert answer == "[(1.0, 0.0)] [(0.5, 0.0)] True"


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
