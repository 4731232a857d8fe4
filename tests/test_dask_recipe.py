"""The dask scale-out recipe gives exactly the in-memory prediction sets, on a local
cluster that listens on 127.0.0.1 only."""

import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
pytest.importorskip("distributed")

from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.linear_model import LinearRegression  # noqa: E402
from sklearn.naive_bayes import GaussianNB  # noqa: E402

from privconf_sklearn import PrivateConformalClassifier, PrivateConformalRegressor  # noqa: E402
from privconf_sklearn.dask import local_cluster, predict_set_blocks  # noqa: E402
from privconf_sklearn.datasets import make_two_gaussians  # noqa: E402
from privconf_sklearn.mechanisms import ExponQ, SplitConformal  # noqa: E402


@pytest.fixture(scope="module")
def client():
    with local_cluster(n_workers=1, threads_per_worker=2, processes=False) as client:
        yield client


@pytest.fixture(scope="module")
def classifier():
    X, y = make_two_gaussians(3000, random_state=0)
    model = GaussianNB().fit(X[:1500], y[:1500])
    return PrivateConformalClassifier(
        model, mechanism=ExponQ(epsilon=1.0), random_state=0
    ).fit_calibrate(X[1500:], y[1500:])


def test_cluster_listens_on_loopback_only(client):
    psutil = pytest.importorskip("psutil")
    info = client.scheduler_info()
    assert info["address"].startswith("tcp://127.0.0.1:")
    assert info["workers"] and all(w.startswith("tcp://127.0.0.1:") for w in info["workers"])
    # Scheduler and worker run in this process (processes=False): every socket it
    # listens on (scheduler, worker, the scheduler's HTTP routes) is on the loopback.
    listening = [
        c.laddr.ip
        for c in psutil.Process().net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]
    assert listening and set(listening) <= {"127.0.0.1", "::1"}


def test_two_clusters_at_once_do_not_clash(client):
    """The scheduler's HTTP endpoint takes a free port, not dask's default 8787: a second
    cluster beside the fixture's starts without a port-clash warning (two test workers,
    or a user's own cluster, on one machine)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with local_cluster(n_workers=1, processes=False) as second:
            ports = [c.scheduler_info()["services"]["dashboard"] for c in (client, second)]
    assert len(set(ports)) == 2 and 8787 not in ports


def test_the_scheduler_serves_only_its_health_check(client):
    """No dashboard, worker list, identity or proxy page: only /health answers."""
    import urllib.error
    import urllib.request

    port = client.scheduler_info()["services"]["dashboard"]

    def status(route):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{route}", timeout=10) as page:
                return page.status
        except urllib.error.HTTPError as error:
            return error.code

    assert status("/health") == 200
    for route in ("/status", "/json/identity.json", "/info/main/workers.html", "/proxy/8786/x"):
        assert status(route) == 404, route


@pytest.mark.parametrize("chunks", [(997, 8), (250, 3), (5000, 8)])
def test_classifier_sets_equal_in_memory_sets(client, classifier, chunks):
    X = np.random.default_rng(1).normal(size=(5000, 8))
    lazy = predict_set_blocks(classifier, da.from_array(X, chunks=chunks))
    assert lazy.shape == (5000, 2) and lazy.dtype == bool
    assert lazy.chunks[0] == da.from_array(X, chunks=chunks).chunks[0]
    np.testing.assert_array_equal(lazy.compute(), classifier.predict_set(X))


def test_regressor_intervals_equal_in_memory_intervals(client):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(4000, 3))
    y = X @ [1.0, -2.0, 0.5] + rng.normal(size=4000)
    regressor = PrivateConformalRegressor(
        LinearRegression().fit(X[:1000], y[:1000]),
        mechanism=SplitConformal(),
        score_bounds=(0.0, 10.0),
    ).fit_calibrate(X[1000:2000], y[1000:2000])
    lazy = predict_set_blocks(regressor, da.from_array(X, chunks=(333, 3)))
    assert lazy.shape == (4000, 2) and lazy.dtype == np.float64
    np.testing.assert_array_equal(lazy.compute(), regressor.predict_set(X))


def test_bad_input(classifier):
    with pytest.raises(ValueError, match="two-dimensional dask array"):
        predict_set_blocks(classifier, np.zeros((3, 8)))
    with pytest.raises(ValueError, match="two-dimensional dask array"):
        predict_set_blocks(classifier, da.zeros(8, chunks=4))
    unfitted = PrivateConformalClassifier(GaussianNB(), mechanism=ExponQ(epsilon=1.0))
    with pytest.raises(NotFittedError):
        predict_set_blocks(unfitted, da.zeros((3, 8), chunks=(2, 8)))
